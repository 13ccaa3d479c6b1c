package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is the whole run, as printed and as written with -json.
type report struct {
	StartedAt  time.Time         `json:"started_at"`
	FinishedAt time.Time         `json:"finished_at"`
	Host       map[string]string `json:"host"`
	AxEnv      map[string]string `json:"ax_env"`
	Results    []result          `json:"results"`
}

// result is one scenario's figures. Durations are milliseconds.
type result struct {
	Scenario        string  `json:"scenario"`
	Tasks           int     `json:"tasks,omitempty"`
	IntervalSeconds int     `json:"interval_seconds,omitempty"`
	Staggered       *bool   `json:"staggered,omitempty"`
	FiresPerSecond  float64 `json:"fires_per_second,omitempty"` // offered load
	WindowSeconds   float64 `json:"window_seconds,omitempty"`

	CreateSeconds   float64 `json:"create_seconds,omitempty"`
	CreatePerSecond float64 `json:"create_per_second,omitempty"`

	// Expected is how many slots should have been delivered (in the window,
	// or all one-shot tasks); Delivered how many distinct slots were.
	Expected  int `json:"expected"`
	Delivered int `json:"delivered"`
	// DeliveriesPerSecond is throughput: precision, requests (for any slot)
	// that arrived during the window; burst, deliveries between the first
	// and the last.
	DeliveriesPerSecond float64 `json:"deliveries_per_second,omitempty"`
	// Lateness is arrival at the receiver − X-Ax-Scheduled-For, first
	// delivery of each slot.
	Lateness        *latencyStats `json:"lateness_ms,omitempty"`
	FirstDeliveryMS *float64      `json:"first_delivery_ms,omitempty"` // burst: after the instant
	LastDeliveryMS  *float64      `json:"last_delivery_ms,omitempty"`  // burst: after the instant
	WithinTarget    int           `json:"within_3s,omitempty"`         // burst

	Duplicates     int      `json:"duplicates"`      // requests repeating an execution id already seen
	DuplicateSlots int      `json:"duplicate_slots"` // slots delivered under two execution ids
	Retries        int      `json:"retries"`         // requests with X-Ax-Attempt > 1
	Missing        int      `json:"missing"`         // expected slots never received (within the grace)
	Early          int      `json:"early"`           // slots received before their time
	Errors         int      `json:"errors"`          // failed creations, malformed or unattributable webhooks
	ErrorSamples   []string `json:"error_samples,omitempty"`

	// Trend: precision, lateness by slot time in TrendSeconds buckets from the
	// window's start (a growing p50 is a backlog); burst, deliveries per
	// 0.5 s after the instant.
	Trend []trendPoint `json:"trend,omitempty"`
	// TrendSeconds: precision, the width of Trend's buckets (-trend).
	TrendSeconds float64 `json:"trend_s,omitempty"`
	// WindowStart: precision, when the window began (to match logs).
	WindowStart *time.Time `json:"window_start,omitempty"`
	// Windows: burst, the delivery rate in 5 s windows after the instant
	// (windowRates); a window far below the first is a cliff.
	Windows []windowRate `json:"windows,omitempty"`

	// Stages break the latency down (ms after the slot): materialised,
	// fetched, started, finished from the database, delivered from the
	// receiver.
	Stages []stage `json:"stages_ms,omitempty"`

	ReceiverConnections int64 `json:"receiver_connections,omitempty"`

	AxCPUPercent  *float64 `json:"ax_cpu_percent,omitempty"` // of one core
	AxRSSMiB      *float64 `json:"ax_rss_mib,omitempty"`
	PGCPUPercent  *float64 `json:"postgres_cpu_percent,omitempty"` // of one core
	PGXactsPerSec *float64 `json:"postgres_transactions_per_second,omitempty"`
	PGStmtsPerSec *float64 `json:"postgres_statements_per_second,omitempty"`
	// BenchCPUPercent is this command's own (load generation, receiver);
	// OtherCPUPercent everything else on the machine: anything well above
	// zero means another workload shared the CPUs and the figures are off.
	BenchCPUPercent *float64 `json:"bench_cpu_percent,omitempty"`
	OtherCPUPercent *float64 `json:"other_cpu_percent,omitempty"`
	// AxCPUPerDeliveryUS, PGCPUPerDeliveryUS and BenchCPUPerDeliveryUS
	// are ax's, PostgreSQL's and this command's CPU time over the window
	// per request delivered in it, in µs (precision-like rows and bursts):
	// a cost that a busy machine changes less than latencies and rates.
	// The bench's is mostly its receiver's, which shares the cores with ax.
	AxCPUPerDeliveryUS    *float64 `json:"ax_cpu_per_delivery_us,omitempty"`
	PGCPUPerDeliveryUS    *float64 `json:"postgres_cpu_per_delivery_us,omitempty"`
	BenchCPUPerDeliveryUS *float64 `json:"bench_cpu_per_delivery_us,omitempty"`
	// cpuSeconds: ax's, PostgreSQL's and the bench's CPU time over the
	// window (setCPU).
	cpuSeconds struct{ ax, pg, bench float64 }
	// FsyncPerSecond is the disk's 8 kB write+fdatasync rate measured just
	// before the scenario: the floor under every durable commit.
	FsyncPerSecond float64 `json:"disk_fsync_per_second,omitempty"`
	// LoopbackPerSecond is one client's HTTP requests per second to a
	// server on loopback, measured just before the scenario: the machine's
	// speed for the work a delivery is made of, which varies on shared
	// virtual machines. Compare runs at similar values.
	LoopbackPerSecond float64 `json:"loopback_http_per_second,omitempty"`

	// IdleBaseline is idle-waits' window without the waiting runs (the
	// figures above are with them).
	IdleBaseline *idleCost `json:"idle_baseline,omitempty"`

	API           []apiStats   `json:"api,omitempty"`
	JobsPerSecond float64      `json:"jobs_per_second,omitempty"` // ceiling: the best configuration
	Ceiling       []ceilingRun `json:"ceiling,omitempty"`
	// Limit: maxconc and ratelimit, what the receiver saw of the limit.
	Limit *limitStats `json:"limit,omitempty"`

	Target        string      `json:"target,omitempty"`
	Pass          *bool       `json:"pass,omitempty"`
	Notes         []string    `json:"notes,omitempty"`
	TopStatements []statement `json:"top_statements,omitempty"`
	Tables        []tableStat `json:"tables,omitempty"`
	WAL           *walStat    `json:"wal,omitempty"`
	Waits         []waitEvent `json:"waits,omitempty"`
	Failure       string      `json:"failure,omitempty"`
}

