package crontab_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/cmd/server/crontab"
)

// corpus is a crontab made of lines as they are found in the wild.
const corpus = `# m h  dom mon dow   command
MAILTO=ops@example.com
PATH=/usr/local/bin:/usr/bin:/bin

# nightly backup
30 2 * * * /usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1
*/15 * * * * cd /srv/app && ./bin/sync-feeds
0 9-17 * * mon-fri /usr/bin/php /srv/app/artisan schedule:run
0 0 1,15 * * /usr/local/bin/report monthly
5 4 * JAN,jul sun /opt/rotate.sh
@daily /usr/local/bin/cleanup --days 30
@HOURLY /usr/local/bin/cleanup --tmp
0 22-2/2 * * * /usr/local/bin/backup.sh --incremental
CRON_TZ=Asia/Shanghai
0 2 * * * /usr/local/bin/backup.sh --full
SHELL=/bin/bash
15 3 * * 1-5 date +\%Y-\%m-\%d >> /tmp/dates
MAILTO=""
LANG=C.UTF-8
0 12 * * * /usr/local/bin/backup.sh --full
`

func TestParseCorpus(t *testing.T) {
	t.Parallel()
	docs, err := crontab.Parse(strings.NewReader(corpus), crontab.Options{Endpoint: "runner", Timezone: "Europe/Paris", Timeout: 30 * time.Minute})
	require.NoError(t, err)
	type row struct{ name, cron, tz, shell, cmd0 string }
	var got []row
	for _, d := range docs {
		require.Equal(t, "Task", d.Kind)
		require.Equal(t, "runner", d.Spec.Endpoint)
		var cmd0 string
		if len(d.Spec.Payload.Command) > 0 {
			cmd0 = d.Spec.Payload.Command[0]
		}
		shell := d.Spec.Payload.Shell
		if cmd0 != "" {
			shell = d.Spec.Payload.Command[2]
		}
		got = append(got, row{d.Name, d.Spec.Schedule.Cron, d.Spec.Schedule.Timezone, shell, cmd0})
	}
	assert.Equal(t, []row{
		{"backup.sh", "30 2 * * *", "Europe/Paris", "/usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1", ""},
		{"sync-feeds", "*/15 * * * *", "Europe/Paris", "cd /srv/app && ./bin/sync-feeds", ""},
		{"php-artisan-schedule-run", "0 9-17 * * mon-fri", "Europe/Paris", "/usr/bin/php /srv/app/artisan schedule:run", ""},
		{"report-monthly", "0 0 1,15 * *", "Europe/Paris", "/usr/local/bin/report monthly", ""},
		{"rotate.sh", "5 4 * JAN,jul sun", "Europe/Paris", "/opt/rotate.sh", ""},
		{"cleanup-30", "@daily", "Europe/Paris", "/usr/local/bin/cleanup --days 30", ""},
		{"cleanup", "@hourly", "Europe/Paris", "/usr/local/bin/cleanup --tmp", ""},
		{"backup.sh-2", "0 22-2/2 * * *", "Europe/Paris", "/usr/local/bin/backup.sh --incremental", ""},
		{"backup.sh-3", "0 2 * * *", "Asia/Shanghai", "/usr/local/bin/backup.sh --full", ""},
		{"date-y-m-d", "15 3 * * 1-5", "Asia/Shanghai", "date +%Y-%m-%d >> /tmp/dates", "/bin/bash"},
		{"backup.sh-4", "0 12 * * *", "Asia/Shanghai", "/usr/local/bin/backup.sh --full", "/bin/bash"},
	}, got)

	first := docs[0].Spec
	assert.Equal(t, map[string]string{"source": "crontab", "crontab_line": "6", "comment": "nightly backup", "mailto": "ops@example.com"}, first.Labels)
	assert.Equal(t, map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}, first.Payload.Env)
	assert.Equal(t, int64(1800), first.Payload.TimeoutS)
	assert.Equal(t, crontab.Completion{Mode: "callback", TimeoutMS: 31 * 60 * 1000, HeartbeatTimeoutMS: 120000}, first.Completion)
	last := docs[len(docs)-1].Spec
	assert.NotContains(t, last.Labels, "mailto", "MAILTO=\"\" turns mail off")
	assert.Equal(t, map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}, last.Payload.Env)
	assert.NotContains(t, docs[1].Spec.Labels, "comment", "a comment belongs to the line right after it")

	again, err := crontab.Parse(strings.NewReader(corpus), crontab.Options{Endpoint: "runner", Timezone: "Europe/Paris", Timeout: 30 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, docs, again, "stable: the same file gives the same documents")
}

func TestParseSystemCrontab(t *testing.T) {
	t.Parallel()
	const etc = `SHELL=/bin/sh
PATH=/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin
17 *	* * *	root	cd / && run-parts --report /etc/cron.hourly
25 6	* * *	root	test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }
`
	docs, err := crontab.Parse(strings.NewReader(etc), crontab.Options{Endpoint: "runner", System: true, Prefix: "Host A"})
	require.NoError(t, err)
	require.Len(t, docs, 2)
	assert.Equal(t, "host-a-run-parts-cron.hourly", docs[0].Name)
	assert.Equal(t, "root", docs[0].Spec.Labels["crontab_user"])
	assert.Equal(t, "cd / && run-parts --report /etc/cron.hourly", docs[0].Spec.Payload.Shell)
	assert.Equal(t, "UTC", docs[0].Spec.Schedule.Timezone)
	assert.Equal(t, "host-a-test-anacron", docs[1].Name)

	_, err = crontab.Parse(strings.NewReader("17 * * * * /usr/bin/run-parts /etc/cron.hourly\n"), crontab.Options{Endpoint: "runner", System: true})
	require.ErrorContains(t, err, "line 1: a system crontab line needs a user name")
}

// TestParseRefusesWithLineNumbers: every line ax cannot run is named, and
// nothing is returned.
func TestParseRefusesWithLineNumbers(t *testing.T) {
	t.Parallel()
	const bad = `# refused lines
@reboot /usr/local/bin/start-daemon
0 0 * * * /usr/bin/mail -s report ops%today is done%
61 * * * * /bin/true
* * * * /bin/true
@every 5m /bin/true
CRON_TZ=Mars/Olympus
SHELL=bash
0 0 30 2 * /bin/never
not a crontab line at all
0 3 * * * /usr/local/bin/fine
`
	docs, err := crontab.Parse(strings.NewReader(bad), crontab.Options{Endpoint: "runner"})
	require.Nil(t, docs)
	var errs crontab.Errors
	require.ErrorAs(t, err, &errs)
	lines := map[int]string{}
	for _, e := range errs {
		lines[e.Line] = e.Reason
	}
	assert.Len(t, lines, 9, "%v", err)
	assert.Contains(t, lines[2], "@reboot")
	assert.Contains(t, lines[3], "unescaped %")
	assert.Contains(t, lines[4], "minute")
	assert.Contains(t, lines[5], "not a crontab line")
	assert.Contains(t, lines[6], "@every is not a cron macro")
	assert.Contains(t, lines[7], "not a time zone")
	assert.Contains(t, lines[8], "absolute path")
	assert.Contains(t, lines[9], "never")
	assert.Contains(t, lines[10], `schedule "not a crontab line at"`)
	assert.Contains(t, err.Error(), "line 2: @reboot")
}
