package console_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addChartExecution inserts an execution of tenant's task created (and
// scheduled) at at, started lateMS after it (-1: never started), as a
// delivery would have left it.
func (e *env) addChartExecution(tenant, task string, at time.Time, trigger, state string, late bool, lateMS int) {
	e.t.Helper()
	var started *time.Time
	if lateMS >= 0 {
		s := at.Add(time.Duration(lateMS) * time.Millisecond)
		started = &s
	}
	_, err := e.pool.Exec(e.t.Context(), `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, late, attempts,
			created_at, started_at, first_started_at, finished_at, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $4, $8, $8, $8, CASE WHEN $6 IN ('failed', 'cancelled') THEN 'HTTP 500' END)`,
		tenant, uuid.Must(uuid.NewV7()).String(), task, at, trigger, state, late, started)
	require.NoError(e.t, err)
}

// TestConsoleDashboardChart: the dashboard charts the last 24 h in 96
// 15-minute steps, a bar for each step with executions, with the same
// numbers in words and in a table; the lateness chart has a point per
// step and percentile; another tenant's executions are not counted.
func TestConsoleDashboardChart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")

	p := e.get("/console/dashboard", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="chart-executions"`, "an empty chart still has its axes")
	assert.Equal(t, 0, strings.Count(p.Body, `<g class="chart-bar"`))
	assert.Contains(t, p.Body, "No executions in the last 24 hours")
	assert.NotContains(t, p.Body, `id="chart-lateness"`)

	_, err := e.pool.Exec(t.Context(), `INSERT INTO tenants (id) VALUES ('acme'), ('other') ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	base := time.Now()
	e.addChartExecution("acme", uuid.NewString(), base.Add(-3*time.Hour), "schedule", "succeeded", false, 100)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-3*time.Hour), "schedule", "succeeded", false, 300)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-3*time.Hour), "schedule", "failed", false, 200)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-5*time.Hour), "schedule", "succeeded", false, 50)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-5*time.Hour), "schedule", "cancelled", false, -1)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-10*time.Hour), "manual", "succeeded", false, 5)
	e.addChartExecution("acme", uuid.NewString(), base.Add(-30*time.Hour), "schedule", "succeeded", false, 5) // before the window
	for range 4 {
		e.addChartExecution("other", uuid.NewString(), base.Add(-3*time.Hour), "schedule", "failed", false, 5)
	}

	p = e.get("/console/dashboard", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body := p.Body
	assertSecurityHeaders(t, p)
	assert.NotRegexp(t, `style="|\son[a-z]+="`, body, "no inline style or handler")
	// The chart: 96 steps wide, a bar per step with executions, stacked.
	svg := regexp.MustCompile(`(?s)<svg[^>]*id="chart-executions".*?</svg>`).FindString(body)
	require.NotEmpty(t, svg, body)
	assert.Contains(t, svg, `width="`+strconv.Itoa(56+96*9+10)+`"`, "96 steps of 9 units and the margins")
	assert.Contains(t, svg, `aria-labelledby="chart-executions-title chart-executions-desc"`)
	assert.Contains(t, svg, "<title id=\"chart-executions-title\">Executions per 15 minutes, ")
	assert.Contains(t, svg, "6 executions in all, at most 3 in one 15 minutes")
	assert.Equal(t, 3, strings.Count(svg, `<g class="chart-bar"`), svg)
	assert.Equal(t, 3, strings.Count(svg, `class="seg-succeeded"`), "each bar has a succeeded part: %s", svg)
	assert.Equal(t, 1, strings.Count(svg, `class="seg-failed"`))
	assert.Equal(t, 1, strings.Count(svg, `class="seg-other"`))
	assert.Contains(t, svg, ": 3 executions, 2 succeeded, 1 failed, 0 other; lateness p50 200.0 ms, p99 298.0 ms</title>")
	assert.Regexp(t, `<text class="chart-label chart-x" [^>]*>(\d\d:00|[A-Z][a-z]{2} \d+)</text>`, svg, "UTC times on the x axis")
	// The y axis tops at 3, labelled 0 and 3 (1.5 is no count).
	assert.Contains(t, svg, `>0</text>`)
	assert.Contains(t, svg, `>3</text>`)
	assert.NotContains(t, svg, `>1.5</text>`)
	assert.Contains(t, svg, `<rect class="seg-failed" x="`, "the failed part")
	assert.Contains(t, svg, `width="7" height="50"/></g>`, "a count of 1 is a third of the 150-unit plot")

	// In words, and as a table.
	assert.Contains(t, body, `<strong id="series-total">6</strong>`)
	assert.Contains(t, body, `<span id="series-succeeded">4</span> succeeded`)
	assert.Contains(t, body, `<span id="series-failed">1</span> failed`)
	assert.Contains(t, body, `<span id="series-other">1</span> unfinished, cancelled or skipped`)
	assert.Contains(t, body, `with <span id="series-busiest">3</span>`)
	table := regexp.MustCompile(`(?s)<table id="series-table">.*?</table>`).FindString(body)
	assert.Equal(t, 3, strings.Count(table, "<tr><td>"), table)
	assert.Contains(t, table, "<td>3</td><td>2</td><td>1</td><td>0</td><td>66.7%</td><td>200.0 ms</td><td>298.0 ms</td>")

	// The lateness chart: p50 and p99 of the two steps with fires.
	late := regexp.MustCompile(`(?s)<svg[^>]*id="chart-lateness".*?</svg>`).FindString(body)
	require.NotEmpty(t, late)
	assert.Equal(t, 2, strings.Count(late, `class="chart-dot dot-p99"`))
	assert.Equal(t, 2, strings.Count(late, `class="chart-dot dot-p50"`))
	assert.Contains(t, late, `class="chart-line line-p99"`)
	assert.Contains(t, late, `class="chart-line line-p50"`)
	assert.Contains(t, late, "lateness p99 298.0 ms</title>")
}

