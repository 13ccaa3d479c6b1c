package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// Data in motion: what a templated task would send (its rendered body), a
// run's inputs, its nodes' outputs and what each templated node was
// rendered from (lineage), and a workflow's trigger with inputs.

// jsonShortMax is how much of a JSON value a page shows before "Show
// all" (the whole value, in a details element: no script needed).
const jsonShortMax = 1500

// jsonView is a JSON value as a page shows it: indented, cut to Short
// when it is longer than jsonShortMax (Truncated), whole in Full.
type jsonView struct {
	Short, Full string
	Truncated   bool
	Size        int // bytes of Full
}

// prettyJSON indents raw for reading; bytes that are not JSON are shown
// as they are.
func prettyJSON(raw []byte) jsonView {
	var buf bytes.Buffer
	full := string(raw)
	if json.Indent(&buf, raw, "", "  ") == nil {
		full = buf.String()
	}
	v := jsonView{Short: full, Full: full, Size: len(full)}
	if len(full) > jsonShortMax {
		n := jsonShortMax
		for n > 0 && !utf8.RuneStart(full[n]) {
			n--
		}
		v.Short, v.Truncated = full[:n]+"\n…", true
	}
	return v
}

// namedJSON is a named JSON value: an input, an upstream node's output.
type namedJSON struct {
	Name string
	JSON jsonView
	// Missing: the name has no value (an input the run does not have, an
	// upstream node without output).
	Missing bool
	// State is an upstream node's state when it was read ("" otherwise);
	// TooLarge: its output was too large to keep (RenderedFromMax).
	State    string
	TooLarge bool
}

// renderView is the task page's rendered-body preview of a templated
// task: the slot asked for (At, as typed; "": the next fire) and what it
// would send, or why it does not render.
type renderView struct {
	At    string
	Slot  time.Time
	Body  jsonView
	Error *errorView
}

// renderPreview renders task t's payload for the slot at (a datetime-local
// value in UTC, or "" for the next fire) with the REST render call.
func (c *console) renderPreview(ctx context.Context, s *session, t service.Task, at string) (*renderView, error) {
	v := &renderView{At: at}
	var (
		in service.RenderInput
		ve service.ValidationError
	)
	if at = strings.TrimSpace(at); at != "" {
		slot := parseLocal(&ve, "scheduled_for", at)
		in.ScheduledFor = &slot
	}
	err := ve.Err()
	var r service.Rendered
	if err == nil {
		r, err = c.cfg.Tasks.Render(ctx, s.Tenant, t.ID, in)
	}
	var vErr *service.ValidationError
	switch {
	case errors.As(err, &vErr):
		v.Error = &errorView{Title: "The payload does not render for this slot: nothing would be sent", Fields: vErr.Fields}
		return v, nil
	case err != nil:
		return nil, err
	}
	v.Slot, v.Body = r.ScheduledFor, prettyJSON(r.Body)
	return v, nil
}

// runDataView is a run's data: its inputs and, per node, its output and
// what it was rendered from.
type runDataView struct {
	Inputs []namedJSON
	Nodes  []nodeDataView
}

// nodeDataView is one node's data on the run page.
type nodeDataView struct {
	Key    string
	State  string
	Output *jsonView
	// Lineage is nil for a node without templates (or not rendered yet).
	Lineage *lineageView
	// Templated: the node has a payload template or run_if.
	Templated bool
	// Done: the node is final (an output can no longer come).
	Done bool
}

// lineageView is what a node was rendered from: the run inputs its
// templates read, with their values, and the upstream outputs they read,
// as they were when it rendered.
type lineageView struct {
	Inputs, Nodes []namedJSON
	Omitted       []string
}

