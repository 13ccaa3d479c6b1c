package console

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/axhq/ax/service"
)

// Charts drawn as inline SVG by the server and rendered by the templates of
// charts.html: the dashboard's executions per step over the last 24 h and
// their firing lateness, and a task's recent executions' lateness and
// outcomes. No script. Colours come from classes of console.css (light and
// dark); shapes and dash patterns tell the series apart too, and every
// chart has a title, a description and its numbers in text or a table
// beside it, so nothing is told by colour alone.

// dashStep is the dashboard chart's step: 96 bars over 24 h.
const dashStep = 15 * time.Minute

// Dashboard chart geometry, in SVG user units.
const (
	chartLeft   = 56  // room for the y-axis labels
	chartRight  = 10  // room for the last x-axis label
	chartTop    = 12  // room for the top y-axis label
	chartPlotH  = 150 // the plot's height
	chartBottom = 24  // room for the x-axis labels
	chartSlot   = 9   // one step's width: a bar and its gap
	chartBarW   = 7
)

// chartView is a laid-out chart of one bar or point per step.
type chartView struct {
	// ID prefixes the ids of the chart's title and description.
	ID, Title, Desc string
	Width, Height   int
	// PlotX, PlotW: the plot's left and width; Top and Base its top and
	// bottom (the zero line).
	PlotX, PlotW, Top, Base int
	YTicks, XTicks          []chartTick
	Bars                    []chartBar
	Lines                   []chartLine
	Dots                    []chartDot
}

// chartTick is an axis label at (TX, TY) with its grid line or tick mark
// from (X1, Y1) to (X2, Y2).
type chartTick struct {
	Label          string
	X1, Y1, X2, Y2 int
	TX, TY         int
}

// chartBar is one step's stacked bar.
type chartBar struct {
	Start string // RFC 3339, UTC
	Title string
	Segs  []chartRect
}

type chartRect struct {
	Class      string
	X, Y, W, H int
}

// chartLine is a series drawn as a path (gaps where a step has no value).
type chartLine struct {
	Class, D string
}

type chartDot struct {
	Class, Title string
	X, Y         int
}

// seriesView is the dashboard's chart of the last 24 h with its summary
// and its table.
type seriesView struct {
	Since, Until time.Time
	Step         string // the step in words, "15 minutes"
	Chart        chartView
	Lateness     chartView
	// HasLateness: some step has a lateness to draw.
	HasLateness bool
	Total       int64
	Succeeded   int64
	Failed      int64
	Other       int64 // unfinished, cancelled or skipped
	PerMinute   float64
	// Busiest is the step with the most executions (nil without any).
	Busiest *seriesRow
	// Rows are the steps with executions, oldest first.
	Rows []seriesRow
}

type seriesRow struct {
	service.StatsBucket
	End   time.Time
	Other int64
}

