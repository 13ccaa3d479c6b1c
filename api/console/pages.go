package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/endpoint"
	"github.com/axhq/ax/service/schedule"
)

// Page data. Each names its title and menu entry.

type signInView struct {
	Error  string
	Origin string
}

func (signInView) title() (string, string) { return "Sign in", "" }

type errorView struct {
	Title  string
	Detail string
	Fields []service.FieldError
}

func (v errorView) title() (string, string) { return v.Title, "" }

// taskRow is a task with its latest execution.
type taskRow struct {
	service.Task
	Schedule string
	Last     *service.ExecutionDetail
}

type tasksView struct {
	Rows      []taskRow
	State     string
	Label     string
	Name      string
	Next      string // cursor of the next page
	Filtered  bool
	Endpoints int // how many endpoints exist (the empty state's next step)
}

func (tasksView) title() (string, string) { return "Tasks", "tasks" }

type fireRow struct {
	At  time.Time
	DST string
	// Slot is At as the skip form sends it; Skipped: the slot was skipped.
	Slot    string
	Skipped bool
	// Member: a union's member that produces the slot (-1: not a union).
	Member int
}

type taskView struct {
	Task      service.Task
	Schedule  string
	DSTPolicy string
	// Members are a union's schedules, one line each.
	Members    []unionMember
	Fires      []fireRow
	Excluded   []time.Time
	Executions []service.ExecutionDetail
	// SuccessRate over the finished executions listed.
	SuccessRate *float64
	// Spark: one bar per listed execution, oldest first.
	Spark    []sparkBar
	Endpoint *service.Endpoint
	// AlertEndpoint is the task's alert endpoint (nil: none, or not
	// readable with the session's scopes).
	AlertEndpoint *service.Endpoint
	Payload       string
	// Flash, Problem: the outcome of a skip; Backfill: the backfill form
	// (values, refusal, dry-run plan).
	Flash    string
	Problem  *errorView
	Backfill backfillFormView

	// Lateness, Outcomes: the listed executions' lateness and outcome
	// sparklines (nil without executions).
	Lateness, Outcomes *stripView
	// Render is a templated task's rendered body (nil: not templated).
	Render *renderView

	// EventNote says what an event schedule fires on (it has no slots).
	EventNote string
}

func (v taskView) title() (string, string) { return "Task " + v.Task.Name, "tasks" }

type sparkBar struct {
	Height int // percent
	Class  string
	Label  string
}

type taskFormView struct {
	Endpoints []service.Endpoint
	Error     *errorView
	Form      taskForm
}

func (taskFormView) title() (string, string) { return "New task", "tasks" }

type taskForm struct {
	Name, EndpointID, Type, Cron, Timezone, Interval, Payload string
	// Event is an event schedule's event name; Members a union's members
	// (the JSON array schedule.schedules takes).
	Event, Members string
	// PayloadTemplate: the payload's strings are templates (docs/templates.md).
	PayloadTemplate bool
}

type headerRow struct{ Name, Value string }

type executionView struct {
	X    service.ExecutionDetail
	Task *service.Task
	// Workflow is a step's workflow (nil: not a step, or not readable).
	Workflow *service.Workflow
	Endpoint *service.Endpoint
	Headers  []headerRow
	Excerpt  string
}

func (v executionView) title() (string, string) { return "Execution …" + idTail(v.X.ID), "tasks" }

type endpointsView struct {
	Endpoints []service.Endpoint
	Next      string
	Error     *errorView
	Form      endpointForm
	// Failures are the recent failed executions, newest first.
	Failures []service.ExecutionDetail
	// Testable: the Test button is offered (Config.EndpointProbe);
	// Tested is a test request's outcome.
	Testable bool
	Tested   *endpointTestView
}

// endpointTestView is what a test request to an endpoint got.
type endpointTestView struct {
	Endpoint service.Endpoint
	Result   endpoint.TestResult
}

func (endpointsView) title() (string, string) { return "Endpoints", "endpoints" }

type endpointForm struct{ Name, URL string }

type secretView struct {
	Endpoint service.Endpoint
	Rotated  bool
}

func (secretView) title() (string, string) { return "Signing secret", "endpoints" }

type dashboardView struct {
	St       service.TenantStats
	States   []stateCount
	TaskRows []stateCount
	PerMin   float64
	// Series: the executions per step of the last 24 h, charted.
	Series *seriesView
}

func (dashboardView) title() (string, string) { return "Dashboard", "dashboard" }

type stateCount struct {
	State string
	N     int64
}

type backfillsView struct {
	Backfills []backfillRow
	Next      string
	Flash     string
}

