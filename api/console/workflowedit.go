package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/api/yamldoc"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/dag"
)

// Workflow authoring: a document editor holding the body of
// POST /v1/workflows (JSON, or YAML read into the same JSON), decoded by
// the API's own decoder (api.DecodeWorkflowDocument) and saved through the
// REST routes' service calls (Workflows.Create, Workflows.Update). A
// draft's preview is Workflows.Check, which validates it as saving would
// and stores nothing, drawn by the workflow page's graph renderer
// (layoutDAG); a refusal lists every error with a link to its node.

// documentMax bounds the editor's document (a workflow of 200 nodes with
// payloads fits well within it).
const documentMax = 1 << 20

// workflowEditView is the authoring page: a new workflow (Workflow nil)
// or an edit of one.
type workflowEditView struct {
	Workflow *service.Workflow
	// Document is the editor's text, as typed.
	Document string
	Draft    draftView
	// Problem is a refusal no field explains (a name taken, the quota).
	Problem   *errorView
	Endpoints []service.Endpoint
}

func (v workflowEditView) title() (string, string) {
	if v.Workflow == nil {
		return "New workflow", "workflows"
	}
	return "Edit workflow " + v.Workflow.Name, "workflows"
}

// NextVersion is the version a change of the nodes or inputs makes.
func (v workflowEditView) NextVersion() int { return v.Workflow.Version + 1 }

// Action is where the editor's form posts.
func (v workflowEditView) Action() string {
	if v.Workflow == nil {
		return Prefix + "/workflows"
	}
	return Prefix + "/workflows/" + url.PathEscape(v.Workflow.ID) + "/edit"
}

// draftView is what the preview shows of a draft: nothing before a
// preview or a save, else its errors (each linked to its node when it
// has one) and its graph.
type draftView struct {
	Checked bool
	// Saving: the draft was refused by a save, not a preview.
	Saving bool
	Errors []draftError
	Graph  dagView
	Nodes  []draftNode
}

// OK: the draft was checked and has no error.
func (d draftView) OK() bool { return d.Checked && len(d.Errors) == 0 }

// draftError is one refused field, with the anchor of its node's entry
// in the preview ("" when it is about no node).
type draftError struct {
	Field, Message, Anchor, Key string
}

// draftNode is a node of the draft as the preview lists it.
type draftNode struct {
	Anchor, Key string
	DependsOn   []string
	Rule        string
	// Errors are its messages (its fields, or the cycle it is on).
	Errors []string
}

// nodeAnchor is the id of node i's entry in the preview.
func nodeAnchor(i int) string { return "draft-node-" + strconv.Itoa(i) }

// documentJSON is the editor's text as the JSON the API takes: JSON as
// is, or YAML (anything not starting with '{') read into the same data.
func documentJSON(text string) ([]byte, error) {
	t := strings.TrimSpace(text)
	if t == "" || t[0] == '{' {
		return []byte(t), nil
	}
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(t), &node); err != nil {
		return nil, &service.ValidationError{Fields: []service.FieldError{{Field: "document", Message: "neither JSON nor YAML: " + err.Error()}}}
	}
	yamldoc.KeepTimestamps(&node)
	var raw any
	err := node.Decode(&raw)
	var b []byte
	if err == nil {
		b, err = json.Marshal(raw)
	}
	if err != nil {
		return nil, &service.ValidationError{Fields: []service.FieldError{{
			Field: "document", Message: "YAML that JSON cannot hold (a key that is not a string?)",
		}}}
	}
	return b, nil
}

// decodeDocument reads the editor's text as the REST route reads its
// body. The input is returned with a refusal of its fields, so that the
// preview can still draw the draft's graph.
func decodeDocument(text string) (service.WorkflowInput, error) {
	if len(text) > documentMax {
		return service.WorkflowInput{}, &service.ValidationError{Fields: []service.FieldError{{
			Field: "document", Message: fmt.Sprintf("is over %d KiB", documentMax>>10),
		}}}
	}
	body, err := documentJSON(text)
	if err != nil {
		return service.WorkflowInput{}, err
	}
	return api.DecodeWorkflowDocument(body)
}

