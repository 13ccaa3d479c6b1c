package console

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// taskFlashes are the task page's messages after a change (?done=…).
var taskFlashes = map[string]string{
	"slot-skipped": "The slot is skipped: it will not fire.",
	"saved":        "The task is saved.",
}

// backfillFlashes are the backfills page's messages (?done=…).
var backfillFlashes = map[string]string{
	"backfill-started": "The backfill is started: its slots are run oldest first, a few at a time.",
}

// backfillLocal is the layout of a datetime-local field; the console reads
// it as UTC (the page says so).
const backfillLocal = "2006-01-02T15:04"

// backfillForm is the backfill form's values, as typed.
type backfillForm struct {
	From, To, Rerun, MaxConcurrency string
}

func defaultBackfillForm() backfillForm {
	return backfillForm{Rerun: service.RerunMissing, MaxConcurrency: strconv.Itoa(service.BackfillConcurrencyDefault)}
}

// backfillFormView is the backfill form with its outcome: a refusal, or a
// dry run's plan.
type backfillFormView struct {
	Form  backfillForm
	Error *errorView
	Plan  *backfillPlanView
}

// backfillPlanView counts a dry run's slots by action.
type backfillPlanView struct {
	Total, Create, Rerun, Keep int
	First, Last                time.Time
}

// skipSlot skips one of the next fires (the REST skip endpoint's service
// call) and goes back to the task page with a flash, or shows the refusal
// there.
func (c *console) skipSlot(ec echo.Context, s *session) error {
	id := ec.Param("id")
	var ve service.ValidationError
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(ec.FormValue("scheduled_for")))
	if err != nil {
		ve.Add("scheduled_for", "must be an RFC 3339 time")
	}
	err = ve.Err()
	if err == nil {
		_, err = c.cfg.Executions.Skip(ec.Request().Context(), s.Tenant, id, at)
	}
	if err != nil {
		status := http.StatusConflict
		if errors.As(err, new(*service.ValidationError)) {
			status = http.StatusUnprocessableEntity
		}
		p, err := conflictView(err)
		if err != nil {
			return err
		}
		p.Title = "The slot was not skipped"
		return c.taskPage(ec, s, status, id, taskView{Problem: p})
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/tasks/"+id+"?done=slot-skipped")
}

// backfillTask plans or starts a backfill of the task from the form (the
// REST backfill endpoint's service call): "dry_run" shows the plan on the
// task page; otherwise the backfill starts and the backfills page opens.
// A refusal (invalid range, more than service.BackfillSlotsMax slots) is
// shown on the task page with the form as typed.
func (c *console) backfillTask(ec echo.Context, s *session) error {
	id := ec.Param("id")
	return c.backfill(ec, s, c.cfg.Backfills.Create, Prefix+"/backfills?done=backfill-started",
		func(status int, bv backfillFormView) error {
			return c.taskPage(ec, s, status, id, taskView{Backfill: bv})
		})
}

