package console

import (
	"encoding/json"
	"errors"
	"html"
	"html/template"
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
	"github.com/axhq/ax/service/schedule"
)

// editPreviewCount is how many next fires the edit form previews.
const editPreviewCount = 5

// editableTypes are the schedule types the task form edits; a task of
// another type keeps its schedule and the form says so.
var editableTypes = []string{schedule.Cron, schedule.Interval, schedule.Once, schedule.Union, schedule.Event}

// taskEditForm is the task form's values, as typed.
type taskEditForm struct {
	Name, EndpointID                                   string
	Type, Cron, Timezone, Dialect, DSTPolicy, Interval string
	RunAt, StartAt, EndAt                              string
	ExcludeCalendars                                   []string
	Payload                                            string
	PayloadTemplate                                    bool
	Priority, TimeoutMS                                string
	MaxAttempts, InitialBackoffMS, MaxBackoffMS        string
	OverlapPolicy, MisfirePolicy                       string
	Labels                                             string
	AlertEndpointID, PauseAfterFailures, Shards        string
	CompletionMode, CompletionTimeoutMS, HeartbeatMS   string
	SLAMS                                              string

	// Event is an event schedule's event name; Members a union's members,
	// the JSON array schedule.schedules takes.
	Event, Members string
}

// previewRow is one previewed fire: the instant (UTC), the same in the
// schedule's zone, and its DST note.
type previewRow struct {
	At    time.Time `json:"at"`
	Local string    `json:"local"`
	DST   string    `json:"dst,omitempty"`
}

// taskEditView is the edit page: the form, its field errors, the
// endpoints and calendars to choose from, and the preview of the next
// fires of the schedule as typed.
type taskEditView struct {
	Task      service.Task
	Form      taskEditForm
	Endpoints []service.Endpoint
	Calendars []service.Calendar
	// Locked: the schedule's type is not one the form edits; saving keeps it.
	Locked bool
	// Errs are the refusal's messages by field; Problem lists the
	// refusal, with the fields no input shows.
	Errs    map[string]string
	Problem *errorView
	Preview []previewRow
	// PreviewNote explains an empty preview.
	PreviewNote string
	Excluded    int
}

func (v taskEditView) title() (string, string) { return "Edit task " + v.Task.Name, "tasks" }

// taskEditFields are the fields the task form has an input for (the API's
// names, which a refusal's errors[].field uses).
var taskEditFields = []string{
	"name", "endpoint_id", "schedule", "schedule.type", "schedule.cron", "schedule.timezone", "schedule.dialect", "schedule.dst_policy",
	"schedule.interval_seconds", "schedule.run_at", "schedule.start_at", "schedule.end_at", "schedule.exclude_calendars",
	"schedule.event", "schedule.schedules",
	"payload", "payload_template", "priority", "timeout_ms", "retry.max_attempts", "retry.initial_backoff_ms", "retry.max_backoff_ms",
	"overlap_policy", "misfire_policy", "labels", "alert_endpoint_id", "pause_after_failures", "shards",
	"completion.mode", "completion.timeout_ms", "completion.heartbeat_timeout_ms", "sla.finish_within_ms",
}

// fieldMessages maps a refusal's errors to the inputs that show them: a
// field's own input, else the input of the nearest enclosing field
// (labels.team → labels, schedule.exclude_calendars[1] →
// schedule.exclude_calendars). Errors no input shows are returned apart.
func fieldMessages(fields []service.FieldError, known []string) (map[string]string, []service.FieldError) {
	out := map[string]string{}
	var rest []service.FieldError
	for _, f := range fields {
		key := f.Field
		for key != "" && !slices.Contains(known, key) {
			if i := strings.LastIndexAny(key, ".["); i >= 0 {
				key = key[:i]
			} else {
				key = ""
			}
		}
		if key == "" {
			rest = append(rest, f)
			continue
		}
		msg := f.Message
		if key != f.Field {
			msg = f.Field + ": " + msg
		}
		if prev, ok := out[key]; ok {
			msg = prev + "; " + msg
		}
		out[key] = msg
	}
	return out, rest
}