// backfillRow is a backfill with what it runs: a task, or a workflow (its
// name and link only for a token that may read workflows).
type backfillRow struct {
	service.Backfill
	// Name is the task's or workflow's name ("" when unknown).
	Name string
	// Link: the workflow's page can be opened.
	Link bool
}

func (backfillsView) title() (string, string) { return "Backfills", "backfills" }

// pageOf reads the ?after= cursor.
func pageOf(ec echo.Context, limit int) service.Page {
	return service.Page{After: ec.QueryParam("after"), Limit: limit}
}

// tasks lists tasks with filters (state, label key=value or key:value, name prefix),
// each with its next fire and its latest execution.
func (c *console) tasks(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	v := tasksView{State: ec.QueryParam("state"), Label: strings.TrimSpace(ec.QueryParam("label")), Name: strings.TrimSpace(ec.QueryParam("name"))}
	f := service.TaskFilter{State: v.State, NamePrefix: v.Name}
	if v.Label != "" {
		k, val, ok := service.ParseLabelFilter(v.Label)
		if !ok || strings.TrimSpace(k) == "" {
			return &service.ValidationError{Fields: []service.FieldError{{Field: "label", Message: service.LabelFilterRule}}}
		}
		f.Labels = map[string]string{strings.TrimSpace(k): strings.TrimSpace(val)}
	}
	v.Filtered = v.State != "" || v.Label != "" || v.Name != ""
	tasks, next, err := c.cfg.Tasks.List(ctx, s.Tenant, f, pageOf(ec, 50))
	if err != nil {
		return err
	}
	v.Next = next
	canSeeExecutions := s.can(api.ScopeExecutionsRead)
	for _, t := range tasks {
		row := taskRow{Task: t, Schedule: describeSchedule(t.Schedule)}
		if canSeeExecutions {
			xs, _, err := c.cfg.Executions.List(ctx, s.Tenant, service.ExecutionFilter{TaskID: t.ID}, service.Page{Limit: 1})
			if err != nil {
				return err
			}
			if len(xs) > 0 {
				row.Last = &xs[0]
			}
		}
		v.Rows = append(v.Rows, row)
	}
	if len(tasks) == 0 && !v.Filtered && s.can(api.ScopeEndpointsRead) {
		eps, _, err := c.cfg.Endpoints.List(ctx, s.Tenant, service.Page{Limit: 1})
		if err != nil {
			return err
		}
		v.Endpoints = len(eps)
	}
	return c.render(ec, http.StatusOK, "tasks", s, v)
}

// task shows one task: its schedule in words, its next ten fires with the
// DST policy, and its recent executions.
func (c *console) task(ec echo.Context, s *session) error {
	return c.taskPage(ec, s, http.StatusOK, ec.Param("id"), taskView{Flash: taskFlashes[ec.QueryParam("done")]})
}

// taskPage renders the task page with status; v carries the outcome of a
// change (flash, problem, backfill form).
func (c *console) taskPage(ec echo.Context, s *session, status int, id string, v taskView) error {
	ctx := ec.Request().Context()
	t, err := c.cfg.Tasks.Get(ctx, s.Tenant, id)
	if err != nil {
		return err
	}
	v.Task, v.Schedule, v.DSTPolicy, v.Payload = t, describeSchedule(t.Schedule), t.Schedule.DSTPolicy, string(t.Payload)
	if v.Backfill.Form == (backfillForm{}) {
		v.Backfill.Form = defaultBackfillForm()
	}
	if v.DSTPolicy == "" {
		v.DSTPolicy = "vixie"
	}
	v.Members = unionMembers(t.Schedule)
	if t.State == service.TaskActive {
		// The preview's: the next fires, and among them the slots that
		// will not fire (skipped), marked.
		p, err := c.cfg.Tasks.Preview(ctx, s.Tenant, t.ID, 10)
		if err != nil {
			return err
		}
		for _, at := range p.Fires {
			v.Fires = append(v.Fires, fireRow{At: at, DST: p.Schedule.DSTNote(at), Slot: at.UTC().Format(time.RFC3339Nano), Member: p.Schedule.MemberAt(at)})
		}
		for _, at := range p.Skipped {
			v.Fires = append(v.Fires, fireRow{
				At: at, DST: p.Schedule.DSTNote(at), Slot: at.UTC().Format(time.RFC3339Nano), Skipped: true, Member: p.Schedule.MemberAt(at),
			})
		}
		slices.SortFunc(v.Fires, func(a, b fireRow) int { return a.At.Compare(b.At) })
		v.Excluded = p.Excluded
		if p.Event != "" {
			v.EventNote = eventNote(p.Event)
		}
	}
	if t.PayloadTemplate {
		if v.Render, err = c.renderPreview(ctx, s, t, ec.QueryParam("render_at")); err != nil {
			return err
		}
	}
	if s.can(api.ScopeExecutionsRead) {
		xs, _, err := c.cfg.Executions.List(ctx, s.Tenant, service.ExecutionFilter{TaskID: t.ID}, service.Page{Limit: 20})
		if err != nil {
			return err
		}
		v.Executions = xs
		v.SuccessRate, v.Spark = successOf(xs)
		v.Lateness, v.Outcomes = taskStrips(xs)
	}
	if s.can(api.ScopeEndpointsRead) {
		if ep, err := c.cfg.Endpoints.Get(ctx, s.Tenant, t.EndpointID); err == nil {
			v.Endpoint = &ep
		} else if !errors.Is(err, service.ErrNotFound) {
			return err
		}
		if t.AlertEndpointID != "" {
			if ep, err := c.cfg.Endpoints.Get(ctx, s.Tenant, t.AlertEndpointID); err == nil {
				v.AlertEndpoint = &ep
			} else if !errors.Is(err, service.ErrNotFound) {
				return err
			}
		}
	}
	return c.render(ec, status, "task", s, v)
}