// backfill reads the backfill form and calls create (the service call of
// the REST backfill endpoint of the task or workflow the path names): a
// dry run or a refusal is shown by show, with the form as typed (the plan's
// counts, or the reasons: 422 for invalid input, 409 for a conflict);
// a started backfill redirects to started.
func (c *console) backfill(ec echo.Context, s *session,
	create func(ctx context.Context, tenant, id string, in service.BackfillInput) (service.Backfill, []service.BackfillSlot, error),
	started string, show func(status int, v backfillFormView) error,
) error {
	f := backfillForm{
		From: strings.TrimSpace(ec.FormValue("from")), To: strings.TrimSpace(ec.FormValue("to")),
		Rerun: ec.FormValue("rerun"), MaxConcurrency: strings.TrimSpace(ec.FormValue("max_concurrency")),
	}
	in := service.BackfillInput{Rerun: f.Rerun, DryRun: ec.FormValue("dry_run") != ""}
	var ve service.ValidationError
	in.From = parseLocal(&ve, "from", f.From)
	in.To = parseLocal(&ve, "to", f.To)
	if f.MaxConcurrency != "" {
		n, err := strconv.Atoi(f.MaxConcurrency)
		if err != nil || n < 1 {
			ve.Add("max_concurrency", "must be a whole number, 1 to "+strconv.Itoa(service.BackfillConcurrencyMax))
		}
		in.MaxConcurrency = n
	}
	err := ve.Err()
	var plan []service.BackfillSlot
	if err == nil {
		_, plan, err = create(ec.Request().Context(), s.Tenant, ec.Param("id"), in)
	}
	var vErr *service.ValidationError
	switch {
	case errors.As(err, &vErr):
		return show(http.StatusUnprocessableEntity, backfillFormView{
			Form:  f,
			Error: &errorView{Title: "The backfill was not started", Fields: vErr.Fields},
		})
	case errors.Is(err, service.ErrConflict):
		return show(http.StatusConflict, backfillFormView{
			Form:  f,
			Error: &errorView{Title: "The backfill was not started", Detail: err.Error()},
		})
	case err != nil:
		return err
	}
	if in.DryRun {
		return show(http.StatusOK, backfillFormView{Form: f, Plan: planView(plan)})
	}
	return ec.Redirect(http.StatusSeeOther, started)
}

// planView counts a dry run's slots by action.
func planView(plan []service.BackfillSlot) *backfillPlanView {
	pv := &backfillPlanView{Total: len(plan)}
	for i, sl := range plan {
		switch sl.Action {
		case service.SlotCreate:
			pv.Create++
		case service.SlotRerun:
			pv.Rerun++
		case service.SlotKeep:
			pv.Keep++
		}
		if i == 0 {
			pv.First = sl.ScheduledFor
		}
		pv.Last = sl.ScheduledFor
	}
	return pv
}

// parseLocal reads a datetime-local value (seconds optional) as UTC; an
// RFC 3339 time is accepted too. Empty is the zero time (the service says
// it is required).
func parseLocal(ve *service.ValidationError, field, v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	for _, layout := range []string{backfillLocal, backfillLocal + ":05", time.RFC3339Nano} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC()
		}
	}
	ve.Add(field, "must be a date and time, YYYY-MM-DDTHH:MM (UTC)")
	return time.Time{}
}

// testEndpoint sends an endpoint one signed test request now, with the
// body {} (the REST test endpoint's service call), and shows what came
// back on the endpoints page: status, duration and the response's excerpt.
func (c *console) testEndpoint(ec echo.Context, s *session) error {
	if c.cfg.EndpointProbe == nil {
		return c.endpointsPage(ec, s, http.StatusServiceUnavailable, endpointsView{
			Error: &errorView{Title: "No test was sent", Detail: "this server sends no test requests"},
		})
	}
	ctx := ec.Request().Context()
	ep, err := c.cfg.Endpoints.Get(ctx, s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	res, err := c.cfg.Endpoints.Test(ctx, s.Tenant, ep.ID, nil, c.cfg.EndpointProbe)
	if err != nil {
		return err
	}
	return c.endpointsPage(ec, s, http.StatusOK, endpointsView{Tested: &endpointTestView{Endpoint: ep, Result: res}})
}

// holdExecution holds a pending execution (the REST hold endpoint's
// service call) and goes back to the page the form names (the task's
// executions list), else to the execution.
func (c *console) holdExecution(ec echo.Context, s *session) error {
	x, err := c.cfg.Executions.Hold(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return back(ec, Prefix+"/executions/"+x.ID)
}

// releaseExecution releases a held execution (the REST release endpoint's
// service call), then goes back as holdExecution does.
func (c *console) releaseExecution(ec echo.Context, s *session) error {
	x, err := c.cfg.Executions.Release(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return back(ec, Prefix+"/executions/"+x.ID)
}
