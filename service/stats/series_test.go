package stats_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/stats"
)

// TestStatsSeries: a day in 15-minute steps is 96 steps ending with the
// current one, at round times; known executions land in theirs with their
// outcome, success rate and lateness; another tenant's are not counted;
// steps that do not fit are refused.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	reader := stats.New(pool)
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ('a'), ('b')`)
	require.NoError(t, err)
	// add inserts an execution created ago (from one instant, so that
	// those of the same age share a step), started lateMS after its slot.
	base := time.Now()
	add := func(tenant string, ago time.Duration, state string, lateMS int) {
		t.Helper()
		at := base.Add(-ago)
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, created_at, started_at, first_started_at, last_error)
			VALUES ($1, $2, gen_random_uuid(), $3, 'schedule', $4, $3, $5, $5, CASE WHEN $4 = 'failed' THEN 'HTTP 500' END)`,
			tenant, uuid.Must(uuid.NewV7()).String(), at, state, at.Add(time.Duration(lateMS)*time.Millisecond))
		require.NoError(t, err)
	}
	add("a", 3*time.Hour, "succeeded", 10)
	add("a", 3*time.Hour, "succeeded", 20)
	add("a", 3*time.Hour, "failed", 30)
	add("a", 20*time.Hour, "succeeded", 40)
	add("a", 30*time.Hour, "succeeded", 1) // before the window
	add("b", 3*time.Hour, "failed", 1)

	s, err := reader.Series(ctx, "a", 24*time.Hour, 15*time.Minute)
	require.NoError(t, err)
	require.Len(t, s.Buckets, 96)
	assert.Equal(t, 15*time.Minute, s.Step)
	assert.Equal(t, 24*time.Hour, s.Until.Sub(s.Since))
	assert.Zero(t, s.Since.Minute()%15)
	assert.Zero(t, s.Since.Second())
	assert.WithinDuration(t, time.Now(), s.Until, 16*time.Minute)
	assert.True(t, s.Until.After(time.Now().Add(-time.Minute)), "the last step holds now")
	var total int64
	var withData []stats.Bucket
	for i, b := range s.Buckets {
		assert.True(t, b.Start.Equal(s.Since.Add(time.Duration(i)*s.Step)))
		total += b.Executions
		if b.Executions > 0 {
			withData = append(withData, b)
		}
	}
	assert.EqualValues(t, 4, total, "tenant b's and the one before the window are not counted")
	require.Len(t, withData, 2)
	b := withData[1]
	assert.EqualValues(t, 3, b.Executions)
	assert.EqualValues(t, 2, b.Succeeded)
	assert.EqualValues(t, 1, b.Failed)
	require.NotNil(t, b.SuccessRate)
	assert.InDelta(t, 2.0/3, *b.SuccessRate, 1e-9)
	assert.EqualValues(t, 3, b.FiringLateness.Count)
	assert.InDelta(t, 20, *b.FiringLateness.P50, 1e-9)
	assert.InDelta(t, 29.8, *b.FiringLateness.P99, 1e-9)
	ago := base.Sub(b.Start)
	assert.True(t, ago > 3*time.Hour-time.Minute && ago < 3*time.Hour+16*time.Minute, "the step of 3 h ago starts %s ago", ago)

	for _, bad := range []struct{ window, step time.Duration }{
		{24 * time.Hour, 30 * time.Second}, // finer than a minute
		{24 * time.Hour, 7 * time.Minute},  // does not divide a day
		{90 * time.Minute, time.Hour},      // does not divide the window
		{48 * time.Hour, time.Minute},      // 2880 steps
		{31 * 24 * time.Hour, time.Hour},   // too long a window
	} {
		_, err := reader.Series(ctx, "a", bad.window, bad.step)
		var ve *errs.ValidationError
		assert.ErrorAs(t, err, &ve, "%s by %s: %v", bad.window, bad.step, err)
	}
}