// draftOf is the preview of draft in with the refusal's fields (none:
// a valid draft). The nodes of a cycle, which the refusal names on the
// field "nodes", are found again by the graph code that named them.
func draftOf(in service.WorkflowInput, fields []service.FieldError) draftView {
	d := draftView{Checked: true}
	nodes := make([]draftNode, len(in.Nodes))
	graph := make([]dag.Node, len(in.Nodes))
	for i, n := range in.Nodes {
		nodes[i] = draftNode{Anchor: nodeAnchor(i), Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule}
		graph[i] = dag.Node{Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule}
	}
	var cycle []string
	for _, f := range fields {
		e := draftError{Field: f.Field, Message: f.Message}
		if i, ok := nodeIndex(f.Field); ok && i < len(nodes) {
			e.Anchor, e.Key = nodes[i].Anchor, nodes[i].Key
			nodes[i].Errors = append(nodes[i].Errors, strings.TrimPrefix(f.Field, fmt.Sprintf("nodes[%d].", i))+": "+f.Message)
		} else if f.Field == "nodes" && cycle == nil {
			var ce *dag.CycleError
			if _, err := dag.Order(graph); errors.As(err, &ce) {
				cycle = ce.Keys
				for i := range nodes {
					if slices.Contains(cycle, nodes[i].Key) {
						if e.Anchor == "" {
							e.Anchor, e.Key = nodes[i].Anchor, nodes[i].Key
						}
						nodes[i].Errors = append(nodes[i].Errors, "on the "+f.Message)
					}
				}
			}
		}
		d.Errors = append(d.Errors, e)
	}
	in2 := make([]dagInput, len(nodes))
	for i, n := range nodes {
		in2[i] = dagInput{Key: n.Key, DependsOn: n.DependsOn, Rule: n.Rule, Href: "#" + n.Anchor}
		if len(n.Errors) > 0 {
			in2[i].Invalid = "error"
			if slices.Contains(cycle, n.Key) {
				in2[i].Invalid = "in the cycle"
			}
		}
	}
	d.Nodes = nodes
	if len(in2) > 0 {
		d.Graph = layoutDAG("Graph of the draft: its nodes in dependency order, left to right", in2)
	}
	return d
}

// nodeIndex reads i from a field "nodes[i]…" of the API's errors.
func nodeIndex(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "nodes[")
	if !ok {
		return 0, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(rest[:end])
	return i, err == nil && i >= 0
}

// checkDraft is the preview of the editor's text: the API's decoding,
// then Workflows.Check. Only a failure to check (the database) is an
// error.
func (c *console) checkDraft(ec echo.Context, s *session, text string) (draftView, error) {
	in, err := decodeDocument(text)
	if err == nil {
		err = c.cfg.Workflows.Check(ec.Request().Context(), s.Tenant, in)
	}
	var ve *service.ValidationError
	if errors.As(err, &ve) {
		return draftOf(in, ve.Fields), nil
	}
	if err != nil {
		return draftView{}, err
	}
	return draftOf(in, nil), nil
}

// newWorkflowDocument is the new workflow editor's starting text: a
// three-step chain on the tenant's first endpoint.
func newWorkflowDocument(endpoints []service.Endpoint) string {
	ep := "ENDPOINT_ID"
	if len(endpoints) > 0 {
		ep = endpoints[0].ID
	}
	return strings.ReplaceAll(`{
  "name": "etl.daily",
  "inputs": {"day": "today"},
  "nodes": [
    {"key": "extract", "endpoint_id": "EP", "payload": {"day": "{{ .inputs.day }}"}, "payload_template": true},
    {"key": "transform", "endpoint_id": "EP", "depends_on": ["extract"]},
    {"key": "load", "endpoint_id": "EP", "depends_on": ["transform"]}
  ]
}
`, "EP", ep)
}