// trendPoint is one bucket of a trend.
type trendPoint struct {
	From float64 `json:"from_s"`
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms,omitempty"`
	P99  float64 `json:"p99_ms,omitempty"`
}

// windowRate is a burst's deliveries in one window after the instant.
type windowRate struct {
	From      float64 `json:"from_s"`
	N         int     `json:"n"`
	PerSecond float64 `json:"per_second"`
}

// latencyStats summarises durations in milliseconds.
type latencyStats struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

func summarize(ds []time.Duration) *latencyStats {
	if len(ds) == 0 {
		return nil
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	// Nearest rank: the smallest value with at least p of the samples at
	// or below it.
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return *ms(s[min(max(i, 0), len(s)-1)])
	}
	return &latencyStats{
		N: len(s), Min: *ms(s[0]), Mean: *ms(sum / time.Duration(len(s))),
		P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: *ms(s[len(s)-1]),
	}
}

// ms is d in milliseconds, rounded to 0.1 ms.
func ms(d time.Duration) *float64 {
	v := math.Round(float64(d)/float64(time.Millisecond)*10) / 10
	return &v
}

func (r *result) setCreation(c createResult) {
	r.CreateSeconds = math.Round(c.elapsed.Seconds()*100) / 100
	r.CreatePerSecond = math.Round(c.perSec())
	r.Errors += c.errors
	r.ErrorSamples = append(r.ErrorSamples, c.samples...)
}