// editFormOf is the form holding task t's current values.
func editFormOf(t service.Task) taskEditForm {
	sp := t.Schedule
	f := taskEditForm{
		Name: t.Name, EndpointID: t.EndpointID, Type: sp.Type, Cron: sp.Cron, Timezone: sp.Timezone,
		Dialect: sp.Dialect, DSTPolicy: sp.DSTPolicy, ExcludeCalendars: sp.ExcludeCalendars,
		RunAt: localOf(sp.RunAt), StartAt: localOf(sp.StartAt), EndAt: localOf(sp.EndAt),
		Payload: string(t.Payload), PayloadTemplate: t.PayloadTemplate,
		Priority: strconv.Itoa(t.Priority), MaxAttempts: strconv.Itoa(t.Retry.MaxAttempts),
		InitialBackoffMS: ms(t.Retry.InitialBackoff), MaxBackoffMS: ms(t.Retry.MaxBackoff),
		OverlapPolicy: t.OverlapPolicy, MisfirePolicy: t.MisfirePolicy, AlertEndpointID: t.AlertEndpointID,
		PauseAfterFailures: strconv.Itoa(t.PauseAfterFailures), Shards: strconv.Itoa(max(t.Shards, 1)),
		CompletionMode: service.CompletionResponse,
	}
	if sp.IntervalSeconds > 0 {
		f.Interval = strconv.FormatInt(sp.IntervalSeconds, 10)
	}
	f.Event = sp.Event
	if sp.Type == schedule.Union {
		if doc, err := api.ScheduleMembersDocument(sp.Schedules); err == nil {
			f.Members = string(doc)
		}
		f.Timezone = "" // the members'
	}
	if t.Timeout > 0 {
		f.TimeoutMS = ms(t.Timeout)
	}
	if t.Completion.Callback() {
		f.CompletionMode = service.CompletionCallback
		f.CompletionTimeoutMS = ms(t.Completion.Timeout)
		if t.Completion.HeartbeatTimeout > 0 {
			f.HeartbeatMS = ms(t.Completion.HeartbeatTimeout)
		}
	}
	if t.SLA.FinishWithin > 0 {
		f.SLAMS = ms(t.SLA.FinishWithin)
	}
	var labels strings.Builder
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		labels.WriteString(k + "=" + t.Labels[k] + "\n")
	}
	f.Labels = labels.String()
	return f
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// localOf is t as a datetime-local field shows it (UTC, seconds kept).
func localOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(backfillLocal + ":05")
}

// readTaskForm reads the submitted task form.
func readTaskForm(ec echo.Context) (taskEditForm, error) {
	form, err := ec.FormParams()
	if err != nil {
		return taskEditForm{}, err
	}
	v := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	return taskEditForm{
		Name: v("name"), EndpointID: v("endpoint_id"),
		Type: v("type"), Cron: v("cron"), Timezone: v("timezone"), Dialect: v("dialect"), DSTPolicy: v("dst_policy"),
		Interval: v("interval"), RunAt: v("run_at"), StartAt: v("start_at"), EndAt: v("end_at"),
		ExcludeCalendars: form["exclude_calendars"], Event: v("event"), Members: v("members"),
		Payload: v("payload"), PayloadTemplate: form.Get("payload_template") == "true",
		Priority: v("priority"), TimeoutMS: v("timeout_ms"),
		MaxAttempts: v("max_attempts"), InitialBackoffMS: v("initial_backoff_ms"), MaxBackoffMS: v("max_backoff_ms"),
		OverlapPolicy: v("overlap_policy"), MisfirePolicy: v("misfire_policy"), Labels: form.Get("labels"),
		AlertEndpointID: v("alert_endpoint_id"), PauseAfterFailures: v("pause_after_failures"), Shards: v("shards"),
		CompletionMode: v("completion_mode"), CompletionTimeoutMS: v("completion_timeout_ms"), HeartbeatMS: v("heartbeat_timeout_ms"),
		SLAMS: v("sla_finish_within_ms"),
	}, nil
}

