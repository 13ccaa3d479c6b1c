package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/jsondoc"
)

// The data of a workflow run: its inputs and its nodes' outputs.
//
// A workflow declares inputs with their defaults (kept with each version:
// a change makes a new version, as a change of the nodes does). A run's
// inputs are its version's defaults overridden by its trigger's or its
// backfill's (a scheduled run: the defaults), stored with the run when it
// is created (db.InsertWorkflowRun).
//
// A node's output is its execution's (shard 0's for a sharded node): in
// callback mode the output of its completion (callback_attempts), in
// response mode its 2xx response body when that is a JSON value of at
// most callback.OutputMax bytes (execution_outputs, written by Finish in
// the transaction that records the success and advances the run, so the
// nodes it lets fire can read it). service's runData reads both for a run.

// Input limits.
const (
	// InputsMax caps the JSON of a workflow's inputs, of a trigger's or a
	// backfill's overrides, and of a run's merged inputs.
	InputsMax = 64 << 10
	// InputNamesMax caps how many inputs a workflow declares.
	InputNamesMax = 100
)

// EventNoOutput: a workflow node's response-mode attempt succeeded but its
// response body gave no output (empty, not JSON, or over OutputMax); data
// says why.
const EventNoOutput = "no_output"

// inputNamePattern: an input's name, usable as .inputs.<name> in a
// template.
var inputNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Inputs are named JSON values: a workflow's defaults, a trigger's
// overrides, a run's inputs.
type Inputs map[string]json.RawMessage

// Encode returns inputs as a JSON object ({} when empty).
func (in Inputs) Encode() ([]byte, error) {
	if len(in) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(map[string]json.RawMessage(in))
	if err != nil {
		return nil, fmt.Errorf("encode inputs: %w", err)
	}
	return b, nil
}

// DecodeInputs reads a stored JSON object of inputs ("": none).
func DecodeInputs(doc string) (Inputs, error) {
	out := Inputs{}
	if doc == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(doc), &out); err != nil {
		return nil, fmt.Errorf("decode inputs: %w", err)
	}
	return out, nil
}

// checkValues reports the values of in that are no JSON document ax can
// keep, as field.<name>.
func (in Inputs) checkValues(ve *errs.ValidationError, field string) {
	for _, name := range slices.Sorted(maps.Keys(in)) {
		v := in[name]
		f := field + "." + name
		if len(v) == 0 || !json.Valid(v) {
			ve.Add(f, "must be a JSON value")
			continue
		}
		jsondoc.Check(ve, f, v)
	}
}

// CheckInputs checks a workflow's declared inputs (field "inputs").
func CheckInputs(ve *errs.ValidationError, in Inputs) {
	if len(in) > InputNamesMax {
		ve.Add("inputs", fmt.Sprintf("at most %d inputs", InputNamesMax))
	}
	for _, name := range slices.Sorted(maps.Keys(in)) {
		if !inputNamePattern.MatchString(name) {
			ve.Add("inputs."+name, "an input's name is 1 to 64 ASCII letters, digits and '_', not starting with a digit")
		}
	}
	in.checkValues(ve, "inputs")
	if b, err := in.Encode(); err == nil && len(b) > InputsMax {
		ve.Add("inputs", fmt.Sprintf("must be at most %d bytes of JSON", InputsMax))
	}
}

// MergeInputs checks overrides (of a trigger or a backfill) against a
// workflow's declared inputs: an undeclared name is a 422 naming it
// (inputs.<name>), and so is merged inputs past InputsMax. It returns the
// overrides' JSON ("" for none), which db.InsertWorkflowRun merges into
// the run's version's defaults.
func MergeInputs(declared, overrides Inputs) (string, error) {
	if len(overrides) == 0 {
		return "", nil
	}
	var ve errs.ValidationError
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if _, ok := declared[name]; !ok {
			ve.Add("inputs."+name, fmt.Sprintf("the workflow declares no input %q (it declares: %s)", name, declaredNames(declared)))
		}
	}
	overrides.checkValues(&ve, "inputs")
	if err := ve.Err(); err != nil {
		return "", err
	}
	merged := Inputs{}
	maps.Copy(merged, declared)
	maps.Copy(merged, overrides)
	b, err := merged.Encode()
	if err != nil {
		return "", err
	}
	if len(b) > InputsMax {
		return "", errs.Field("inputs", fmt.Sprintf("the run's inputs must be at most %d bytes of JSON", InputsMax))
	}
	o, err := overrides.Encode()
	return string(o), err
}

func declaredNames(in Inputs) string {
	if len(in) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(in)), ", ")
}

// NodeData is what a run shows of one of its nodes to the nodes
// downstream: its state (as GET of the run says it) and its output (nil:
// none yet).
type NodeData struct {
	Status string
	Output json.RawMessage
}

// RunData is what a run's nodes may be made from: the run's inputs, and
// its nodes' states and outputs by key.
type RunData struct {
	Inputs Inputs
	Nodes  map[string]NodeData
}

// ResponseOutput is the output of a workflow node's 2xx response in
// response mode: body when it is a JSON value of at most OutputMax bytes
// (truncated: the body was longer than what was read). Otherwise the
// output is nil and the reason says why, for the node's timeline.
func ResponseOutput(body []byte, truncated bool) (output json.RawMessage, reason string) {
	trimmed := strings.TrimSpace(string(body))
	switch {
	case truncated || len(body) > callback.OutputMax:
		return nil, fmt.Sprintf("the response body is larger than %d bytes", callback.OutputMax)
	case trimmed == "":
		return nil, "the response body is empty"
	case !json.Valid(body):
		return nil, "the response body is not JSON"
	case jsondoc.HasNUL(body):
		return nil, `the response body holds U+0000 (\u0000), which a JSON document cannot keep`
	}
	return json.RawMessage(trimmed), ""
}
