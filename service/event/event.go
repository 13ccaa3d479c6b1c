// Package event records the events a tenant posts (POST /v1/events) and
// hands each to the caller's Fire, in the transaction that stores it: the
// tasks and workflows whose schedule is that event fire there, so an event
// is never stored without its fires nor fired twice. A dedup_key makes a
// repeated post within DedupTTL answer the first event's answer and fire
// nothing again; the key is claimed through a unique key, never checked
// first and inserted after.
package event

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/schedule"
)

const (
	// PayloadMax bounds an event's payload (a JSON value), in bytes.
	PayloadMax = 64 << 10
	// KeyMax bounds an event's key, in characters.
	KeyMax = 256
	// DedupKeyMax bounds a dedup key, in characters.
	DedupKeyMax = 256
	// DedupTTL is how long a dedup key names its first event.
	DedupTTL = 24 * time.Hour
)

// Input is what a client posts.
type Input struct {
	// Name is what happened: letters, digits and "._:-", 1 to 200
	// characters (schedule.ValidEventName).
	Name string
	// Key narrows the event (a date, a file, an id): workflow nodes that
	// wait for the event with a key match it only when equal. "": none.
	Key string
	// Payload is any JSON value (nil: none), at most PayloadMax bytes;
	// templates of the fires read it as .event.payload.
	Payload json.RawMessage
	// DedupKey: the same key within DedupTTL answers the first event.
	DedupKey string
}

// Occurrence is a stored event as Fire sees it.
type Occurrence struct {
	TenantID, ID, Name, Key string
	Payload                 json.RawMessage
	// At is when it arrived: the database's clock in its transaction. An
	// event's fires are scheduled for it.
	At time.Time
}

// Match is one thing an event fired.
type Match struct {
	// Type is MatchTask (an execution of a task), MatchWorkflow (a run of
	// a workflow) or MatchWait (a waiting workflow node it resolved).
	Type        string `json:"type"`
	TaskID      string `json:"task_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	WorkflowID  string `json:"workflow_id,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Node        string `json:"node,omitempty"`
}

// Match types.
const (
	MatchTask     = "task"
	MatchWorkflow = "workflow"
	MatchWait     = "wait"
)

// Fired is what an event fired: its counts (Matched) and each fire.
type Fired struct {
	Matched Matched
	Matches []Match
	// Committed, when set, is called once the event's transaction
	// committed (to report what the fires ended).
	Committed func()
}

// Matched counts what an event fired: tasks (one execution each, however
// many shards), workflows (one run each) and waiting workflow nodes.
type Matched struct {
	Tasks, Workflows, Waits int
}

// Fire fires, in tx, what event ev matches, and says what.
type Fire func(ctx context.Context, tx db.Tx, ev Occurrence) (Fired, error)

// Event is a stored event.
type Event struct {
	ID, Name, Key string
	Payload       json.RawMessage
	DedupKey      string
	ReceivedAt    time.Time
	Matched       Matched
	Matches       []Match
}

// Outcome says how a post ended, for the metrics.
type Outcome string

// Outcomes of a post.
const (
	// OutcomeMatched: a new event that fired something.
	OutcomeMatched Outcome = "matched"
	// OutcomeUnmatched: a new event that fired nothing.
	OutcomeUnmatched Outcome = "unmatched"
	// OutcomeDuplicate: its dedup key named an earlier event.
	OutcomeDuplicate Outcome = "duplicate"
)

// Config configures Events.
type Config struct {
	// Fire fires an event's matches. Required.
	Fire Fire
	// Observe, when set, is told each post's outcome once it committed.
	Observe func(Outcome)
}

// Events records events and fires them.
type Events struct {
	pool *db.Pool
	cfg  Config
}

// New returns Events backed by pool. A nil cfg.Fire is a programmer's
// error.
func New(pool *db.Pool, cfg Config) *Events {
	if cfg.Fire == nil {
		panic("event.New: Config.Fire is required")
	}
	return &Events{pool: pool, cfg: cfg}
}

// Validate checks in, each problem under its field.
func (in Input) Validate() error {
	var ve errs.ValidationError
	if !schedule.ValidEventName(in.Name) {
		ve.Add("name", schedule.EventNameRule)
	}
	if in.Key != "" && !printable(in.Key, KeyMax) {
		ve.Add("key", fmt.Sprintf("must be 1 to %d printable characters", KeyMax))
	}
	if in.DedupKey != "" && !printable(in.DedupKey, DedupKeyMax) {
		ve.Add("dedup_key", fmt.Sprintf("must be 1 to %d printable characters", DedupKeyMax))
	}
	if in.Payload != nil {
		switch {
		case len(in.Payload) > PayloadMax:
			ve.Add("payload", fmt.Sprintf("must be at most %d bytes", PayloadMax))
		case !json.Valid(in.Payload):
			ve.Add("payload", "must be valid JSON")
		case containsNUL(in.Payload):
			ve.Add("payload", `must not contain U+0000 ("\u0000")`)
		}
	}
	return ve.Err()
}