func (r *result) setCPU(a, b cpuSample) {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return
	}
	if a.ax >= 0 && b.ax >= 0 {
		r.AxCPUPercent = pct(float64(b.ax-a.ax) / clockTicks / secs)
		r.cpuSeconds.ax = float64(b.ax-a.ax) / clockTicks
	}
	if a.pg >= 0 && b.pg >= 0 {
		r.PGCPUPercent = pct(float64(b.pg-a.pg) / clockTicks / secs)
		r.cpuSeconds.pg = float64(b.pg-a.pg) / clockTicks
	}
	if a.self >= 0 && b.self >= 0 {
		r.BenchCPUPercent = pct(float64(b.self-a.self) / clockTicks / secs)
		r.cpuSeconds.bench = float64(b.self-a.self) / clockTicks
	}
	if a.busy >= 0 && b.busy >= 0 && a.ax >= 0 && b.ax >= 0 && a.pg >= 0 && b.pg >= 0 {
		other := float64((b.busy-a.busy)-(b.ax-a.ax)-(b.pg-a.pg)-(b.self-a.self)) / clockTicks / secs
		r.OtherCPUPercent = pct(max(other, 0))
		if *r.OtherCPUPercent >= 15 {
			r.Notes = append(r.Notes, fmt.Sprintf("other processes used %.0f%% of a CPU during the measurement: "+
				"the machine was shared, so these figures understate ax", *r.OtherCPUPercent))
		}
	}
	if b.rssKiB > 0 {
		v := math.Round(float64(b.rssKiB)/1024*10) / 10
		r.AxRSSMiB = &v
	}
}

// setCPUPerDelivery sets the CPU time per delivery from setCPU's window,
// in which n requests were delivered.
func (r *result) setCPUPerDelivery(n int) {
	if n <= 0 {
		return
	}
	if r.AxCPUPercent != nil {
		v := math.Round(r.cpuSeconds.ax / float64(n) * 1e6)
		r.AxCPUPerDeliveryUS = &v
	}
	if r.PGCPUPercent != nil {
		v := math.Round(r.cpuSeconds.pg / float64(n) * 1e6)
		r.PGCPUPerDeliveryUS = &v
	}
	if r.BenchCPUPercent != nil {
		v := math.Round(r.cpuSeconds.bench / float64(n) * 1e6)
		r.BenchCPUPerDeliveryUS = &v
	}
}

func pct(f float64) *float64 {
	v := math.Round(f*1000) / 10
	return &v
}

func (rep *report) writeJSON(path string) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // an output directory
			return err
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644) //nolint:gosec // a report, not a secret
}