// runDataOf builds the run page's data section from run (its version's
// nodes in w when w is that version, to say which nodes are templated).
func runDataOf(r service.WorkflowRun, w service.Workflow) runDataView {
	var v runDataView
	for _, name := range slices.Sorted(maps.Keys(r.Inputs)) {
		v.Inputs = append(v.Inputs, namedJSON{Name: name, JSON: prettyJSON(r.Inputs[name])})
	}
	templated := map[string]bool{}
	if w.Version == r.Version {
		for _, n := range w.Nodes {
			templated[n.Key] = n.PayloadTemplate || n.RunIf != ""
		}
	}
	for _, n := range r.Nodes {
		nd := nodeDataView{
			Key: n.Key, State: n.State, Templated: templated[n.Key] || n.RenderedFrom != nil,
			Done: slices.Contains([]string{service.ExecSucceeded, service.ExecFailed, service.ExecCancelled, service.NodeSkipped}, n.State),
		}
		if n.Output != nil {
			o := prettyJSON(n.Output)
			nd.Output = &o
		}
		if rf := n.RenderedFrom; rf != nil {
			l := &lineageView{Omitted: rf.Omitted}
			for _, name := range rf.Inputs {
				val, ok := r.Inputs[name]
				l.Inputs = append(l.Inputs, namedJSON{Name: name, JSON: prettyJSON(val), Missing: !ok})
			}
			for _, k := range slices.Sorted(maps.Keys(rf.Nodes)) {
				up := rf.Nodes[k]
				nj := namedJSON{Name: k, State: up.Status, Missing: up.Output == nil, TooLarge: slices.Contains(rf.Omitted, k)}
				if up.Output != nil {
					nj.JSON = prettyJSON(up.Output)
				}
				l.Nodes = append(l.Nodes, nj)
			}
			nd.Lineage = l
		}
		v.Nodes = append(v.Nodes, nd)
	}
	return v
}

// triggerFormView is the workflow page's "Trigger with inputs" form: the
// inputs as typed (JSON; the workflow's defaults at first) and a refusal.
type triggerFormView struct {
	Inputs string
	Error  *errorView
}

// defaultInputs is a workflow's input defaults as the trigger form's JSON.
func defaultInputs(in service.Inputs) string {
	if len(in) == 0 {
		return "{}"
	}
	b, err := json.Marshal(map[string]json.RawMessage(in))
	if err != nil {
		return "{}"
	}
	return prettyJSON(b).Full
}

// triggerWorkflow starts a run now and shows it; with the form's "inputs"
// (a JSON object), the run's inputs override the workflow's defaults, and
// a refusal (invalid JSON, an undeclared name: inputs.<name>) is shown on
// the workflow page next to the field, with the inputs as typed.
func (c *console) triggerWorkflow(ec echo.Context, s *session) error {
	id := ec.Param("id")
	var in service.WorkflowTrigger
	raw, withInputs := ec.Request().PostForm["inputs"]
	typed := ""
	if withInputs {
		typed = strings.Join(raw, "")
		if strings.TrimSpace(typed) != "" {
			if err := json.Unmarshal([]byte(typed), &in.Inputs); err != nil || in.Inputs == nil {
				return c.triggerRefused(ec, s, id, typed, &service.ValidationError{Fields: []service.FieldError{{
					Field: "inputs", Message: "must be a JSON object of input values, {\"name\": value, …}",
				}}})
			}
		}
	}
	r, err := c.cfg.Workflows.TriggerWith(ec.Request().Context(), s.Tenant, id, in)
	if ve := (*service.ValidationError)(nil); errors.As(err, &ve) {
		return c.triggerRefused(ec, s, id, typed, ve)
	}
	if err != nil {
		p, err := conflictView(err)
		if err != nil {
			return err
		}
		return c.workflowPage(ec, s, http.StatusConflict, id, workflowView{Problem: p})
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/workflow-runs/"+url.PathEscape(r.ID)+"?done=triggered")
}

// triggerRefused shows the workflow page with the trigger form's refusal.
func (c *console) triggerRefused(ec echo.Context, s *session, id, typed string, ve *service.ValidationError) error {
	return c.workflowPage(ec, s, http.StatusUnprocessableEntity, id, workflowView{Trigger: triggerFormView{
		Inputs: typed, Error: &errorView{Title: "The run was not triggered", Fields: ve.Fields},
	}})
}