// spec is the schedule the form describes. Times are read as UTC.
func (f taskEditForm) spec(ve *service.ValidationError) schedule.Spec {
	sp := schedule.Spec{Type: f.Type, Timezone: f.Timezone, ExcludeCalendars: f.ExcludeCalendars}
	switch f.Type {
	case schedule.Cron:
		sp.Cron, sp.Dialect, sp.DSTPolicy = f.Cron, f.Dialect, f.DSTPolicy
	case schedule.Interval:
		sp.IntervalSeconds = wholeNumber(ve, "schedule.interval_seconds", f.Interval)
	case schedule.Once:
		sp.RunAt = optionalTime(ve, "schedule.run_at", f.RunAt)
	case schedule.Event:
		sp.Event = f.Event
	case schedule.Union:
		// The zone, dialect and DST policy are each member's.
		sp.Timezone, sp.Schedules = "", readMembers(ve, f.Members)
	default:
		ve.Add("schedule.type", "must be cron, interval, once, union or event")
	}
	sp.StartAt = optionalTime(ve, "schedule.start_at", f.StartAt)
	sp.EndAt = optionalTime(ve, "schedule.end_at", f.EndAt)
	return sp
}

// readMembers reads a union's members, typed as the JSON array
// schedule.schedules takes (the REST API's decoder); its refusals are
// added to ve under schedule.schedules.
func readMembers(ve *service.ValidationError, text string) []schedule.Spec {
	if text == "" {
		ve.Add("schedule.schedules", "is required for a union schedule: a JSON array of 2 to 10 cron or interval schedules")
		return nil
	}
	members, err := api.DecodeScheduleMembers([]byte(text))
	var mv *service.ValidationError
	switch {
	case errors.As(err, &mv):
		ve.Fields = append(ve.Fields, mv.Fields...)
	case err != nil:
		ve.Add("schedule.schedules", err.Error())
	}
	return members
}

// apply writes the form's values over in; the schedule only when locked
// is false (a schedule of a type the form does not edit is kept).
func (f taskEditForm) apply(in *service.TaskInput, locked bool) error {
	var ve service.ValidationError
	in.Name, in.EndpointID = f.Name, f.EndpointID
	if !locked {
		in.Schedule = f.spec(&ve)
	}
	in.Payload, in.PayloadTemplate = []byte(f.Payload), f.PayloadTemplate
	if f.Payload != "" && !json.Valid(in.Payload) {
		ve.Add("payload", "must be JSON")
	}
	in.Priority = int(wholeNumber(&ve, "priority", f.Priority))
	if f.Priority != "" && (in.Priority < 1 || in.Priority > 4) {
		ve.Add("priority", "must be 1 (highest) to 4")
	}
	in.Timeout = millis(&ve, "timeout_ms", f.TimeoutMS)
	in.Retry = service.RetryPolicy{
		MaxAttempts:    int(wholeNumber(&ve, "retry.max_attempts", f.MaxAttempts)),
		InitialBackoff: millis(&ve, "retry.initial_backoff_ms", f.InitialBackoffMS),
		MaxBackoff:     millis(&ve, "retry.max_backoff_ms", f.MaxBackoffMS),
	}
	in.OverlapPolicy, in.MisfirePolicy, in.AlertEndpointID = f.OverlapPolicy, f.MisfirePolicy, f.AlertEndpointID
	in.PauseAfterFailures = int(wholeNumber(&ve, "pause_after_failures", f.PauseAfterFailures))
	in.Shards = int(wholeNumber(&ve, "shards", f.Shards))
	in.Labels = parseLabels(&ve, f.Labels)
	in.Completion = service.Completion{Mode: f.CompletionMode}
	if f.CompletionMode == service.CompletionCallback {
		in.Completion.Timeout = millis(&ve, "completion.timeout_ms", f.CompletionTimeoutMS)
		in.Completion.HeartbeatTimeout = millis(&ve, "completion.heartbeat_timeout_ms", f.HeartbeatMS)
	}
	in.SLA = service.SLA{FinishWithin: millis(&ve, "sla.finish_within_ms", f.SLAMS)}
	if f.SLAMS != "" && in.SLA.FinishWithin <= 0 {
		ve.Add("sla.finish_within_ms", "must be 1000 to 2592000000, or empty for none")
	}
	return ve.Err()
}

// wholeNumber reads a non-negative whole number; empty is 0 (the field's
// default).
func wholeNumber(ve *service.ValidationError, field, v string) int64 {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		ve.Add(field, "must be a whole number")
		return 0
	}
	return n
}

