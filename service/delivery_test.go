package service

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
)

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456…"},
		{"ééééé", 8, "éé…"}, // never splits a rune
		{"abc", 2, "…"},
	}
	for _, tt := range tests {
		got := truncateUTF8(tt.in, tt.limit)
		require.Equal(t, tt.want, got, "%q/%d", tt.in, tt.limit)
		require.True(t, utf8.ValidString(got))
		require.LessOrEqual(t, len(got), max(tt.limit, len("…")))
	}
}

func TestAttemptMessage(t *testing.T) {
	t.Parallel()
	require.Equal(t, "HTTP 500 Internal Server Error", attemptMessage("HTTP 500 Internal Server Error", "  \n", 512))
	require.Equal(t, "HTTP 503: busy", attemptMessage("HTTP 503", " busy\n", 512))
	long := attemptMessage("HTTP 500", strings.Repeat("x", 10_000), ExcerptMaxDefault)
	require.Len(t, long, ExcerptMaxDefault)
	require.True(t, strings.HasPrefix(long, "HTTP 500: xxx"))
	require.True(t, strings.HasSuffix(long, "…"))
}

func TestDeliveryFromRow(t *testing.T) {
	t.Parallel()
	taskTimeout, epTimeout := int32(1500), int32(10_000)
	row := db.DeliveryRow{
		TaskPayload: []byte(`{"task":1}`), JoinedEndpoint: db.JoinedEndpoint{EndpointTimeoutMS: &epTimeout},
		ScheduledFor: time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("X", 3600)),
	}
	d := deliveryFromRow(row, 3)
	require.Equal(t, []byte(`{"task":1}`), d.Payload)
	require.Equal(t, 10*time.Second, d.Timeout)
	require.Equal(t, time.UTC, d.ScheduledFor.Location())
	require.Equal(t, 3, d.Lease)

	row.Payload, row.TaskTimeoutMS = []byte(`{"manual":true}`), &taskTimeout
	d = deliveryFromRow(row, 1)
	require.Equal(t, []byte(`{"manual":true}`), d.Payload, "the execution's override wins")
	require.Equal(t, 1500*time.Millisecond, d.Timeout, "the task's timeout wins")
}

func TestDeliveriesConfigDefaults(t *testing.T) {
	t.Parallel()
	c := DeliveriesConfig{}.WithDefaults()
	require.Equal(t, QueueWaitMaxDefault, c.QueueWaitMax)
	require.Equal(t, ExcerptMaxDefault, c.ExcerptMax)
	require.Equal(t, AlertMaxAttemptsDefault, c.AlertMaxAttempts)
	require.NotNil(t, c.Rand)
	c = DeliveriesConfig{QueueWaitMax: time.Minute, ExcerptMax: 100, AlertMaxAttempts: 2}.WithDefaults()
	require.Equal(t, time.Minute, c.QueueWaitMax)
	require.Equal(t, 100, c.ExcerptMax)
	require.Equal(t, 2, c.AlertMaxAttempts)
}