// TestConsoleTaskSparklines: a task's page draws the lateness of its
// recent on-time fires (a catch-up marked apart, runs without a slot
// marked as such) and a mark per outcome, with the same in words.
func TestConsoleTaskSparklines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	task := e.createTask(tok, "hourly", ep, "0 * * * *", "UTC")

	p := e.get("/console/tasks/"+task, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, `id="spark-lateness"`, "no executions, no sparkline")

	base := time.Now().Truncate(time.Hour)
	at := func(h int) time.Time { return base.Add(time.Duration(h-10) * time.Hour) }
	e.addChartExecution("acme", task, at(1), "schedule", "succeeded", false, 100)
	e.addChartExecution("acme", task, at(2), "schedule", "failed", false, 300)
	e.addChartExecution("acme", task, at(3), "schedule", "succeeded", true, 60_000)
	e.addChartExecution("acme", task, at(4), "manual", "succeeded", false, 5)
	e.addChartExecution("acme", task, at(5), "schedule", "succeeded", false, 200)
	e.addChartExecution("acme", task, at(6), "schedule", "cancelled", false, -1)

	p = e.get("/console/tasks/"+task, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.NotRegexp(t, `style="|\son[a-z]+="`, p.Body, "no inline style or handler")
	lat := regexp.MustCompile(`(?s)<figure class="strip" id="spark-lateness">.*?</figure>`).FindString(p.Body)
	require.NotEmpty(t, lat, p.Body)
	assert.Contains(t, lat, `width="60"`, "six columns of 10")
	assert.Contains(t, lat, `aria-labelledby="spark-lateness-title spark-lateness-desc"`)
	assert.Equal(t, 3, strings.Count(lat, `class="strip-mark mark-lateness"`), lat)
	assert.Equal(t, 1, strings.Count(lat, `class="strip-mark mark-catchup"`))
	assert.Equal(t, 2, strings.Count(lat, `class="strip-mark mark-none"`))
	assert.Contains(t, lat, "started 300.0 ms late</title>")
	assert.Contains(t, lat, `<rect x="10" y="0" width="8" height="40"/>`, "the latest on-time fire is the full height")
	assert.Contains(t, lat, "run by trigger manual, no slot to be late for")
	assert.Contains(t, lat, "Lateness of the 3 on-time scheduled fire(s): p50 200.0 ms, p99 298.0 ms, max 300.0 ms. 1 misfire catch-up(s), marked ▲, are not counted.")

	out := regexp.MustCompile(`(?s)<figure class="strip" id="spark-outcomes">.*?</figure>`).FindString(p.Body)
	require.NotEmpty(t, out)
	assert.Equal(t, 4, strings.Count(out, `class="strip-mark mark-succeeded"`))
	assert.Equal(t, 1, strings.Count(out, `class="strip-mark mark-failed"`))
	assert.Equal(t, 1, strings.Count(out, `class="strip-mark mark-other"`))
	assert.Contains(t, out, "Outcomes: 4 of 5 finished succeeded (80.0%), 1 failed; 0 unfinished, 1 cancelled or skipped; the newest cancelled.")
	// The task's success rate agrees.
	assert.Contains(t, p.Body, "<dt>Success rate</dt><dd>80.0%")

	// A read-only session without executions:read sees neither.
	p = e.get("/console/tasks/"+task, token(t, "acme", "tasks:read"))
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, `spark-lateness`)
}