// print writes the human-readable tables.
func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nax benchmark — %s, %s CPUs, PostgreSQL %s (fsync=%s, synchronous_commit=%s), %s\n",
		rep.Host["ax"], rep.Host["cpus"], rep.Host["postgres"], rep.Host["postgres_fsync"],
		rep.Host["postgres_synchronous_commit"], rep.StartedAt.Format(time.RFC3339))
	if v := rep.Host["source"]; v != "" {
		fmt.Fprintf(w, "ax built from: %s\n", v)
	}
	if v := rep.Host["receiver"]; v != "" {
		fmt.Fprintf(w, "webhook receiver: %s server on 127.0.0.1\n", v)
	}
	if v := rep.Host["label"]; v != "" {
		fmt.Fprintf(w, "label: %s\n", v)
	}
	if v := rep.Host["postgres_settings"]; v != "" {
		fmt.Fprintf(w, "postgres settings: %s\n", v)
	}
	if extra := tuning(rep.AxEnv); extra != "" {
		fmt.Fprintf(w, "ax tuning: %s\n", extra)
	}

	var deliveries, others []result
	for _, r := range rep.Results {
		if deliveryScenario(r.Scenario) {
			deliveries = append(deliveries, r)
		} else {
			others = append(others, r)
		}
	}
	if len(deliveries) > 0 {
		fmt.Fprintln(w, "\nfiring lateness = arrival at the receiver − X-Ax-Scheduled-For (ms), first delivery of each slot")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tN\tload\tcreate/s\texpected\tdelivered\tdeliv/s\tp50\tp90\tp99\tmax\tlast\tdup\tdup-slot\tmissing\tretries\terrors\ttarget\t")
		for _, r := range deliveries {
			load := "-"
			if r.FiresPerSecond > 0 {
				load = fmt.Sprintf("%.0f/s", r.FiresPerSecond)
			} else if burstScenario(r.Scenario) {
				load = "1 instant"
			}
			p50, p90, p99, mx := "-", "-", "-", "-"
			if l := r.Lateness; l != nil {
				p50, p90, p99, mx = f1(l.P50), f1(l.P90), f1(l.P99), f1(l.Max)
			}
			last := "-"
			if r.LastDeliveryMS != nil {
				last = f1(*r.LastDeliveryMS)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
				r.Scenario, r.Tasks, load, r.CreatePerSecond, r.Expected, r.Delivered, r.DeliveriesPerSecond,
				p50, p90, p99, mx, last, r.Duplicates, r.DuplicateSlots, r.Missing, r.Retries, r.Errors, verdict(r))
		}
		_ = tw.Flush()
		for _, r := range deliveries {
			rep.details(w, r)
		}
	}
	for _, r := range others {
		fmt.Fprintf(w, "\n%s:", r.Scenario)
		switch r.Scenario {
		case "idle":
			fmt.Fprintf(w, " %d tasks, none due for an hour; over %.0f s:", r.Tasks, r.WindowSeconds)
			fmt.Fprintf(w, " ax CPU %s%%, ax RSS %s MiB, postgres CPU %s%%, postgres %s transactions/s",
				fp(r.AxCPUPercent), fp(r.AxRSSMiB), fp(r.PGCPUPercent), fp(r.PGXactsPerSec))
			if r.PGStmtsPerSec != nil {
				fmt.Fprintf(w, ", %s statements/s", fp(r.PGStmtsPerSec))
			}
			fmt.Fprintf(w, " (other processes: %s%% of a CPU)\n", fp(r.OtherCPUPercent))
		case "idle-waits":
			fmt.Fprintf(w, " %d workflow runs waiting on events; over %.0f s: %s: %s\n", r.Tasks, r.WindowSeconds, costOf(&r), verdict(r))
		case "api", "callbacks": // callbacks: complete-to-succeeded, as a request's latency
			fmt.Fprintln(w)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "request\tconcurrency\trequests\treq/s\tp50 ms\tp99 ms\tmax ms\terrors\t")
			for _, a := range r.API {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%d\t\n", a.Name, a.Concurrency, a.Requests, a.PerSecond,
					f1(a.Latency.P50), f1(a.Latency.P99), f1(a.Latency.Max), a.Errors)
			}
			_ = tw.Flush()
		case "ceiling":
			fmt.Fprintf(w, " River alone (no ax), %d no-op jobs per configuration on this cluster\n", r.Tasks)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "configuration\tworkers\tfetch cooldown\tfetch poll\tcompleted\tseconds\tjobs/s\t")
			for _, c := range r.Ceiling {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%.1f\t%.0f\t\n", c.Label, c.Workers, c.FetchCooldown, c.FetchPollInterval,
					c.Completed, c.Seconds, c.JobsPerSecond)
			}
			_ = tw.Flush()
		case "maxconc", "ratelimit":
			printLimit(w, r)
		default:
			fmt.Fprintln(w)
		}
		rep.details(w, r)
	}
	rep.againstCeiling(w)
}