// layoutSeries draws s: a bar per step, stacked by outcome, and the
// firing lateness p50 and p99 per step.
func layoutSeries(s service.StatsSeries) *seriesView {
	v := &seriesView{Since: s.Since, Until: s.Until, Step: stepWords(s.Step)}
	n := len(s.Buckets)
	var top int64
	var lateTop float64
	busiest := -1
	for _, b := range s.Buckets {
		other := b.Executions - b.Succeeded - b.Failed
		v.Total, v.Succeeded, v.Failed, v.Other = v.Total+b.Executions, v.Succeeded+b.Succeeded, v.Failed+b.Failed, v.Other+other
		if b.Executions == 0 {
			continue
		}
		row := seriesRow{StatsBucket: b, End: b.Start.Add(s.Step), Other: other}
		v.Rows = append(v.Rows, row)
		if b.Executions > top {
			top, busiest = b.Executions, len(v.Rows)-1
		}
		if p := b.FiringLateness.P99; p != nil {
			lateTop = max(lateTop, *p)
			v.HasLateness = true
		}
	}
	if busiest >= 0 {
		v.Busiest = &v.Rows[busiest]
	}
	if minutes := s.Until.Sub(s.Since).Minutes(); minutes > 0 {
		v.PerMinute = float64(v.Total) / minutes
	}

	span := fmt.Sprintf("%s to %s UTC", s.Since.UTC().Format("Jan 2 15:04"), s.Until.UTC().Format("Jan 2 15:04"))
	v.Chart = chartFrame("chart-executions", n, s)
	v.Chart.Title = "Executions per " + v.Step + ", " + span
	v.Chart.Desc = fmt.Sprintf("A bar per %s, stacked: succeeded at the bottom, failed (hatched) above, then unfinished, cancelled or skipped. "+
		"%d executions in all, at most %d in one %s; the table below has each step's numbers.", v.Step, v.Total, top, v.Step)
	yMax := niceCeil(float64(top))
	chartYTicks(&v.Chart, yMax, func(f float64) string {
		if f != math.Trunc(f) {
			return ""
		}
		return strconv.FormatFloat(f, 'f', 0, 64)
	})
	for i, b := range s.Buckets {
		if b.Executions == 0 {
			continue
		}
		x := v.Chart.PlotX + i*chartSlot + (chartSlot-chartBarW)/2
		bar := chartBar{Start: b.Start.UTC().Format(time.RFC3339), Title: stepTitle(b, s.Step)}
		y := v.Chart.Base
		for _, seg := range []struct {
			class string
			n     int64
		}{{"seg-succeeded", b.Succeeded}, {"seg-failed", b.Failed}, {"seg-other", b.Executions - b.Succeeded - b.Failed}} {
			if seg.n <= 0 {
				continue
			}
			h := max(1, int(math.Round(float64(seg.n)/yMax*chartPlotH)))
			y -= h
			bar.Segs = append(bar.Segs, chartRect{Class: seg.class, X: x, Y: y, W: chartBarW, H: h})
		}
		v.Chart.Bars = append(v.Chart.Bars, bar)
	}

	v.Lateness = chartFrame("chart-lateness", n, s)
	v.Lateness.Title = "Firing lateness per " + v.Step + ", p50 and p99, " + span
	v.Lateness.Desc = "How late the on-time scheduled fires of each step started their first attempt (misfire catch-ups excluded): p99 as a solid line with round points, " +
		"p50 as a dashed line with square points; steps without fires are gaps. The table below has each step's numbers."
	lateMax := niceCeil(lateTop)
	chartYTicks(&v.Lateness, lateMax, shortMS)
	for _, q := range []struct {
		class string
		get   func(service.Percentiles) *float64
	}{{"line-p99", func(p service.Percentiles) *float64 { return p.P99 }}, {"line-p50", func(p service.Percentiles) *float64 { return p.P50 }}} {
		var d []byte
		prev := false
		for i, b := range s.Buckets {
			p := q.get(b.FiringLateness)
			if p == nil {
				prev = false
				continue
			}
			x := v.Lateness.PlotX + i*chartSlot + chartSlot/2
			y := v.Lateness.Base - int(math.Round(*p/lateMax*chartPlotH))
			cmd := byte('L')
			if !prev {
				cmd = 'M'
			}
			d = fmt.Appendf(d, "%c%d %d ", cmd, x, y)
			prev = true
			name := "p99"
			if q.class == "line-p50" {
				name = "p50"
			}
			v.Lateness.Dots = append(v.Lateness.Dots, chartDot{
				Class: "dot-" + name, X: x, Y: y,
				Title: fmt.Sprintf("%s UTC: lateness %s %s", b.Start.UTC().Format("15:04"), name, msText(p)),
			})
		}
		if len(d) > 0 {
			v.Lateness.Lines = append(v.Lateness.Lines, chartLine{Class: q.class, D: string(d[:len(d)-1])})
		}
	}
	return v
}

// chartFrame sizes a chart of n steps and labels its x axis every three
// hours (at midnight with the date), in UTC.
func chartFrame(id string, n int, s service.StatsSeries) chartView {
	c := chartView{ID: id, PlotX: chartLeft, PlotW: n * chartSlot, Top: chartTop, Base: chartTop + chartPlotH}
	c.Width = chartLeft + c.PlotW + chartRight
	c.Height = c.Base + chartBottom
	every := 3 * time.Hour
	if s.Until.Sub(s.Since) <= 6*time.Hour {
		every = time.Hour
	}
	for i := 0; i <= n; i++ {
		at := s.Since.Add(time.Duration(i) * s.Step).UTC()
		if at.Sub(at.Truncate(every)) != 0 {
			continue
		}
		label := at.Format("15:04")
		if at.Hour() == 0 && at.Minute() == 0 {
			label = at.Format("Jan 2")
		}
		x := c.PlotX + i*chartSlot
		c.XTicks = append(c.XTicks, chartTick{Label: label, X1: x, Y1: c.Base, X2: x, Y2: c.Base + 4, TX: x, TY: c.Base + 17})
	}
	return c
}

