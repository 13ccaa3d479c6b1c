package jobs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
)

// harness is a migrated database of its own with the real River client
// and workers, a tenant, and the services to create endpoints and tasks.
type harness struct {
	t          *testing.T
	pool       *pgxpool.Pool
	enq        *service.Enqueuer
	client     *service.RiverClient
	deliveries *service.Deliveries
	endpoints  *service.Endpoints
	tasks      *service.Tasks
	tenant     string
	river      RiverConfig
	deps       WorkerDeps
	names      atomic.Int64
}

// harnessOpts adjusts newHarness.
type harnessOpts struct {
	River      RiverConfig              // zero fields: fast test values
	Deliveries service.DeliveriesConfig // zero fields: the defaults
	NoStart    bool                     // build the client but do not start it
	Events     *EventRunner             // wired to the client (WorkerDeps.Events)
}

const testUserAgent = "ax/test"

func newHarness(t *testing.T, opts harnessOpts) *harness {
	t.Helper()
	pools := dbtest.Pools(t)
	pool := pools.Main
	enq, err := service.NewEnqueuer(pool, nil)
	require.NoError(t, err)
	cfg := opts.River
	setDefault(&cfg.FetchCooldown, 5*time.Millisecond)
	setDefault(&cfg.FetchPollInterval, 25*time.Millisecond)
	setDefault(&cfg.QueueWaitPoll, 50*time.Millisecond)
	setDefault(&cfg.SoftStopTimeout, 5*time.Second)
	if opts.Deliveries.Rand == nil {
		opts.Deliveries.Rand = func() float64 { return 1 } // backoffs at the top of their range
	}
	h := &harness{
		t: t, pool: pool, enq: enq, tenant: "acme", river: cfg,
		deliveries: service.NewDeliveries(pools.Delivery, enq, opts.Deliveries),
		endpoints:  service.NewEndpoints(pool),
		tasks:      service.NewTasks(pool, service.TasksConfig{}),
	}
	sender := NewSender(SenderConfig{AllowPrivateTargets: true, UserAgent: testUserAgent})
	t.Cleanup(sender.Close)
	h.deps = WorkerDeps{Deliveries: h.deliveries, Sender: sender, Logger: testLogger(), Metrics: metrics.New(nil), Events: opts.Events}
	require.NoError(t, db.EnsureTenant(t.Context(), pool, h.tenant))
	h.client = h.newClient()
	if !opts.NoStart {
		h.start(h.client)
	}
	return h
}

// testLogger discards logs unless AX_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("AX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (h *harness) newClient() *service.RiverClient {
	h.t.Helper()
	c, err := NewRiverClient(h.enq, h.river, h.deps)
	require.NoError(h.t, err)
	return c
}

// start starts c and stops it when the test ends.
func (h *harness) start(c *service.RiverClient) {
	h.t.Helper()
	require.NoError(h.t, c.Start(context.Background()))
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
}

func (h *harness) name(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, h.names.Add(1))
}

// endpoint creates an enabled endpoint for url.
func (h *harness) endpoint(url string, change func(*service.EndpointInput)) service.Endpoint {
	h.t.Helper()
	in := service.EndpointInput{Name: h.name("ep"), URL: url, Timeout: 2 * time.Second, Enabled: true}
	if change != nil {
		change(&in)
	}
	ep, err := h.endpoints.Create(h.t.Context(), h.tenant, in)
	require.NoError(h.t, err)
	return ep
}

// task creates a task on endpointID whose own schedule never comes due
// during the test (no scheduler runs here; fire materialises executions).
func (h *harness) task(endpointID string, change func(*service.TaskInput)) service.Task {
	h.t.Helper()
	far := time.Now().Add(24 * time.Hour).UTC()
	in := service.TaskInput{
		Name: h.name("task"), EndpointID: endpointID,
		Schedule: schedule.Spec{Type: schedule.Once, RunAt: &far},
		Payload:  []byte(`{"n":1}`),
		Retry:    service.RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
	}
	if change != nil {
		change(&in)
	}
	task, err := h.tasks.Create(h.t.Context(), h.tenant, in)
	require.NoError(h.t, err)
	return task
}

// fireOpts adjusts fire.
type fireOpts struct {
	ScheduledFor time.Time // zero: now
	Trigger      string    // "": schedule
	Payload      []byte    // manual payload override
	Queue        string    // "": the main lane
}

