package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// eventHit is one webhook an event fired: its task, execution, attempt,
// X-Ax-Event-Id, shard, and the event's own index, which the task's
// templated payload copies from the event's payload. The index names the
// event as the test posted it, whatever ids ax gave it: two events posted
// for one index are a double fire even when each is delivered once.
type eventHit struct {
	task, execution, attempt, event, shard, index string
}

// eventReceiver records every webhook and answers 200 after hold (so
// that some are in flight when a replica dies); nothing is retried but
// what a dead replica had in flight.
type eventReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []eventHit
	bad  []string
}

func newEventReceiver(t *testing.T, hold time.Duration) *eventReceiver {
	t.Helper()
	r := &eventReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var body struct {
			I any `json:"i"`
		}
		err := json.Unmarshal(raw, &body)
		h := eventHit{
			task: req.Header.Get("X-Ax-Task-Id"), execution: req.Header.Get("X-Ax-Execution-Id"),
			attempt: req.Header.Get("X-Ax-Attempt"), event: req.Header.Get("X-Ax-Event-Id"),
			shard: req.Header.Get("X-Ax-Shard-Index"), index: fmt.Sprint(body.I),
		}
		if h.shard == "" {
			h.shard = "0"
		}
		r.mu.Lock()
		if err != nil || body.I == nil || h.task == "" || h.execution == "" || h.event == "" ||
			req.Header.Get("Webhook-Id") != h.execution {
			r.bad = append(r.bad, fmt.Sprintf("%v %s", req.Header, raw))
		}
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		time.Sleep(hold)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *eventReceiver) snapshot() ([]eventHit, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hits), slices.Clone(r.bad)
}

// eventsScope is what the events tests' tokens may do.
const eventsScope = "tasks:read tasks:write endpoints:read endpoints:write executions:read events:read events:write"

// eventTask is a task whose schedule is the tests' event.
type eventTask struct {
	id     string
	shards int
}

// fires is how many executions one event fires across tasks.
func fires(tasks []eventTask) int {
	n := 0
	for _, task := range tasks {
		n += task.shards
	}
	return n
}

// createEventTasks creates three tasks scheduled by event name, the last
// with two shards; each payload is the event's index ({"i": …}).
func createEventTasks(t *testing.T, base, tok, endpointID, name string) []eventTask {
	t.Helper()
	var out []eventTask
	for i, shards := range []int{1, 1, 2} {
		task := apiPost(t, base, tok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("%s.%d", name, i), "endpoint_id": endpointID,
			"schedule": map[string]any{"type": "event", "event": name},
			"payload":  map[string]any{"i": "{{ .event.payload.i }}"}, "payload_template": true,
			"shards": shards,
		})
		require.Equal(t, shards, int(task["shards"].(float64)))
		out = append(out, eventTask{id: task["id"].(string), shards: shards})
	}
	return out
}

// eventAnswer is how one POST /v1/events ended: the answer's status, id
// and matched tasks, or the error of a request that got no answer.
type eventAnswer struct {
	code  int
	id    string
	tasks int
	body  string
	err   error
}

// postEvent posts event name with payload {"i": index} and dedupKey ("":
// none). It fails no test (posters are goroutines of their own).
func postEvent(ctx context.Context, base, tok, name string, index int, dedupKey string) eventAnswer {
	body := map[string]any{"name": name, "payload": map[string]any{"i": index}}
	if dedupKey != "" {
		body["dedup_key"] = dedupKey
	}
	code, _, raw, err := send(ctx, http.MethodPost, base+"/v1/events", tok, body)
	if err != nil {
		return eventAnswer{err: err}
	}
	a := eventAnswer{code: code, body: string(raw)}
	var out struct {
		ID      string `json:"id"`
		Matched struct {
			Tasks int `json:"tasks"`
		} `json:"matched"`
	}
	if code == http.StatusAccepted {
		if err := json.Unmarshal(raw, &out); err != nil {
			a.err = fmt.Errorf("decode %s: %w", raw, err)
		}
		a.id, a.tasks = out.ID, out.Matched.Tasks
	}
	return a
}