// successOf returns the success rate of the finished executions among xs
// (newest first) and a bar per execution, oldest first, as tall as its
// run took relative to the slowest.
func successOf(xs []service.ExecutionDetail) (*float64, []sparkBar) {
	var ok, done int
	var longest time.Duration
	took := func(x service.ExecutionDetail) time.Duration {
		if x.StartedAt == nil || x.FinishedAt == nil {
			return 0
		}
		return x.FinishedAt.Sub(*x.StartedAt)
	}
	for _, x := range xs {
		switch x.State {
		case service.ExecSucceeded:
			ok++
			done++
		case service.ExecFailed:
			done++
		}
		longest = max(longest, took(x))
	}
	bars := make([]sparkBar, 0, len(xs))
	for _, x := range slices.Backward(xs) {
		h := 100
		if longest > 0 {
			// Rounded to a tenth: the bars' heights are CSS classes
			// (h10 … h100), the policy allows no inline style.
			h = min(100, max(10, int((100*took(x)/longest+5)/10*10)))
		}
		bars = append(bars, sparkBar{
			Height: h, Class: x.State,
			Label: fmt.Sprintf("%s %s, %s", x.State, x.ScheduledFor.UTC().Format("2006-01-02 15:04:05"), took(x).Round(time.Millisecond)),
		})
	}
	if done == 0 {
		return nil, bars
	}
	r := float64(ok) / float64(done)
	return &r, bars
}

func (c *console) newTask(ec echo.Context, s *session) error {
	v := taskFormView{Form: taskForm{Type: "cron", Cron: "*/5 * * * *", Timezone: "UTC", Interval: "60", Payload: "{}"}}
	eps, _, err := c.listEndpoints(ec, s)
	if err != nil {
		return err
	}
	v.Endpoints = eps
	return c.render(ec, http.StatusOK, "task_new", s, v)
}

func (c *console) listEndpoints(ec echo.Context, s *session) ([]service.Endpoint, string, error) {
	if !s.can(api.ScopeEndpointsRead) {
		return nil, "", nil
	}
	return c.cfg.Endpoints.List(ec.Request().Context(), s.Tenant, pageOf(ec, service.PageLimitMax))
}