// chartYTicks labels the y axis at 0, half and top (the value of the
// plot's top) with grid lines; a tick whose label is "" is left out.
func chartYTicks(c *chartView, top float64, label func(float64) string) {
	for _, f := range []float64{0, 0.5, 1} {
		l := label(top * f)
		if l == "" {
			continue
		}
		y := c.Base - int(math.Round(f*chartPlotH))
		c.YTicks = append(c.YTicks, chartTick{Label: l, X1: c.PlotX, Y1: y, X2: c.PlotX + c.PlotW, Y2: y, TX: c.PlotX - 6, TY: y + 4})
	}
}

// niceCeil rounds v up to a round axis top: 1, 1.2, 1.5, 2, 2.5, 3, 4,
// 5, 6 or 8 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// shortMS is a duration in milliseconds in few characters, for an axis.
func shortMS(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms >= 1000:
		return strconv.FormatFloat(ms/1000, 'g', 3, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
}

// stepWords is a step in words: "15 minutes", "1 hour".
func stepWords(d time.Duration) string {
	switch {
	case d == time.Minute:
		return "minute"
	case d == time.Hour:
		return "hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	}
	return fmt.Sprintf("%d minutes", d/time.Minute)
}

// stepTitle is a bar's tooltip: its step and numbers.
func stepTitle(b service.StatsBucket, step time.Duration) string {
	t := fmt.Sprintf("%s–%s UTC: %s, %d succeeded, %d failed, %d other", b.Start.UTC().Format("Jan 2 15:04"),
		b.Start.Add(step).UTC().Format("15:04"), plural(b.Executions, "execution"), b.Succeeded, b.Failed, b.Executions-b.Succeeded-b.Failed)
	if b.Late > 0 {
		t += " (" + plural(b.Late, "catch-up") + ")"
	}
	if b.FiringLateness.P50 != nil {
		t += fmt.Sprintf("; lateness p50 %s, p99 %s", msText(b.FiringLateness.P50), msText(b.FiringLateness.P99))
	}
	return t
}

// Task sparklines: one column per recent execution, oldest first, as wide
// as the duration sparkline's bars (8 px and a 2 px gap) so the columns
// line up.
const (
	stripSlot  = 10
	stripMarkW = 8
	stripH     = 40
)

// stripView is a sparkline of a task's recent executions.
type stripView struct {
	ID, Title, Desc string
	Width, Height   int
	Marks           []stripMark
	// Summary is the strip in words, shown beside it.
	Summary string
}

// stripMark is one execution's mark: a rect, or a path when D is set.
type stripMark struct {
	Class, Title string
	X, Y, W, H   int
	D            string
}

// taskStrips draws the lateness and the outcome of xs (newest first, as
// listed) oldest first.
func taskStrips(xs []service.ExecutionDetail) (lateness, outcomes *stripView) {
	if len(xs) == 0 {
		return nil, nil
	}
	lateness = &stripView{
		ID: "spark-lateness", Title: "Firing lateness of the recent executions, oldest first",
		Width: len(xs) * stripSlot, Height: stripH,
	}
	outcomes = &stripView{
		ID: "spark-outcomes", Title: "Outcome of the recent executions, oldest first",
		Width: len(xs) * stripSlot, Height: 14,
	}

	// Lateness: the firing lateness of the on-time scheduled fires, as the
	// dashboard's figures and ax_firing_lateness_seconds measure it
	// (service's Execution.FiringLateness).
	var ms []float64
	var catchUps, none int
	late := func(x service.ExecutionDetail) (float64, bool) {
		d, ok := x.FiringLateness()
		return float64(d) / float64(time.Millisecond), ok
	}
	for _, x := range xs {
		if v, ok := late(x); ok {
			ms = append(ms, v)
		}
	}
	top := 0.0
	for _, v := range ms {
		top = max(top, v)
	}
	for i, x := range slices.Backward(xs) {
		col := (len(xs) - 1 - i) * stripSlot
		when := x.ScheduledFor.UTC().Format("2006-01-02 15:04:05") + " UTC"
		v, ok := late(x)
		switch {
		case ok:
			h := stripH
			if top > 0 {
				h = max(2, int(math.Round(max(v, 0)/top*stripH)))
			}
			lateness.Marks = append(lateness.Marks, stripMark{
				Class: "mark-lateness", X: col, Y: stripH - h, W: stripMarkW, H: h,
				Title: fmt.Sprintf("%s: started %s late", when, msText(&v)),
			})
		case x.Late:
			catchUps++
			lateness.Marks = append(lateness.Marks, stripMark{
				Class: "mark-catchup",
				D:     fmt.Sprintf("M%d %d L%d %d L%d %d Z", col, stripH, col+stripMarkW/2, stripH-10, col+stripMarkW, stripH),
				Title: when + ": a misfire catch-up, run late on purpose (not counted)",
			})
		default:
			none++
			why := "not started yet"
			if x.Trigger != "schedule" {
				why = "run by trigger " + x.Trigger + ", no slot to be late for"
			}
			lateness.Marks = append(lateness.Marks, stripMark{
				Class: "mark-none", X: col, Y: stripH - 2, W: stripMarkW, H: 2,
				Title: when + ": " + why,
			})
		}
	}
	p50, p99 := percentile(ms, 0.5), percentile(ms, 0.99)
	if len(ms) > 0 {
		lateness.Summary = fmt.Sprintf("Lateness of the %d on-time scheduled fire(s): p50 %s, p99 %s, max %s.", len(ms), msText(p50), msText(p99), msText(&top))
	} else {
		lateness.Summary = "No on-time scheduled fire among them has started."
	}
	if catchUps > 0 {
		lateness.Summary += fmt.Sprintf(" %d misfire catch-up(s), marked ▲, are not counted.", catchUps)
	}
	if none > 0 {
		lateness.Summary += fmt.Sprintf(" %d run(s) without a lateness (manual, backfill or not started) are marked with a line.", none)
	}
	lateness.Desc = "A bar per execution, as tall as it started late relative to the latest; a triangle for a misfire catch-up; " +
		"a line at the bottom for a run without a lateness. " + lateness.Summary

	// Outcomes: a filled square succeeded, a cross failed, a hollow
	// square unfinished, a dash cancelled or skipped.
	var ok, failed, open, other int
	for i, x := range slices.Backward(xs) {
		col := (len(xs) - 1 - i) * stripSlot
		m := stripMark{Title: fmt.Sprintf("%s UTC: %s", x.ScheduledFor.UTC().Format("2006-01-02 15:04:05"), x.State)}
		switch x.State {
		case service.ExecSucceeded:
			ok++
			m.Class, m.X, m.Y, m.W, m.H = "mark-succeeded", col, 3, stripMarkW, stripMarkW
		case service.ExecFailed:
			failed++
			m.Class = "mark-failed"
			m.D = fmt.Sprintf("M%d 3 L%d 11 M%d 3 L%d 11", col+1, col+stripMarkW-1, col+stripMarkW-1, col+1)
		case service.ExecPending, service.ExecRunning, service.ExecRetrying:
			open++
			m.Class, m.X, m.Y, m.W, m.H = "mark-open", col+1, 4, stripMarkW-2, stripMarkW-2
		default:
			other++
			m.Class, m.X, m.Y, m.W, m.H = "mark-other", col, 6, stripMarkW, 2
		}
		outcomes.Marks = append(outcomes.Marks, m)
	}
	if done := ok + failed; done > 0 {
		rate := float64(ok) / float64(done)
		outcomes.Summary = fmt.Sprintf("%d of %d finished succeeded (%s), %d failed", ok, done, pct(&rate), failed)
	} else {
		outcomes.Summary = "None finished with success or failure yet"
	}
	outcomes.Summary = "Outcomes: " + outcomes.Summary + fmt.Sprintf("; %d unfinished, %d cancelled or skipped; the newest %s.", open, other, xs[0].State)
	outcomes.Desc = "A mark per execution: a filled square succeeded, a cross failed, a hollow square unfinished, a dash cancelled or skipped. " +
		outcomes.Summary
	return lateness, outcomes
}

// percentile is the q-th percentile of vs, interpolated as Postgres's
// percentile_cont does; nil without values.
func percentile(vs []float64, q float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	v := s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
	v = math.Round(v*10) / 10
	return &v
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}
