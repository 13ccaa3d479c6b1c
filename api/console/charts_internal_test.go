package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestNiceCeil: axis tops are round numbers at or above the data.
func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 1: 1, 3: 3, 7: 8, 9: 10, 11: 12, 106: 120, 218: 250, 0.4: 0.4, 1234: 1500} {
		assert.InDelta(t, want, niceCeil(in), 1e-9, "%v", in)
	}
}

// TestPercentile interpolates as Postgres's percentile_cont does.
func TestPercentile(t *testing.T) {
	assert.Nil(t, percentile(nil, 0.5))
	assert.InDelta(t, 200, *percentile([]float64{300, 100, 200}, 0.5), 1e-9)
	assert.InDelta(t, 298, *percentile([]float64{300, 100, 200}, 0.99), 1e-9)
	assert.InDelta(t, 7, *percentile([]float64{7}, 0.99), 1e-9)
}

// TestLayoutSeries: a day of 15-minute steps is 96 slots wide with a bar
// per step with executions, labelled every three hours in UTC (the date
// at midnight), and a lateness point per step and percentile.
func TestLayoutSeries(t *testing.T) {
	since := time.Date(2026, 3, 1, 10, 45, 0, 0, time.UTC)
	s := service.StatsSeries{Since: since, Until: since.Add(24 * time.Hour), Step: 15 * time.Minute, Buckets: make([]service.StatsBucket, 96)}
	for i := range s.Buckets {
		s.Buckets[i].Start = since.Add(time.Duration(i) * s.Step)
	}
	p50, p99 := 10.0, 40.0
	s.Buckets[0] = service.StatsBucket{
		Start: since, Executions: 4, Succeeded: 2, Failed: 1,
		FiringLateness: service.Percentiles{Count: 3, P50: &p50, P99: &p99},
	}
	s.Buckets[95] = service.StatsBucket{Start: s.Buckets[95].Start, Executions: 8, Succeeded: 8}
	v := layoutSeries(s)
	assert.Equal(t, chartLeft+96*chartSlot+chartRight, v.Chart.Width)
	require.Len(t, v.Chart.Bars, 2)
	assert.Len(t, v.Chart.Bars[0].Segs, 3, "succeeded, failed, other")
	assert.Equal(t, v.Chart.Top, v.Chart.Bars[1].Segs[0].Y, "the busiest bar (8, the axis top) is the full plot")
	assert.EqualValues(t, 12, v.Total)
	assert.EqualValues(t, 8, v.Busiest.Executions)
	assert.Len(t, v.Rows, 2)
	var labels []string
	for _, x := range v.Chart.XTicks {
		labels = append(labels, x.Label)
	}
	assert.Equal(t, []string{"12:00", "15:00", "18:00", "21:00", "Mar 2", "03:00", "06:00", "09:00"}, labels)
	assert.True(t, v.HasLateness)
	assert.Len(t, v.Lateness.Dots, 2)
	assert.Len(t, v.Lateness.Lines, 2)
}