// createTask creates a task from the form; invalid input shows the form
// again with the reasons.
func (c *console) createTask(ec echo.Context, s *session) error {
	f := taskForm{
		Name: strings.TrimSpace(ec.FormValue("name")), EndpointID: ec.FormValue("endpoint_id"), Type: ec.FormValue("type"),
		Cron: strings.TrimSpace(ec.FormValue("cron")), Timezone: strings.TrimSpace(ec.FormValue("timezone")),
		Interval: strings.TrimSpace(ec.FormValue("interval")), Payload: strings.TrimSpace(ec.FormValue("payload")),
		PayloadTemplate: ec.FormValue("payload_template") == "true",
		Event:           strings.TrimSpace(ec.FormValue("event")), Members: strings.TrimSpace(ec.FormValue("members")),
	}
	in := service.TaskInput{
		Name: f.Name, EndpointID: f.EndpointID, Schedule: schedule.Spec{Type: f.Type, Timezone: f.Timezone},
		PayloadTemplate: f.PayloadTemplate,
	}
	var ve service.ValidationError
	switch f.Type {
	case "cron":
		in.Schedule.Cron = f.Cron
	case "interval":
		n, err := strconv.ParseInt(f.Interval, 10, 64)
		if err != nil {
			ve.Add("schedule.interval_seconds", "must be a whole number of seconds")
		}
		in.Schedule.IntervalSeconds = n
	case schedule.Event:
		in.Schedule.Event = f.Event
	case schedule.Union:
		in.Schedule.Timezone, in.Schedule.Schedules = "", readMembers(&ve, f.Members)
	default:
		ve.Add("schedule.type", "must be cron, interval, union or event")
	}
	if f.Payload != "" {
		if !json.Valid([]byte(f.Payload)) {
			ve.Add("payload", "must be JSON")
		}
		in.Payload = []byte(f.Payload)
	}
	var t service.Task
	err := ve.Err()
	if err == nil {
		t, err = c.cfg.Tasks.Create(ec.Request().Context(), s.Tenant, in)
	}
	var vErr *service.ValidationError
	if errors.As(err, &vErr) {
		eps, _, lerr := c.listEndpoints(ec, s)
		if lerr != nil {
			return lerr
		}
		return c.render(ec, http.StatusUnprocessableEntity, "task_new", s, taskFormView{
			Endpoints: eps, Form: f,
			Error: &errorView{Title: "The task was not created", Fields: vErr.Fields},
		})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/tasks/"+t.ID)
}

func (c *console) pauseTask(ec echo.Context, s *session) error {
	t, err := c.cfg.Tasks.Pause(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return back(ec, Prefix+"/tasks/"+t.ID)
}

func (c *console) resumeTask(ec echo.Context, s *session) error {
	t, err := c.cfg.Tasks.Resume(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return back(ec, Prefix+"/tasks/"+t.ID)
}

// triggerTask fires the task now and opens the new execution.
func (c *console) triggerTask(ec echo.Context, s *session) error {
	x, err := c.cfg.Executions.Trigger(ec.Request().Context(), s.Tenant, ec.Param("id"), service.TriggerInput{})
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/executions/"+x.ID)
}

// back redirects to the form's "back" field when it is a console path,
// else to fallback.
func back(ec echo.Context, fallback string) error {
	if b := ec.FormValue("back"); strings.HasPrefix(b, Prefix+"/") && !strings.HasPrefix(b, "//") && !strings.Contains(b, "\\") {
		return ec.Redirect(http.StatusSeeOther, b)
	}
	return ec.Redirect(http.StatusSeeOther, fallback)
}

// execution shows an execution: its timeline, the headers its webhook
// carries, the last response's excerpt, and retry/cancel.
func (c *console) execution(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	x, err := c.cfg.Executions.Get(ctx, s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	v := executionView{X: x}
	for _, e := range slices.Backward(x.Events) {
		if (e.Type == service.EventAttemptFailed || e.Type == service.EventAttemptSucceeded) && e.Message != "" {
			v.Excerpt = e.Message
			break
		}
	}
	if x.TaskID != "" && s.can(api.ScopeTasksRead) {
		if t, err := c.cfg.Tasks.Get(ctx, s.Tenant, x.TaskID); err == nil {
			v.Task = &t
			if s.can(api.ScopeEndpointsRead) {
				if ep, err := c.cfg.Endpoints.Get(ctx, s.Tenant, t.EndpointID); err == nil {
					v.Endpoint = &ep
				}
			}
		}
	}
	if x.WorkflowRunID != "" && s.can(api.ScopeWorkflowsRead) {
		if w, err := c.cfg.Workflows.Get(ctx, s.Tenant, x.WorkflowID); err == nil {
			v.Workflow = &w
		}
	}
	v.Headers = sentHeaders(x, v.Endpoint)
	return c.render(ec, http.StatusOK, "execution", s, v)
}

// sentHeaders lists the headers each attempt's webhook carries: the
// endpoint's own (values hidden: they are often credentials) and ax's.
func sentHeaders(x service.ExecutionDetail, ep *service.Endpoint) []headerRow {
	var out []headerRow
	if ep != nil {
		for _, k := range slices.Sorted(maps.Keys(ep.Headers)) {
			out = append(out, headerRow{Name: http.CanonicalHeaderKey(k), Value: "••• (set on the endpoint)"})
		}
	}
	out = append(out,
		headerRow{"Content-Type", "application/json"},
		headerRow{"Idempotency-Key", x.ID},
		headerRow{"Webhook-Id", x.ID},
		headerRow{"Webhook-Timestamp", "the attempt's start, Unix seconds"},
		headerRow{"Webhook-Signature", "v1,… (HMAC-SHA256 with the endpoint's secret)"},
		headerRow{"X-Ax-Execution-Id", x.ID},
		headerRow{"X-Ax-Scheduled-For", x.ScheduledFor.UTC().Format(time.RFC3339Nano)},
		headerRow{"X-Ax-Round", strconv.Itoa(max(x.Round, 1))},
		headerRow{"X-Ax-Attempt", "1, 2, … per attempt"},
	)
	if x.WorkflowRunID != "" {
		out = append(out, headerRow{"X-Ax-Workflow-Id", x.WorkflowID}, headerRow{"X-Ax-Workflow-Run-Id", x.WorkflowRunID}, headerRow{"X-Ax-Node", x.Node})
	} else {
		out = append(out, headerRow{"X-Ax-Task-Id", x.TaskID})
	}
	return out
}

func (c *console) retryExecution(ec echo.Context, s *session) error {
	x, err := c.cfg.Executions.Retry(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/executions/"+x.ID)
}

func (c *console) cancelExecution(ec echo.Context, s *session) error {
	x, err := c.cfg.Executions.Cancel(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/executions/"+x.ID)
}

// endpoints lists the endpoints, with the create form and the recent
// failed deliveries.
func (c *console) endpoints(ec echo.Context, s *session) error {
	return c.endpointsPage(ec, s, http.StatusOK, endpointsView{})
}

func (c *console) endpointsPage(ec echo.Context, s *session, status int, v endpointsView) error {
	ctx := ec.Request().Context()
	eps, next, err := c.cfg.Endpoints.List(ctx, s.Tenant, pageOf(ec, 100))
	if err != nil {
		return err
	}
	v.Endpoints, v.Next, v.Testable = eps, next, c.cfg.EndpointProbe != nil
	if s.can(api.ScopeExecutionsRead) {
		xs, _, err := c.cfg.Executions.List(ctx, s.Tenant, service.ExecutionFilter{State: service.ExecFailed}, service.Page{Limit: 10})
		if err != nil {
			return err
		}
		v.Failures = xs
	}
	return c.render(ec, status, "endpoints", s, v)
}

// createEndpoint creates an endpoint and shows its secret, once.
func (c *console) createEndpoint(ec echo.Context, s *session) error {
	f := endpointForm{Name: strings.TrimSpace(ec.FormValue("name")), URL: strings.TrimSpace(ec.FormValue("url"))}
	ep, err := c.cfg.Endpoints.Create(ec.Request().Context(), s.Tenant, service.EndpointInput{Name: f.Name, URL: f.URL, Enabled: true})
	var ve *service.ValidationError
	if errors.As(err, &ve) {
		return c.endpointsPage(ec, s, http.StatusUnprocessableEntity, endpointsView{
			Form:  f,
			Error: &errorView{Title: "The endpoint was not created", Fields: ve.Fields},
		})
	}
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusCreated, "secret", s, secretView{Endpoint: ep})
}

// rotateSecret generates a new secret and shows it, once; the old one
// keeps signing for service.SecretOverlap.
func (c *console) rotateSecret(ec echo.Context, s *session) error {
	ep, err := c.cfg.Endpoints.RotateSecret(ec.Request().Context(), s.Tenant, ec.Param("id"), "")
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "secret", s, secretView{Endpoint: ep, Rotated: true})
}

func (c *console) setEnabled(ec echo.Context, s *session, enabled bool) error {
	_, err := c.cfg.Endpoints.Update(ec.Request().Context(), s.Tenant, ec.Param("id"), func(in *service.EndpointInput) error {
		in.Enabled = enabled
		return nil
	})
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/endpoints")
}

func (c *console) disableEndpoint(ec echo.Context, s *session) error {
	return c.setEnabled(ec, s, false)
}

func (c *console) enableEndpoint(ec echo.Context, s *session) error { return c.setEnabled(ec, s, true) }

// dashboard shows the last 24 hours from the stats service.
func (c *console) dashboard(ec echo.Context, s *session) error {
	st, err := c.cfg.Stats.Get(ec.Request().Context(), s.Tenant, service.StatsWindowDefault)
	if err != nil {
		return err
	}
	v := dashboardView{St: st}
	var total int64
	for _, state := range []string{
		service.ExecPending, service.ExecRunning, service.ExecRetrying, service.ExecSucceeded,
		service.ExecFailed, service.ExecCancelled, service.ExecSkipped,
	} {
		v.States = append(v.States, stateCount{state, st.Executions[state]})
		total += st.Executions[state]
	}
	for _, state := range []string{service.TaskActive, service.TaskPaused, service.TaskCompleted} {
		v.TaskRows = append(v.TaskRows, stateCount{state, st.Tasks[state]})
	}
	v.PerMin = float64(total) / st.Window.Minutes()
	series, err := c.cfg.Stats.Series(ec.Request().Context(), s.Tenant, service.StatsWindowDefault, dashStep)
	if err != nil {
		return err
	}
	v.Series = layoutSeries(series)
	return c.render(ec, http.StatusOK, "dashboard", s, v)
}

// backfills lists backfills, of tasks and of workflows, with their
// progress.
func (c *console) backfills(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	bs, next, err := c.cfg.Backfills.List(ctx, s.Tenant, service.BackfillFilter{}, pageOf(ec, 50))
	if err != nil {
		return err
	}
	v := backfillsView{Next: next, Flash: backfillFlashes[ec.QueryParam("done")]}
	names := map[string]string{}
	for _, b := range bs {
		row := backfillRow{Backfill: b}
		switch {
		case b.WorkflowID != "":
			row.Link = s.can(api.ScopeWorkflowsRead)
			if row.Link {
				if row.Name, err = nameOf(names, b.WorkflowID, func() (string, error) {
					w, err := c.cfg.Workflows.Get(ctx, s.Tenant, b.WorkflowID)
					return w.Name, err
				}); err != nil {
					return err
				}
			}
		default:
			if row.Name, err = nameOf(names, b.TaskID, func() (string, error) {
				t, err := c.cfg.Tasks.Get(ctx, s.Tenant, b.TaskID)
				return t.Name, err
			}); err != nil {
				return err
			}
		}
		v.Backfills = append(v.Backfills, row)
	}
	return c.render(ec, http.StatusOK, "backfills", s, v)
}

// nameOf returns the name get reads for id, once per page (names caches
// them); a deleted task or workflow has none.
func nameOf(names map[string]string, id string, get func() (string, error)) (string, error) {
	if n, ok := names[id]; ok {
		return n, nil
	}
	n, err := get()
	if errors.Is(err, service.ErrNotFound) {
		n, err = "", nil
	}
	if err != nil {
		return "", err
	}
	names[id] = n
	return n, nil
}

type workflowsView struct {
	Workflows []workflowRow
	Next      string
}

type workflowRow struct {
	service.Workflow
	Schedule string
	Runs     []service.WorkflowRun
}

func (workflowsView) title() (string, string) { return "Workflows", "workflows" }

type workflowRunView struct {
	Run      service.WorkflowRun
	Workflow service.Workflow
	Graph    dagView
	// Resolvable: the run's nodes can be run or skipped (it is running or
	// blocked); Cancellable: the run is not final.
	Resolvable, Cancellable bool
	Flash                   string
	Problem                 *errorView
	// SLA: the run's deadline and whether it missed it.
	SLA service.RunSLA
	// Data: the run's inputs, its nodes' outputs and lineage.
	Data runDataView
}

func (v workflowRunView) title() (string, string) {
	return "Run of " + v.Workflow.Name, "workflows"
}

type workflowView struct {
	Workflow service.Workflow
	Schedule string
	Graph    dagView
	Runs     []service.WorkflowRun
	Flash    string
	Problem  *errorView
	// Backfill is the backfill form (values, refusal, dry-run plan).
	Backfill backfillFormView
	// Trigger is the "Trigger with inputs" form (inputs as typed, refusal).
	Trigger triggerFormView
}

func (v workflowView) title() (string, string) { return "Workflow " + v.Workflow.Name, "workflows" }

// workflows lists the workflows, each with its latest runs.
func (c *console) workflows(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	ws, next, err := c.cfg.Workflows.List(ctx, s.Tenant, pageOf(ec, 50))
	if err != nil {
		return err
	}
	v := workflowsView{Next: next}
	for _, w := range ws {
		row := workflowRow{Workflow: w, Schedule: "by trigger only"}
		if w.Schedule != nil {
			row.Schedule = describeSchedule(*w.Schedule)
		}
		if row.Runs, _, err = c.cfg.Workflows.ListRuns(ctx, s.Tenant, w.ID, service.Page{Limit: 5}); err != nil {
			return err
		}
		v.Workflows = append(v.Workflows, row)
	}
	return c.render(ec, http.StatusOK, "workflows", s, v)
}

// flashes are the messages a change leaves for the page it redirects to
// (?done=…): a fixed text per change, so that a link cannot put words in
// the console's mouth.
var flashes = map[string]string{
	"paused":    "The workflow is paused: no scheduled runs until it is resumed.",
	"resumed":   "The workflow is resumed.",
	"triggered": "A run was triggered.",
	"cancelled": "The run is cancelled.",
	"ran":       "The node was started.",
	"skipped":   "The node is skipped.",
	// A workflow backfill started by a token that cannot read the
	// backfills page (tasks:read) comes back to the workflow.
	"workflow-created": "The workflow is created (version 1).",
	"workflow-saved":   "The workflow is saved. A change of its nodes or inputs made a new version; runs already started keep the version they started with.",
	"backfill-started": "The backfill is started: its slots start runs oldest first, a few at a time (GET /v1/backfills?workflow_id=… shows its progress).",
}

// nodeFlashes are the same for a change of one node, named by ?node=.
var nodeFlashes = map[string]string{
	"ran":      "was started now, whatever its trigger rule.",
	"resolved": "is marked succeeded without its event (a wait_for node sends nothing); its downstream nodes go on.",
	"skipped":  "is skipped: its downstream nodes go on as if it had succeeded.",
}

// flashOf returns the request's flash message, with the node it names.
func flashOf(ec echo.Context) string {
	done, k := ec.QueryParam("done"), ec.QueryParam("node")
	if msg, ok := nodeFlashes[done]; ok && k != "" {
		return "Node " + strconv.Quote(k) + " " + msg
	}
	return flashes[done]
}

// conflictView is the problem a refused change shows on the page it came
// from (a 409: the run or node is no longer in a state that allows it), or
// nil with the error when the error is another kind.
func conflictView(err error) (*errorView, error) {
	var ve *service.ValidationError
	switch {
	case errors.Is(err, service.ErrConflict):
		return &errorView{Title: "Not done", Detail: err.Error()}, nil
	case errors.As(err, &ve):
		ev := &errorView{Title: "Not done"}
		for _, f := range ve.Fields {
			ev.Detail += f.Field + " " + f.Message + ". "
		}
		return ev, nil
	}
	return nil, err
}

// workflow shows a workflow: its graph, its nodes, its recent runs and,
// for a token that may change it, pause/resume and trigger.
func (c *console) workflow(ec echo.Context, s *session) error {
	return c.workflowPage(ec, s, http.StatusOK, ec.Param("id"), workflowView{Flash: flashOf(ec)})
}

// workflowPage renders the workflow page with status; v carries the
// outcome of a change (flash, problem, backfill form).
func (c *console) workflowPage(ec echo.Context, s *session, status int, id string, v workflowView) error {
	ctx := ec.Request().Context()
	w, err := c.cfg.Workflows.Get(ctx, s.Tenant, id)
	if err != nil {
		return err
	}
	v.Workflow, v.Schedule = w, "by trigger only"
	if v.Trigger.Error == nil {
		v.Trigger.Inputs = defaultInputs(w.Inputs)
	}
	if v.Backfill.Form == (backfillForm{}) {
		v.Backfill.Form = defaultBackfillForm()
	}
	if w.Schedule != nil {
		v.Schedule = describeSchedule(*w.Schedule)
	}
	in := make([]dagInput, 0, len(w.Nodes))
	for _, n := range w.Nodes {
		in = append(in, dagInput{Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule})
	}
	v.Graph = layoutDAG("Graph of workflow "+w.Name+": its nodes in dependency order, left to right", in)
	if v.Runs, _, err = c.cfg.Workflows.ListRuns(ctx, s.Tenant, w.ID, service.Page{Limit: 20}); err != nil {
		return err
	}
	return c.render(ec, status, "workflow", s, v)
}

// workflowRun shows a run: its graph coloured by node state, its nodes
// and, for a token that may change it, the actions that resolve it.
func (c *console) workflowRun(ec echo.Context, s *session) error {
	return c.workflowRunPage(ec, s, http.StatusOK, ec.Param("id"), flashOf(ec), nil)
}

func (c *console) workflowRunPage(ec echo.Context, s *session, status int, id, flash string, problem *errorView) error {
	ctx := ec.Request().Context()
	r, err := c.cfg.Workflows.GetRun(ctx, s.Tenant, id)
	if err != nil {
		return err
	}
	w, err := c.cfg.Workflows.Get(ctx, s.Tenant, r.WorkflowID)
	if err != nil {
		return err
	}
	v := workflowRunView{
		Run: r, Workflow: w, Flash: flash, Problem: problem, SLA: r.SLA, Data: runDataOf(r, w),
		Resolvable:  r.State == service.RunRunning || r.State == service.RunBlocked,
		Cancellable: r.State == service.RunPending || r.State == service.RunRunning || r.State == service.RunBlocked,
	}
	in := make([]dagInput, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		d := dagInput{Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule, State: n.State}
		if n.ExecutionID != "" && s.can(api.ScopeExecutionsRead) {
			d.Href = Prefix + "/executions/" + n.ExecutionID
		}
		in = append(in, d)
	}
	v.Graph = layoutDAG("Run of workflow "+w.Name+": each node with its state, in dependency order, left to right", in)
	return c.render(ec, status, "workflow_run", s, v)
}

// runChange applies a change to a run and goes back to the run's page,
// with a flash message, or shows the refusal there.
func (c *console) runChange(ec echo.Context, s *session, done *string, node string,
	change func(ctx context.Context, tenant, id string) (service.WorkflowRun, error),
) error {
	id := ec.Param("id")
	if _, err := change(ec.Request().Context(), s.Tenant, id); err != nil {
		p, err := conflictView(err)
		if err != nil {
			return err
		}
		return c.workflowRunPage(ec, s, http.StatusConflict, id, "", p)
	}
	q := url.Values{"done": {*done}}
	if node != "" {
		q.Set("node", node)
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/workflow-runs/"+url.PathEscape(id)+"?"+q.Encode())
}

func (c *console) cancelRun(ec echo.Context, s *session) error {
	done := "cancelled"
	return c.runChange(ec, s, &done, "", c.cfg.Workflows.CancelRun)
}

// runNode runs a node now; a wait_for node, which sends nothing, is
// marked succeeded instead, and the flash says which happened.
func (c *console) runNode(ec echo.Context, s *session) error {
	key := ec.Param("key")
	done := "ran"
	return c.runChange(ec, s, &done, key, func(ctx context.Context, tenant, id string) (service.WorkflowRun, error) {
		r, err := c.cfg.Workflows.RunNode(ctx, tenant, id, key)
		if err == nil && resolvedWait(r, key) {
			done = "resolved"
		}
		return r, err
	})
}

// resolvedWait reports whether node key of run r (as RunNode returns it)
// succeeded without an execution (a node's shown state is its
// execution's otherwise): a wait_for node, which sends nothing, marked
// succeeded by hand. A node that was run has its execution.
func resolvedWait(r service.WorkflowRun, key string) bool {
	for _, n := range r.Nodes {
		if n.Key == key {
			return n.ExecutionID == "" && n.State == service.ExecSucceeded
		}
	}
	return false
}

func (c *console) skipNode(ec echo.Context, s *session) error {
	key, done := ec.Param("key"), "skipped"
	return c.runChange(ec, s, &done, key, func(ctx context.Context, tenant, id string) (service.WorkflowRun, error) {
		return c.cfg.Workflows.SkipNode(ctx, tenant, id, key)
	})
}

// workflowChange pauses or resumes a workflow and goes back to its page.
func (c *console) workflowChange(ec echo.Context, s *session, done string,
	change func(ctx context.Context, tenant, id string) (service.Workflow, error),
) error {
	id := ec.Param("id")
	if _, err := change(ec.Request().Context(), s.Tenant, id); err != nil {
		p, err := conflictView(err)
		if err != nil {
			return err
		}
		return c.workflowPage(ec, s, http.StatusConflict, id, workflowView{Problem: p})
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/workflows/"+url.PathEscape(id)+"?done="+done)
}

func (c *console) pauseWorkflow(ec echo.Context, s *session) error {
	return c.workflowChange(ec, s, "paused", c.cfg.Workflows.Pause)
}

func (c *console) resumeWorkflow(ec echo.Context, s *session) error {
	return c.workflowChange(ec, s, "resumed", c.cfg.Workflows.Resume)
}

// backfillWorkflow plans or starts a backfill of the workflow's slots from
// the form (the REST workflow backfill endpoint's service call): "dry_run"
// shows the plan on the workflow page; otherwise the backfill starts and
// the backfills page opens (the workflow page, for a token that may not
// read it). A refusal (invalid range, more than service.BackfillSlotsMax
// slots, no schedule) is shown on the workflow page with the form as typed.
func (c *console) backfillWorkflow(ec echo.Context, s *session) error {
	id := ec.Param("id")
	started := Prefix + "/backfills?done=backfill-started"
	if !s.can(api.ScopeTasksRead) {
		started = Prefix + "/workflows/" + url.PathEscape(id) + "?done=backfill-started"
	}
	return c.backfill(ec, s, c.cfg.Backfills.CreateForWorkflow, started, func(status int, bv backfillFormView) error {
		return c.workflowPage(ec, s, status, id, workflowView{Backfill: bv})
	})
}