// fire materialises an execution of task with its deliver job (naming the
// task's endpoint), the way the scheduler does: both in one transaction.
func (h *harness) fire(task service.Task, opts fireOpts) string {
	h.t.Helper()
	ctx := h.t.Context()
	if opts.ScheduledFor.IsZero() {
		opts.ScheduledFor = time.Now().UTC()
	}
	if opts.Trigger == "" {
		opts.Trigger = service.TriggerSchedule
	}
	id := service.NewID()
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH x AS (
				INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, payload)
				VALUES ($1, $2, $3, $4, $5, $6) RETURNING tenant_id, task_id, scheduled_for, id)
			INSERT INTO unfinished_executions SELECT * FROM x`,
			h.tenant, id, task.ID, opts.ScheduledFor, opts.Trigger, opts.Payload); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO execution_events (tenant_id, execution_id, type) VALUES ($1, $2, 'fired')`,
			h.tenant, id); err != nil {
			return err
		}
		insert := &river.InsertOpts{
			Queue: service.QueueDeliver, Priority: task.Priority, MaxAttempts: task.Retry.MaxAttempts + 3,
			UniqueOpts: river.UniqueOpts{ByArgs: true},
		}
		if opts.ScheduledFor.After(time.Now()) {
			insert.ScheduledAt = opts.ScheduledFor
		}
		if opts.Queue != "" {
			insert.Queue = opts.Queue
		}
		res, err := h.client.InsertTx(ctx, tx, service.DeliverArgs{TenantID: h.tenant, ExecutionID: id, EndpointID: task.EndpointID},
			insert)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE executions SET river_job_id = $3 WHERE tenant_id = $1 AND id = $2`, h.tenant, id, res.Job.ID)
		return err
	})
	require.NoError(h.t, err)
	return id
}

// execution is the part of an execution row tests look at.
type execution struct {
	State          string
	Attempts       int
	LeaseAttempt   int
	LastStatusCode *int
	LastError      *string
	LastErrorClass *string
	RiverJobID     *int64
	StartedAt      *time.Time
	FinishedAt     *time.Time
	NextAttemptAt  *time.Time
}

func (h *harness) execution(id string) execution {
	h.t.Helper()
	e, err := h.loadExecution(id)
	require.NoError(h.t, err)
	return e
}

// loadExecution is execution returning its error, for a condition of
// Eventually (which runs off the test's goroutine).
func (h *harness) loadExecution(id string) (execution, error) {
	var e execution
	err := h.pool.QueryRow(context.Background(), `SELECT state, attempts, lease_attempt, last_status_code, last_error,
			last_error_class, river_job_id, started_at, finished_at, next_attempt_at
		FROM executions WHERE tenant_id = $1 AND id = $2`, h.tenant, id).Scan(&e.State, &e.Attempts, &e.LeaseAttempt,
		&e.LastStatusCode, &e.LastError, &e.LastErrorClass, &e.RiverJobID, &e.StartedAt, &e.FinishedAt, &e.NextAttemptAt)
	return e, err
}

// waitState waits until the execution is in state and returns it.
func (h *harness) waitState(id, state string) execution {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e := h.execution(id)
		if e.State == state {
			return e
		}
		if time.Now().After(deadline) {
			last := "<nil>"
			if e.LastError != nil {
				last = *e.LastError
			}
			h.t.Fatalf("execution %s never became %s (last %+v, last_error %q)", id, state, e, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// event is a timeline entry as tests compare it.
type event struct {
	Type       string
	Attempt    *int
	StatusCode *int
	LatencyMS  *int
	ErrorClass *string
	Message    *string
	Data       map[string]any
}

// events returns an execution's timeline as the API shows it (stored
// events and those the row implies).
func (h *harness) events(id string) []event {
	h.t.Helper()
	evs, err := h.loadEvents(id)
	require.NoError(h.t, err)
	return evs
}

// loadEvents is events returning its error, for a condition of
// Eventually.
func (h *harness) loadEvents(id string) ([]event, error) {
	row, err := db.GetExecution(context.Background(), h.pool, h.tenant, id, false)
	if err != nil {
		return nil, err
	}
	evs, err := db.ListExecutionEvents(context.Background(), h.pool, row)
	if err != nil {
		return nil, err
	}
	out := make([]event, 0, len(evs))
	for _, ev := range evs {
		out = append(out, event{
			Type: ev.Type, Attempt: intPtr(ev.Attempt), StatusCode: intPtr(ev.StatusCode),
			LatencyMS: intPtr(ev.LatencyMS), ErrorClass: ev.ErrorClass, Message: ev.Message, Data: ev.Data,
		})
	}
	return out, nil
}

func intPtr(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func eventTypes(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// lastType is the type of the last event of a timeline, "" when it is
// empty.
func lastType(evs []event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Type
}

// jobState returns the state and attempt of a River job.
func (h *harness) jobState(id int64) (string, int) {
	h.t.Helper()
	state, attempt, err := h.loadJobState(id)
	require.NoError(h.t, err)
	return state, attempt
}

// loadJobState is jobState returning its error, for a condition of
// Eventually.
func (h *harness) loadJobState(id int64) (state string, attempt int, err error) {
	err = h.pool.QueryRow(context.Background(),
		`SELECT state::text, attempt FROM river_job WHERE id = $1`, id).Scan(&state, &attempt)
	return state, attempt, err
}

func (h *harness) waitJobState(id int64, state string) {
	h.t.Helper()
	require.EventuallyWithT(h.t, func(c *assert.CollectT) {
		s, _, err := h.loadJobState(id)
		assert.NoError(c, err)
		assert.Equal(c, state, s)
	}, 20*time.Second, 10*time.Millisecond, "river job %d never became %s", id, state)
}

// hit is one request a script receiver got.
type hit struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// script is a webhook receiver that answers the n-th request with the
// n-th response (the last one repeats) and records every request.
type script struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []hit
	got  chan hit
	// hold, when set, makes requests wait for release (or the client
	// going away) before answering.
	hold    bool
	release chan struct{}
	once    sync.Once
}

// response is one scripted answer; a negative Status never answers.
type response struct {
	Status int
	Header map[string]string
	Body   string
}

func newScript(t *testing.T, responses ...response) *script {
	t.Helper()
	if len(responses) == 0 {
		responses = []response{{Status: http.StatusOK}}
	}
	s := &script{got: make(chan hit, 64), release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := hit{At: time.Now(), Header: r.Header.Clone(), Body: body}
		s.mu.Lock()
		n := len(s.hits)
		s.hits = append(s.hits, h)
		hold := s.hold
		s.mu.Unlock()
		s.got <- h
		if hold {
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		resp := responses[min(n, len(responses)-1)]
		if resp.Status < 0 { // hang until the client gives up
			<-r.Context().Done()
			return
		}
		for k, v := range resp.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.Status)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(s.srv.Close)
	t.Cleanup(s.releaseAll) // runs first: held handlers return before Close waits for them
	return s
}

// holdRequests makes the following requests wait until releaseAll.
func (s *script) holdRequests() *script {
	s.mu.Lock()
	s.hold = true
	s.mu.Unlock()
	return s
}

func (s *script) releaseAll() { s.once.Do(func() { close(s.release) }) }

func (s *script) hitsSoFar() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

// next waits for the next request.
func (s *script) next(t *testing.T) hit {
	t.Helper()
	select {
	case h := <-s.got:
		return h
	case <-time.After(20 * time.Second):
		t.Fatalf("no request within 20s")
		return hit{}
	}
}

// quiet asserts that no request arrives for d.
func (s *script) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case h := <-s.got:
		t.Fatalf("unexpected request %s attempt %s", h.Header.Get("Idempotency-Key"), h.Header.Get("X-Ax-Attempt"))
	case <-time.After(d):
	}
}

// fireBatch materialises an execution of each task due at slot with one
// deliver_batch job for them all (in the main lane, each member naming its
// task's endpoint), the way the scheduler does for executions due at the
// same instant; it returns the execution ids and the job's id.
func (h *harness) fireBatch(tasks []service.Task, slot time.Time) ([]string, int64) {
	h.t.Helper()
	ctx := h.t.Context()
	ids := make([]string, len(tasks))
	args := service.DeliverBatchArgs{}
	var jobID int64
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		for i, task := range tasks {
			ids[i] = service.NewID()
			if _, err := tx.Exec(ctx, `WITH x AS (
					INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, implicit_events)
					VALUES ($1, $2, $3, $4, 'schedule', 1) RETURNING tenant_id, task_id, scheduled_for, id)
				INSERT INTO unfinished_executions SELECT * FROM x`, h.tenant, ids[i], task.ID, slot); err != nil {
				return err
			}
			args.Executions = append(args.Executions, service.ExecutionRef{
				TenantID: h.tenant, ExecutionID: ids[i],
				EndpointID: task.EndpointID,
			})
		}
		insert := &river.InsertOpts{Queue: service.QueueDeliver, MaxAttempts: 25}
		if slot.After(time.Now()) {
			insert.ScheduledAt = slot
		}
		res, err := h.client.InsertTx(ctx, tx, args, insert)
		if err != nil {
			return err
		}
		jobID = res.Job.ID
		return nil
	})
	require.NoError(h.t, err)
	return ids, jobID
}

// deliverJobs returns the deliver jobs of an execution: state and
// lease_base, oldest first.
func (h *harness) deliverJobs(id string) (states []string, leaseBases []int) {
	h.t.Helper()
	states, leaseBases, err := h.loadDeliverJobs(id)
	require.NoError(h.t, err)
	return states, leaseBases
}

// loadDeliverJobs is deliverJobs returning its error, for a condition of
// Eventually.
func (h *harness) loadDeliverJobs(id string) (states []string, leaseBases []int, err error) {
	rows, err := h.pool.Query(context.Background(), `SELECT state::text, coalesce((args->>'lease_base')::int, 0)
		FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = $1 ORDER BY id`, id)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var b int
		if err := rows.Scan(&s, &b); err != nil {
			return nil, nil, err
		}
		states, leaseBases = append(states, s), append(leaseBases, b)
	}
	return states, leaseBases, rows.Err()
}