// againstCeiling prints ax's delivery rates as a fraction of River's best
// no-op rate in the same run (a delivery is a webhook sent and two rows
// written; a no-op job is nothing but River's own work).
func (rep *report) againstCeiling(w io.Writer) {
	var ceiling float64
	for _, r := range rep.Results {
		if r.Scenario == "ceiling" {
			ceiling = r.JobsPerSecond
		}
	}
	if ceiling <= 0 {
		return
	}
	for _, r := range rep.Results {
		if deliveryScenario(r.Scenario) && r.DeliveriesPerSecond > 0 {
			fmt.Fprintf(w, "\n%s: %.0f deliveries/s = %.0f%% of River's best no-op rate in this run (%.0f jobs/s)",
				r.Scenario, r.DeliveriesPerSecond, 100*r.DeliveriesPerSecond/ceiling, ceiling)
		}
	}
	fmt.Fprintln(w)
}

// details prints a scenario's side notes: creation, resource use, errors.
func (rep *report) details(w io.Writer, r result) {
	var parts []string
	if r.CreateSeconds > 0 {
		what := "tasks"
		if r.Scenario == "idle-waits" {
			what = "workflow runs"
		}
		parts = append(parts, fmt.Sprintf("created %d %s in %.1f s (%.0f/s)", r.Tasks, what, r.CreateSeconds, r.CreatePerSecond))
	}
	if r.FirstDeliveryMS != nil {
		parts = append(parts, fmt.Sprintf("first delivery +%s ms, last +%s ms, %d/%d within 3 s",
			f1(*r.FirstDeliveryMS), f1(*r.LastDeliveryMS), r.WithinTarget, r.Expected))
	}
	if r.Lateness != nil {
		parts = append(parts, fmt.Sprintf("lateness min %s mean %s p99.9 %s ms", f1(r.Lateness.Min), f1(r.Lateness.Mean), f1(r.Lateness.P999)))
	}
	if len(r.Trend) > 0 {
		var t []string
		for _, p := range r.Trend {
			if burstScenario(r.Scenario) {
				t = append(t, strconv.Itoa(p.N))
			} else {
				t = append(t, f1(p.P50))
			}
		}
		if burstScenario(r.Scenario) {
			parts = append(parts, "deliveries per 0.5 s after the instant: "+strings.Join(t, " "))
		} else {
			parts = append(parts, fmt.Sprintf("lateness p50 per %s s of the window: %s", strconv.FormatFloat(r.TrendSeconds, 'g', -1, 64), strings.Join(t, " ")))
		}
	}
	if len(r.Windows) > 0 {
		var t []string
		for _, w := range r.Windows {
			t = append(t, fmt.Sprintf("%.0f", w.PerSecond))
		}
		parts = append(parts, "deliveries/s per 5 s after the instant: "+strings.Join(t, " "))
	}
	if len(r.Stages) > 0 {
		var st []string
		for _, s := range r.Stages {
			st = append(st, fmt.Sprintf("%s %s/%s/%s", s.Stage, f1(s.P50), f1(s.P99), f1(s.Max)))
		}
		if l := r.Lateness; l != nil {
			st = append(st, fmt.Sprintf("delivered %s/%s/%s", f1(l.P50), f1(l.P99), f1(l.Max)))
		}
		parts = append(parts, "stages, ms after the slot (p50/p99/max): "+strings.Join(st, ", "))
	}
	if r.Scenario != "idle" && r.Scenario != "idle-waits" && (r.AxCPUPercent != nil || r.PGCPUPercent != nil) {
		line := fmt.Sprintf("CPU (%% of one core) ax %s, postgres %s, bench %s, other %s; ax RSS %s MiB",
			fp(r.AxCPUPercent), fp(r.PGCPUPercent), fp(r.BenchCPUPercent), fp(r.OtherCPUPercent), fp(r.AxRSSMiB))
		if r.AxCPUPerDeliveryUS != nil || r.PGCPUPerDeliveryUS != nil {
			line += fmt.Sprintf("; per delivery ax %s µs, postgres %s µs, bench %s µs", fp(r.AxCPUPerDeliveryUS),
				fp(r.PGCPUPerDeliveryUS), fp(r.BenchCPUPerDeliveryUS))
		}
		parts = append(parts, line)
	}
	if r.FsyncPerSecond > 0 || r.LoopbackPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("machine just before the scenario: %.0f fdatasync/s (8 kB writes), %.0f loopback HTTP "+
			"requests/s from one client (both vary on shared virtual machines: compare runs at similar values)",
			r.FsyncPerSecond, r.LoopbackPerSecond))
	}
	if r.ReceiverConnections > 0 {
		parts = append(parts, fmt.Sprintf("receiver accepted %d connections", r.ReceiverConnections))
	}
	if r.Early > 0 {
		parts = append(parts, fmt.Sprintf("%d slots arrived before their time", r.Early))
	}
	for _, p := range parts {
		fmt.Fprintf(w, "  %s: %s\n", r.Scenario, p)
	}
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(w, "  %s: error: %s\n", r.Scenario, e)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  %s: note: %s\n", r.Scenario, n)
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "  %s: NOT MEASURED: %s\n", r.Scenario, r.Failure)
	}
	if len(r.Waits) > 0 {
		fmt.Fprintf(w, "  %s: active database sessions during the window, on average (pg_stat_activity):\n", r.Scenario)
		for _, e := range r.Waits {
			fmt.Fprintf(w, "    %6.2f  %s\n", e.Sessions, e.Event)
		}
	}
	if len(r.TopStatements) > 0 {
		fmt.Fprintf(w, "  %s: statements by total time (pg_stat_statements):\n", r.Scenario)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    calls\ttotal ms\tmean ms\trows\tquery")
		for _, s := range r.TopStatements {
			fmt.Fprintf(tw, "    %d\t%.0f\t%.2f\t%d\t%s\n", s.Calls, s.TotalMS, s.MeanMS, s.Rows, s.Query)
		}
		_ = tw.Flush()
	}
	if len(r.Tables) > 0 {
		fmt.Fprintf(w, "  %s: row writes by table (pg_stat_user_tables; HOT updates touch no index):\n", r.Scenario)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    table\tinserted\tupdated\tHOT\tdeleted")
		for _, t := range r.Tables {
			hot := "-"
			if t.Updated > 0 {
				hot = fmt.Sprintf("%.0f%%", 100*float64(t.HOTUpdated)/float64(t.Updated))
			}
			fmt.Fprintf(tw, "    %s\t%d\t%d\t%s\t%d\n", t.Name, t.Inserted, t.Updated, hot, t.Deleted)
		}
		_ = tw.Flush()
	}
	if wal := r.WAL; wal != nil {
		fmt.Fprintf(w, "  %s: WAL since the scenario began: %.1f MB in %d records, %d full-page images, %d checkpoints\n",
			r.Scenario, float64(wal.Bytes)/1e6, wal.Records, wal.FullPages, wal.Checkpoints)
	}
}