// newWorkflow shows the editor for a new workflow.
func (c *console) newWorkflow(ec echo.Context, s *session) error {
	eps, _, err := c.listEndpoints(ec, s)
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "workflow_edit", s, workflowEditView{Document: newWorkflowDocument(eps), Endpoints: eps})
}

// editWorkflow shows the editor holding the workflow's current document.
func (c *console) editWorkflow(ec echo.Context, s *session) error {
	w, err := c.cfg.Workflows.Get(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	doc, err := api.WorkflowDocument(w.Input())
	if err != nil {
		return err
	}
	eps, _, err := c.listEndpoints(ec, s)
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "workflow_edit", s, workflowEditView{Workflow: &w, Document: string(doc), Endpoints: eps})
}

// createWorkflow saves the editor's document as a new workflow (the REST
// POST's service call), or only previews it.
func (c *console) createWorkflow(ec echo.Context, s *session) error {
	return c.saveWorkflow(ec, s, nil)
}

// updateWorkflow saves the editor's document over the workflow (the REST
// PATCH's service call, with every field of the document: what the
// document leaves out takes its default), or only previews it.
func (c *console) updateWorkflow(ec echo.Context, s *session) error {
	w, err := c.cfg.Workflows.Get(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return c.saveWorkflow(ec, s, &w)
}

func (c *console) saveWorkflow(ec echo.Context, s *session, w *service.Workflow) error {
	ctx := ec.Request().Context()
	v := workflowEditView{Workflow: w, Document: ec.FormValue("document")}
	var err error
	if v.Endpoints, _, err = c.listEndpoints(ec, s); err != nil {
		return err
	}
	if ec.FormValue("preview") != "" {
		if v.Draft, err = c.checkDraft(ec, s, v.Document); err != nil {
			return err
		}
		return c.render(ec, http.StatusOK, "workflow_edit", s, v)
	}
	in, err := decodeDocument(v.Document)
	var saved service.Workflow
	if err == nil {
		if w == nil {
			saved, err = c.cfg.Workflows.Create(ctx, s.Tenant, in)
		} else {
			saved, err = c.cfg.Workflows.Update(ctx, s.Tenant, w.ID, func(cur *service.WorkflowInput) error {
				*cur = in
				return nil
			})
		}
	}
	var (
		ve *service.ValidationError
		qe *service.QuotaError
	)
	switch {
	case errors.As(err, &ve):
		v.Draft = draftOf(in, ve.Fields)
		v.Draft.Saving = true
		return c.render(ec, http.StatusUnprocessableEntity, "workflow_edit", s, v)
	case errors.Is(err, service.ErrConflict), errors.As(err, &qe):
		v.Problem = &errorView{Title: "The workflow was not saved", Detail: err.Error()}
		return c.render(ec, http.StatusConflict, "workflow_edit", s, v)
	case err != nil:
		return err
	}
	done := "workflow-created"
	if w != nil {
		done = "workflow-saved"
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/workflows/"+url.PathEscape(saved.ID)+"?done="+done)
}

// previewWorkflow answers the editor's script with the preview of the
// document as typed: the same fragment the page shows after "Preview",
// 422 when the draft is refused. Nothing is stored.
func (c *console) previewWorkflow(ec echo.Context, s *session) error {
	d, err := c.checkDraft(ec, s, ec.FormValue("document"))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := c.pages["workflow_edit"].ExecuteTemplate(&buf, "draft", d); err != nil {
		return fmt.Errorf("console: render the draft: %w", err)
	}
	status := http.StatusOK
	if !d.OK() {
		status = http.StatusUnprocessableEntity
	}
	return ec.HTMLBlob(status, buf.Bytes())
}
