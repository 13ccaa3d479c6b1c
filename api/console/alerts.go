package console

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
)

// alertsWindow is how far back the alerts page lists executions that
// failed for good.
const alertsWindow = 24 * time.Hour

// alertsLimit bounds each section of the alerts page.
const alertsLimit = 50

// alertsView is what needs attention: SLA misses, executions failed for
// good lately and blocked workflow runs. The workflow sections are shown
// to a session that may read workflows.
type alertsView struct {
	SLAMisses    []service.ExecutionSLAMiss
	RunSLAMisses []service.AlertRun
	Failed       []service.FailedExecution
	Blocked      []service.AlertRun
	Workflows    bool
	Window       time.Duration
	Limit        int
}

func (alertsView) title() (string, string) { return "Alerts", "alerts" }

// alerts lists, newest first, the tenant's SLA misses (executions and
// workflow runs), its executions failed for good in the last alertsWindow
// and its blocked workflow runs.
func (c *console) alerts(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	v := alertsView{Workflows: s.can(api.ScopeWorkflowsRead), Window: alertsWindow, Limit: alertsLimit}
	var err error
	if v.SLAMisses, err = c.cfg.Executions.SLAMisses(ctx, s.Tenant, alertsLimit); err != nil {
		return err
	}
	if v.Failed, err = c.cfg.Executions.FailedSince(ctx, s.Tenant, time.Now().Add(-alertsWindow), alertsLimit); err != nil {
		return err
	}
	if v.Workflows {
		if v.RunSLAMisses, err = c.cfg.Workflows.SLAMissedRuns(ctx, s.Tenant, alertsLimit); err != nil {
			return err
		}
		if v.Blocked, err = c.cfg.Workflows.BlockedRuns(ctx, s.Tenant, alertsLimit); err != nil {
			return err
		}
	}
	return c.render(ec, http.StatusOK, "alerts", s, v)
}