func verdict(r result) string {
	switch {
	case r.Failure != "":
		return "NOT MEASURED"
	case r.Pass == nil:
		return "-"
	case *r.Pass:
		return "PASS"
	}
	return "MISS"
}

// tuning lists the ax variables beyond the fixed ones.
func tuning(env map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(env) {
		switch k {
		case "AX_DATABASE_URL", "AX_ALLOW_PRIVATE_TARGETS", "AX_HTTP_ADDR":
			if k != "AX_DATABASE_URL" || !strings.Contains(env[k], "pool_max_conns") {
				continue
			}
		}
		parts = append(parts, k+"="+env[k])
	}
	return strings.Join(parts, " ")
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func fp(v *float64) string {
	if v == nil {
		return "?"
	}
	return f1(*v)
}

func numCPU() int { return runtime.NumCPU() }

// deliveryScenario reports whether a scenario measures webhook deliveries.
func deliveryScenario(name string) bool {
	switch name {
	case "precision", "sustained", "sustained-10k", "burst", "burst-100k", "deployed", "deployed-sustained", "retention", "noisy",
		"hung", "workflow", "diamond", "shards", "templated", "events":
		return true
	}
	return false
}

// burstScenario reports whether a scenario is a burst: every fire due at
// one instant.
func burstScenario(name string) bool {
	return name == "burst" || name == "burst-100k" || name == "shards"
}