func millis(ve *service.ValidationError, field, v string) time.Duration {
	return time.Duration(wholeNumber(ve, field, v)) * time.Millisecond
}

func optionalTime(ve *service.ValidationError, field, v string) *time.Time {
	if v == "" {
		return nil
	}
	t := parseLocal(ve, field, v)
	if t.IsZero() {
		return nil
	}
	return &t
}

// parseLabels reads key=value lines (key:value too, as the tasks filter
// takes them); blank lines are ignored.
func parseLabels(ve *service.ValidationError, text string) map[string]string {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := service.ParseLabelFilter(line)
		if !ok || strings.TrimSpace(k) == "" {
			ve.Add("labels", "line "+strconv.Itoa(i+1)+": want key=value")
			continue
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// editTask shows the task form with the task's current values.
func (c *console) editTask(ec echo.Context, s *session) error {
	t, err := c.cfg.Tasks.Get(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return c.taskEditPage(ec, s, http.StatusOK, t, taskEditView{Form: editFormOf(t)})
}

// taskEditPage renders the form v holds, with the lists to choose from and
// the preview of its schedule.
func (c *console) taskEditPage(ec echo.Context, s *session, status int, t service.Task, v taskEditView) error {
	ctx := ec.Request().Context()
	v.Task = t
	v.Locked = !slices.Contains(editableTypes, t.Schedule.Type)
	var err error
	if v.Endpoints, _, err = c.listEndpoints(ec, s); err != nil {
		return err
	}
	if c.cfg.Calendars != nil {
		if v.Calendars, _, err = c.cfg.Calendars.List(ctx, s.Tenant, service.Page{Limit: service.PageLimitMax}); err != nil {
			return err
		}
	}
	if v.Preview == nil && v.PreviewNote == "" {
		var ve service.ValidationError
		sp := t.Schedule
		if !v.Locked {
			sp = v.Form.spec(&ve)
		}
		if err := ve.Err(); err != nil {
			v.PreviewNote = "No preview: the schedule has errors."
		} else if err := c.previewInto(ec, s, t.ID, sp, &v); err != nil {
			return err
		}
	}
	return c.render(ec, status, "task_edit", s, v)
}

// previewInto fills v's preview with the next fires of sp as task id's
// schedule; a schedule the service refuses leaves a note instead.
func (c *console) previewInto(ec echo.Context, s *session, id string, sp schedule.Spec, v *taskEditView) error {
	p, err := c.cfg.Tasks.PreviewSchedule(ec.Request().Context(), s.Tenant, id, sp, editPreviewCount)
	if errors.As(err, new(*service.ValidationError)) {
		v.PreviewNote = "No preview: the schedule has errors."
		return nil
	}
	if err != nil {
		return err
	}
	v.Preview, v.Excluded = previewRows(p), len(p.Excluded)
	v.PreviewNote = previewNote(p)
	return nil
}

// previewNote explains a preview without fires: an event schedule has
// no time slots (each matching event fires it), any other fires no more.
func previewNote(p service.TaskPreview) string {
	switch {
	case len(p.Fires) > 0:
		return ""
	case p.Schedule != nil && p.Schedule.Spec().Type == schedule.Event:
		return eventNote(p.Schedule.Spec().Event)
	}
	return "This schedule fires no more."
}

// eventNote is what an event schedule fires on, as its preview says.
func eventNote(name string) string {
	return "Fires on each matching event \u201c" + name + "\u201d: an event schedule has no time slots."
}

func previewRows(p service.TaskPreview) []previewRow {
	out := make([]previewRow, 0, len(p.Fires))
	for _, at := range p.Fires {
		out = append(out, previewRow{
			At: at.UTC(), Local: at.In(p.Schedule.Location()).Format("2006-01-02 15:04:05 MST"), DST: p.Schedule.DSTNote(at),
		})
	}
	return out
}

// previewResponse is the edit form's live preview, as JSON.
type previewResponse struct {
	Fires    []previewRow `json:"fires"`
	Excluded int          `json:"excluded"`
	Words    string       `json:"words,omitempty"`
	// Note explains an empty preview (an event schedule's).
	Note   string      `json:"note,omitempty"`
	Errors []fieldJSON `json:"errors,omitempty"`
}

// fieldJSON is a refused field as the REST API's problem lists it.
type fieldJSON struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// previewTask answers the edit form's script with the next fires of the
// schedule as typed (query parameters named as the form's fields), from
// the same service call as the page's own preview; nothing is stored.
func (c *console) previewTask(ec echo.Context, s *session) error {
	q := ec.QueryParams()
	f := taskEditForm{
		Type: q.Get("type"), Cron: strings.TrimSpace(q.Get("cron")), Timezone: strings.TrimSpace(q.Get("timezone")),
		Dialect: q.Get("dialect"), DSTPolicy: q.Get("dst_policy"), Interval: strings.TrimSpace(q.Get("interval")),
		RunAt: q.Get("run_at"), StartAt: q.Get("start_at"), EndAt: q.Get("end_at"), ExcludeCalendars: q["exclude_calendars"],
		Event: strings.TrimSpace(q.Get("event")), Members: strings.TrimSpace(q.Get("members")),
	}
	var ve service.ValidationError
	sp := f.spec(&ve)
	err := ve.Err()
	var p service.TaskPreview
	if err == nil {
		p, err = c.cfg.Tasks.PreviewSchedule(ec.Request().Context(), s.Tenant, ec.Param("id"), sp, editPreviewCount)
	}
	var vErr *service.ValidationError
	if errors.As(err, &vErr) {
		out := previewResponse{Fires: []previewRow{}}
		for _, f := range vErr.Fields {
			out.Errors = append(out.Errors, fieldJSON{Field: f.Field, Message: f.Message})
		}
		return ec.JSON(http.StatusUnprocessableEntity, out)
	}
	if err != nil {
		return err
	}
	return ec.JSON(http.StatusOK, previewResponse{
		Fires: previewRows(p), Excluded: len(p.Excluded), Words: describeSchedule(sp), Note: previewNote(p),
	})
}

// updateTask saves the task form (the REST PATCH's service call, every
// field the form shows); "preview" only shows the next fires of the
// schedule as typed. A refusal shows the form again with each reason at
// its field.
func (c *console) updateTask(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	t, err := c.cfg.Tasks.Get(ctx, s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	f, err := readTaskForm(ec)
	if err != nil {
		return err
	}
	locked := !slices.Contains(editableTypes, t.Schedule.Type)
	if ec.FormValue("preview") != "" {
		return c.taskEditPage(ec, s, http.StatusOK, t, taskEditView{Form: f})
	}
	_, err = c.cfg.Tasks.Update(ctx, s.Tenant, t.ID, func(in *service.TaskInput) error { return f.apply(in, locked) })
	var ve *service.ValidationError
	if errors.As(err, &ve) {
		errs, rest := fieldMessages(ve.Fields, taskEditFields)
		return c.taskEditPage(ec, s, http.StatusUnprocessableEntity, t, taskEditView{
			Form: f, Errs: errs,
			Problem: &errorView{Title: "The task was not saved", Detail: "Correct the fields marked below.", Fields: rest},
		})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/tasks/"+url.PathEscape(t.ID)+"?done=saved")
}

// fieldError is the message errs holds for field, as the paragraph its
// input points to (invalidAttrs), or nothing. The word "Error" says it
// without colour.
func fieldError(errs map[string]string, field string) template.HTML {
	msg, ok := errs[field]
	if !ok {
		return ""
	}
	return template.HTML(`<p class="field-error" id="` + errID(field) + `"><strong>Error:</strong> ` + //nolint:gosec // escaped
		html.EscapeString(msg) + `</p>`)
}

// invalidAttrs marks an input whose field errs refuses: invalid, and
// described by its message.
func invalidAttrs(errs map[string]string, field string) template.HTMLAttr {
	if _, ok := errs[field]; !ok {
		return ""
	}
	return template.HTMLAttr(`aria-invalid="true" aria-describedby="` + errID(field) + `"`) //nolint:gosec // errID is [a-z0-9_-]
}

var errIDReplacer = strings.NewReplacer(".", "-", "[", "-", "]", "")

// errID is the id of field's message; fields are the API's names
// (letters, digits, '_', '.', indexes).
func errID(field string) string { return "err-" + errIDReplacer.Replace(field) }
