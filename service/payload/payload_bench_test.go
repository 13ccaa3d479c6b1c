package payload_test

import (
	"testing"
	"time"

	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/payload"
)

// benchPayload is what the bench's templated scenario sends
// (tests/bench/templated.go): yesterday's business date as a date and as
// yyyyMMdd, the local slot, the execution id, the round kept a number.
var benchPayload = []byte(`{"i": 7, "date": "{{ date_add .business_date -1 }}",
	"file": "export-{{ date_format (date_add .business_date -1) \"yyyyMMdd\" }}.csv",
	"slot": "{{ .scheduled_for_local }}", "key": "{{ .execution_id }}", "round": "{{ .round }}",
	"static": {"kind": "export", "rows": [1, 2, 3]}}`)

// claimFires is how many fires of a task firing every second one
// scheduler claim renders (its 12 s claim cycle).
const claimFires = 12

// BenchmarkRenderFires is the cost of a templated task's payload per fire
// (ns/fire) as the scheduler renders it: parse_per_claim parses the
// template at each claim of the task, as every pass did before the
// scheduler kept renderers per task version; cached renders with a
// renderer built once.
func BenchmarkRenderFires(b *testing.B) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		b.Fatal(err)
	}
	slot := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	fire := func(r payload.Renderer, i int) {
		out, err := r.Render(payload.Fire{
			ExecutionID: "0193a5b0-7c4e-7000-8000-000000000001", ScheduledFor: slot.Add(time.Duration(i) * time.Second),
			Round: 1, Trigger: lifecycle.TriggerSchedule,
		})
		if err != nil || len(out) == 0 {
			b.Fatalf("render: %v (%d bytes)", err, len(out))
		}
	}
	b.Run("parse_per_claim", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r := payload.NewRenderer(true, benchPayload, loc, "task", "export")
			for j := range claimFires {
				fire(r, j)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*claimFires), "ns/fire")
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		r := payload.NewRenderer(true, benchPayload, loc, "task", "export")
		for i := 0; b.Loop(); i++ {
			for j := range claimFires {
				fire(r, j)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*claimFires), "ns/fire")
	})
}