// listAll pages through a list endpoint (path with its query) and returns
// every item.
func listAll(ctx context.Context, base, tok, path string) ([]map[string]any, error) {
	var items []map[string]any
	cursor := ""
	for {
		page, err := getJSON(ctx, base, tok, path+"&limit=500&cursor="+url.QueryEscape(cursor))
		if err != nil {
			return nil, err
		}
		for _, it := range page["items"].([]any) {
			items = append(items, it.(map[string]any))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			return items, nil
		}
		cursor = next
	}
}

// eventExecutions lists the executions of tasks.
func eventExecutions(ctx context.Context, base, tok string, tasks []eventTask) ([]map[string]any, error) {
	var all []map[string]any
	for _, task := range tasks {
		items, err := listAll(ctx, base, tok, "/v1/executions?task_id="+task.id)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
	}
	return all, nil
}

// waitEventExecutions waits until the tasks have at least want
// executions, every one succeeded (the receiver answers 200), and returns
// them (more than want is for the caller's checks to name).
func waitEventExecutions(t *testing.T, base, tok string, tasks []eventTask, want int, within time.Duration) []map[string]any {
	t.Helper()
	var execs []map[string]any
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		items, err := eventExecutions(t.Context(), base, tok, tasks)
		if !assert.NoError(c, err) || !assert.GreaterOrEqual(c, len(items), want, "executions") {
			return
		}
		for _, x := range items {
			if !assert.Equal(c, "succeeded", x["state"], "execution %s", x["id"]) {
				return
			}
		}
		execs = items
	}, within, 500*time.Millisecond, "every fire is delivered and succeeds")
	return execs
}

// checkEventDeliveries holds the receiver's hits against the executions
// ax lists. By the test's index, whatever event ids ax gave: each (task,
// index, shard) was delivered by exactly one execution, and no attempt of
// an execution arrived twice (without rescued, attempt 1 only: each
// execution arrived once). By ax's list: one execution per (task, event,
// shard) of events (event id → index), each received with its own
// X-Ax-Event-Id, task, shard and the event's payload, and nothing received
// that ax does not list.
func checkEventDeliveries(t *testing.T, recv *eventReceiver, tasks []eventTask, events map[string]int,
	execs []map[string]any, rescued bool,
) {
	t.Helper()
	hits, bad := recv.snapshot()
	require.Empty(t, bad, "webhooks without the ax headers or the event's index")

	// The receiver's view first: what the receiving service would see.
	perIndex := map[string]map[string]bool{} // task/index/shard → execution ids
	perAttempt := map[string]int{}
	perExecution := map[string][]eventHit{}
	for _, h := range hits {
		k := h.task + "/" + h.index + "/" + h.shard
		if perIndex[k] == nil {
			perIndex[k] = map[string]bool{}
		}
		perIndex[k][h.execution] = true
		perAttempt[h.execution+"#"+h.attempt]++
		perExecution[h.execution] = append(perExecution[h.execution], h)
		if !rescued {
			require.Equal(t, "1", h.attempt, "execution %s: a 200 is never retried", h.execution)
		}
	}
	var dups, missing []string
	for k, n := range perAttempt {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("attempt %s ×%d", k, n))
		}
	}
	for _, index := range events {
		for _, task := range tasks {
			for shard := range task.shards {
				k := fmt.Sprintf("%s/%d/%d", task.id, index, shard)
				switch n := len(perIndex[k]); {
				case n == 0:
					missing = append(missing, k)
				case n > 1:
					dups = append(dups, fmt.Sprintf("%s fired by %d executions", k, n))
				}
				delete(perIndex, k)
			}
		}
	}
	slices.Sort(dups)
	require.Empty(t, dups, "task/event index/shard delivered more than once")
	slices.Sort(missing)
	require.Empty(t, missing, "task/event index/shard never delivered")
	require.Empty(t, perIndex, "deliveries of no event the test posted")

	// ax's view: one execution per (task, event, shard), each received
	// with the headers of its own event.
	require.Len(t, execs, len(events)*fires(tasks), "one execution per task, event and shard")
	seen := map[string]string{}
	for _, x := range execs {
		id, event := x["id"].(string), x["event_id"].(string)
		require.Equal(t, "event", x["trigger"], "execution %s", id)
		index, ok := events[event]
		require.True(t, ok, "execution %s: event %s is not one the test posted", id, event)
		k := fmt.Sprintf("%s/%s/%v", x["task_id"], event, x["shard"])
		require.Empty(t, seen[k], "%s fired twice: %s and %s", k, seen[k], id)
		seen[k] = id
		got := perExecution[id]
		require.NotEmpty(t, got, "execution %s was not received", id)
		for _, h := range got {
			require.Equal(t, event, h.event, "execution %s: X-Ax-Event-Id", id)
			require.Equal(t, x["task_id"], h.task, "execution %s: X-Ax-Task-Id", id)
			require.Equal(t, fmt.Sprint(x["shard"]), h.shard, "execution %s: X-Ax-Shard-Index", id)
			require.Equal(t, strconv.Itoa(index), h.index, "execution %s: the event's payload", id)
		}
		delete(perExecution, id)
	}
	require.Empty(t, perExecution, "deliveries of executions ax does not list")
}

