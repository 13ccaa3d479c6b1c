package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/axhq/ax/service/schedule"
)

func TestDescribeSchedule(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		spec schedule.Spec
		want string
	}{
		{schedule.Spec{Type: "cron", Cron: "* * * * *"}, "every minute (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "* * * * * *", Timezone: "UTC"}, "every second (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "*/15 * * * *", Timezone: "Asia/Tokyo"}, "every 15 minutes (Asia/Tokyo)"},
		{schedule.Spec{Type: "cron", Cron: "0 9 * * 1-5", Timezone: "Europe/Paris"}, "at 09:00 on weekdays (Europe/Paris)"},
		{schedule.Spec{Type: "cron", Cron: "30 2 * * *"}, "every day at 02:30 (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "5 * * * *"}, "every hour at minute 5 (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "0 */6 * * *"}, "every 6 hours at minute 0 (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "0 8 1 * *"}, "every month on day 1 at 08:00 (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "0 8 * * 1"}, "at 08:00 on Mondays (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "@hourly"}, "every hour, on the hour (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "0 0 12 ? * MON#2"}, "cron 0 0 12 ? * MON#2 (UTC)"},
		{schedule.Spec{Type: "cron", Cron: "0 9 1-7 * *"}, "cron 0 9 1-7 * * (UTC)"},
		{schedule.Spec{Type: "interval", IntervalSeconds: 90}, "every 90 seconds"},
		{schedule.Spec{Type: "interval", IntervalSeconds: 3600}, "every hour"},
		{schedule.Spec{Type: "interval", IntervalSeconds: 600}, "every 10 minutes"},
		{schedule.Spec{Type: "once", RunAt: &at}, "once, at 2026-03-01 09:00:00 UTC"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, describeSchedule(c.spec), c.spec.Cron)
	}
}
