package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/jsondoc"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
)

// Workflow nodes that wait for an event (wait_for instead of an endpoint).
//
// Such a node has no hidden task and no execution: its state lives on its
// workflow_run_nodes row (db/waits.go). When its rule is met the advance
// renders its key (the same data as a payload template) and makes it
// awaiting from the transaction's clock (or its run's slot, when the
// scheduler starts the run ahead of it) until its timeout; the API shows
// it running, with what it waits for. It ends
//   - succeeded, when an event of its name (and, with a key, that key)
//     arrives after it became awaiting: EventFires.resolveWaits, in the
//     event's transaction, with the event's payload as its output;
//   - succeeded or skipped by a person (RunNode, SkipNode);
//   - failed (error class event_timeout) when its deadline passes first:
//     Workflows.expireWaits, from the workflow sweep;
//   - failed (error class template) when its key does not render.
//
// Each of those (in package service) locks the run first, then ends the
// wait with a statement conditional on the node still awaiting, and
// advances the run in the same transaction: two transactions ending one
// wait serialize on the run's row, and the second finds nothing to end,
// so an event consumes a wait at most once, whichever replica posts it.

// Wait limits and error classes.
const (
	// WaitTimeoutMin and WaitTimeoutMax bound wait_for.timeout_ms.
	WaitTimeoutMin = time.Second
	WaitTimeoutMax = 30 * 24 * time.Hour
	// ErrorClassEventTimeout: a wait_for node whose event did not arrive
	// within its timeout.
	ErrorClassEventTimeout = "event_timeout"
)

// WaitFor is what a wait_for node waits for.
type WaitFor struct {
	// Event is the event's name (schedule.ValidEventName).
	Event string
	// Key, when set, is a template (the data of a node's payload
	// template) rendered when the node's rule is met: only an event with
	// that key satisfies the node. "": any event of that name.
	Key string
	// Timeout: no matching event within it fails the node
	// (event_timeout). WaitTimeoutMin to WaitTimeoutMax.
	Timeout time.Duration
}

// NodeWait is what an awaiting node waits for, as a run shows it.
type NodeWait struct {
	Event string
	// Key is the rendered key ("": any event of that name).
	Key      string
	Deadline time.Time
}

// StoredWait is a wait_for node in a version's document.
type StoredWait struct {
	Event     string `json:"event"`
	Key       string `json:"key,omitempty"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// Stored is w as a version's document keeps it.
func (w WaitFor) Stored() *StoredWait {
	return &StoredWait{Event: w.Event, Key: w.Key, TimeoutMS: w.Timeout.Milliseconds()}
}

// Input is a stored wait as the client set it.
func (w StoredWait) Input() *WaitFor {
	return &WaitFor{Event: w.Event, Key: w.Key, Timeout: time.Duration(w.TimeoutMS) * time.Millisecond}
}

// CheckWait checks the wait of a wait_for node (field prefix f,
// nodes[i]); its key against the data the node may read (scope, called
// only when it has one).
func CheckWait(ve *errs.ValidationError, f string, w WaitFor, scope func() template.Scope) {
	if !schedule.ValidEventName(w.Event) {
		ve.Add(f+".wait_for.event", schedule.EventNameRule)
	}
	if w.Timeout < WaitTimeoutMin || w.Timeout > WaitTimeoutMax {
		ve.Add(f+".wait_for.timeout_ms", fmt.Sprintf("is required: %d (1 s) to %d (30 days)",
			WaitTimeoutMin.Milliseconds(), WaitTimeoutMax.Milliseconds()))
	}
	if w.Key != "" {
		if len(w.Key) > RunIfMax {
			ve.Add(f+".wait_for.key", fmt.Sprintf("must be at most %d bytes", RunIfMax))
		} else {
			doc, _ := json.Marshal(w.Key)
			payload.Check(ve, f+".wait_for.key", doc, scope())
		}
	}
}

// CheckKey reads what a wait_for node's key rendered (out): a string, or
// a number or boolean as its JSON text; anything else, or an empty key,
// is an error.
func CheckKey(out []byte) (string, error) {
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("rendered no value: %w", err)
	}
	var key string
	switch v := v.(type) {
	case string:
		key = v
	case float64, bool:
		key = string(out)
	default:
		return "", fmt.Errorf("rendered %s: want a string", TruncateText(string(out), 200))
	}
	if key == "" || utf8.RuneCountInString(key) > event.KeyMax || slices.ContainsFunc([]rune(key), func(r rune) bool { return !unicode.IsPrint(r) }) {
		return "", fmt.Errorf("rendered %q: an event's key is 1 to %d printable characters", TruncateText(key, 200), event.KeyMax)
	}
	return key, nil
}

// CheckOutput checks the output a person gives a wait_for node.
func CheckOutput(output json.RawMessage) error {
	if output == nil {
		return nil
	}
	var ve errs.ValidationError
	switch {
	case len(output) > callback.OutputMax:
		ve.Add("output", fmt.Sprintf("must be at most %d bytes", callback.OutputMax))
	case !json.Valid(output):
		ve.Add("output", "must be a JSON value")
	case jsondoc.HasNUL(output):
		ve.Add("output", `must not contain U+0000 ("\u0000")`)
	}
	return ve.Err()
}

// waitOf sets what run node rn shows of its wait from its row sn.
func waitOf(rn *RunNode, sn db.RunNode) {
	if sn.State == lifecycle.NodeAwaiting && sn.WaitEvent != nil && sn.WaitDeadline != nil {
		rn.Wait = &NodeWait{Event: *sn.WaitEvent, Key: zeroIfNil(sn.WaitKey), Deadline: sn.WaitDeadline.UTC()}
	}
	rn.StartedAt, rn.FinishedAt = utcPtr(sn.WaitSince), utcPtr(sn.FinishedAt)
	rn.EventID, rn.ErrorClass, rn.LastError = zeroIfNil(sn.EventID), zeroIfNil(sn.ErrorClass), zeroIfNil(sn.LastError)
}