// checkEventList holds the tenant's stored events of name against the
// answered ids: the same set, each matching every task.
func checkEventList(t *testing.T, base, tok, name string, events map[string]int, tasks []eventTask) {
	t.Helper()
	stored, err := listAll(t.Context(), base, tok, "/v1/events?name="+name)
	require.NoError(t, err)
	var extra []string
	for _, e := range stored {
		id := e["id"].(string)
		if _, ok := events[id]; !ok {
			extra = append(extra, fmt.Sprintf("%s %v", id, e["payload"]))
		}
		require.Equal(t, len(tasks), int(e["matched"].(map[string]any)["tasks"].(float64)), "event %s", id)
	}
	require.Empty(t, extra, "stored events no answer named")
	require.Len(t, stored, len(events), "every answered event is stored once")
}

// TestEventsReplicas posts events to two ax processes on one database,
// alternately, a quarter of them as pairs with one dedup_key sent to both
// replicas at once: no post fails, each pair gets one event (both answers
// name it), and each task fires exactly once per event and shard —
// delivered once, with the event's X-Ax-Event-Id, as ax lists it.
func TestEventsReplicas(t *testing.T) {
	t.Parallel()
	const (
		events  = 500 // 600 posts: every fifth event is a racing pair
		workers = 8
		name    = "replicas.ready"
	)
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "events-replicas-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	recv := newEventReceiver(t, 0)
	a, b := startAx(t, env), startAx(t, env)
	replicas := []*proc{a, b}
	tok := cliToken(t, env, "evreplicas", eventsScope)
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook"})
	tasks := createEventTasks(t, b.base, tok, ep["id"].(string), name)

	// answers[i] is event i's one answer, or a pair's two (A's, B's).
	answers := make([][]eventAnswer, events)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if i%5 != 0 {
					answers[i] = []eventAnswer{postEvent(t.Context(), replicas[i%2].base, tok, name, i, "")}
					continue
				}
				pair := make([]eventAnswer, 2)
				start := make(chan struct{})
				var both sync.WaitGroup
				for k, p := range replicas {
					both.Go(func() {
						<-start
						pair[k] = postEvent(t.Context(), p.base, tok, name, i, fmt.Sprintf("pair-%d", i))
					})
				}
				close(start)
				both.Wait()
				answers[i] = pair
			}
		})
	}
	for i := range events {
		next <- i
	}
	close(next)
	wg.Wait()

	byID := map[string]int{} // event id → index, by each event's first answer
	for i, as := range answers {
		for _, a := range as {
			require.NoError(t, a.err, "event %d", i)
			require.Equal(t, http.StatusAccepted, a.code, "event %d: %s", i, a.body)
			require.Equal(t, len(tasks), a.tasks, "event %d: matched tasks", i)
		}
		if other, ok := byID[as[0].id]; ok {
			t.Fatalf("events %d and %d got one id %s", other, i, as[0].id)
		}
		byID[as[0].id] = i
	}

	// A succeeded execution was received: the receiver records each
	// webhook before it answers.
	execs := waitEventExecutions(t, b.base, tok, tasks, events*fires(tasks), 60*time.Second)
	checkEventDeliveries(t, recv, tasks, byID, execs, false)
	var pairs int
	for i, as := range answers {
		if len(as) == 2 {
			require.Equal(t, as[0].id, as[1].id, "event %d: both posts of one dedup_key name one event", i)
			pairs++
		}
	}
	require.Equal(t, events/5, pairs)
	checkEventList(t, a.base, tok, name, byID, tasks)
	t.Logf("%d events (%d racing pairs) fired %d deliveries on two replicas", events, pairs, len(execs))
}