func printable(s string, maxLen int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxLen {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// containsNUL reports whether a JSON text holds an escaped U+0000, which
// jsonb cannot store.
func containsNUL(b []byte) bool {
	for i := 0; i+5 < len(b); i++ {
		if b[i] == '\\' {
			if string(b[i+1:i+6]) == "u0000" {
				return true
			}
			i++ // skip the escaped character
		}
	}
	return false
}

// Post stores an event of tenant and fires what it matches, in one
// transaction. With a DedupKey already used within DedupTTL it returns
// the earlier event, firing nothing.
func (s *Events) Post(ctx context.Context, tenant string, in Input) (Event, error) {
	if err := in.Validate(); err != nil {
		return Event{}, err
	}
	var (
		out       Event
		outcome   Outcome
		committed func()
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		committed = nil // a retried transaction starts over
		id := resource.NewID()
		if in.DedupKey != "" {
			owner, err := db.ClaimEventDedup(ctx, tx, tenant, in.DedupKey, id, DedupTTL)
			if err != nil {
				return err
			}
			if owner != id {
				row, err := db.GetEvent(ctx, tx, tenant, owner)
				if err != nil {
					return err
				}
				out, outcome, committed = fromRow(row), OutcomeDuplicate, nil
				return nil
			}
		}
		// The locks of its name and key, shared, before the waits are
		// looked for (in Fire): a transaction starting waits it may end
		// holds one exclusive, so either that committed before the
		// lookup, which then sees its waits, or it looks for this event
		// itself once this commits (db.LockEvent).
		var key *string
		if in.Key != "" {
			key = &in.Key
		}
		if err := db.LockEvent(ctx, tx, tenant, in.Name, key); err != nil {
			return err
		}
		at, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		// Stored before it fires: what it fires may read it (the
		// templates of an event-started run's nodes); what it fired is
		// written once it is known.
		row := db.Event{TenantID: tenant, ID: id, Name: in.Name, Payload: in.Payload, ReceivedAt: at}
		if in.Key != "" {
			row.Key = &in.Key
		}
		if in.DedupKey != "" {
			row.DedupKey = &in.DedupKey
		}
		if _, err := db.InsertEvent(ctx, tx, row); err != nil {
			return err
		}
		ev := Occurrence{TenantID: tenant, ID: id, Name: in.Name, Key: in.Key, Payload: in.Payload, At: at}
		fired, err := s.cfg.Fire(ctx, tx, ev)
		if err != nil {
			return err
		}
		matches, err := json.Marshal(orEmpty(fired.Matches))
		if err != nil {
			return err
		}
		stored, err := db.SetEventMatched(ctx, tx, tenant, id, db.EventMatched{
			Tasks: int32(fired.Matched.Tasks), Workflows: int32(fired.Matched.Workflows), Waits: int32(fired.Matched.Waits),
			List: matches,
		})
		if err != nil {
			return err
		}
		out, outcome, committed = fromRow(stored), OutcomeUnmatched, fired.Committed
		if fired.Matched != (Matched{}) {
			outcome = OutcomeMatched
		}
		return nil
	})
	if err != nil {
		return Event{}, errs.Store(err, "post event")
	}
	if committed != nil {
		committed()
	}
	if s.cfg.Observe != nil {
		s.cfg.Observe(outcome)
	}
	return out, nil
}

func orEmpty(m []Match) []Match {
	if m == nil {
		return []Match{}
	}
	return m
}

// Get returns one of tenant's events.
func (s *Events) Get(ctx context.Context, tenant, id string) (Event, error) {
	if !resource.ValidID(id) {
		return Event{}, errs.ErrNotFound
	}
	row, err := db.GetEvent(ctx, s.pool, tenant, id)
	if err != nil {
		return Event{}, errs.Store(err, "get event")
	}
	return fromRow(row), nil
}

// Filter narrows List.
type Filter struct {
	// Name keeps the events of that name; "": every event.
	Name string
}

// List returns a page of tenant's events, newest first, and the next
// page's cursor ("" on the last).
func (s *Events) List(ctx context.Context, tenant string, f Filter, page resource.Page) ([]Event, string, error) {
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	if f.Name != "" && !schedule.ValidEventName(f.Name) {
		return nil, "", errs.Field("name", schedule.EventNameRule)
	}
	rows, err := db.ListEvents(ctx, s.pool, tenant, db.EventFilter{Name: f.Name, Before: page.After, Limit: page.Limit + 1})
	if err != nil {
		return nil, "", errs.Store(err, "list events")
	}
	items, next := resource.PageOf(rows, page.Limit, fromRow, func(e Event) string { return e.ID })
	return items, next, nil
}

func fromRow(r db.Event) Event {
	e := Event{
		ID: r.ID, Name: r.Name, Payload: r.Payload, ReceivedAt: r.ReceivedAt.UTC(),
		Matched: Matched{Tasks: int(r.MatchedTasks), Workflows: int(r.MatchedWorkflows), Waits: int(r.MatchedWaits)},
	}
	if r.Key != nil {
		e.Key = *r.Key
	}
	if r.DedupKey != nil {
		e.DedupKey = *r.DedupKey
	}
	// Written by Post from []Match: a decoding failure leaves the list
	// empty rather than failing a read.
	_ = json.Unmarshal(r.Matched, &e.Matches)
	return e
}
