package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/jobs"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(envOf(nil))
	require.NoError(t, err)
	require.True(t, c.Embedded())
	require.Equal(t, "./.ax", c.DataDir)
	require.Equal(t, ":8080", c.HTTPAddr)
	require.True(t, c.AutoMigrate)
	require.False(t, c.AllowPrivateTargets)
	require.Equal(t, 30*time.Second, c.ShutdownTimeout)
	require.EqualValues(t, 1<<20, c.MaxBodyBytes)
	require.Equal(t, 20, c.DBMaxConns)
	require.Zero(t, c.FetchPollInterval, "jobs' default")
	require.False(t, c.AdminIsOperator, "a tenant's admin is no operator")

	require.Equal(t, 30*24*time.Hour, c.ExecutionRetention)
	require.Equal(t, 90*24*time.Hour, c.AuditRetention)

	c, err = loadConfig(envOf(map[string]string{"AX_FETCH_POLL_INTERVAL": "50ms"}))
	require.NoError(t, err)
	require.Equal(t, 50*time.Millisecond, c.FetchPollInterval)

	c, err = loadConfig(envOf(map[string]string{"AX_ADMIN_IS_OPERATOR": "true"}))
	require.NoError(t, err)
	require.True(t, c.AdminIsOperator)

	// Retentions: days or Go durations.
	c, err = loadConfig(envOf(map[string]string{"AX_EXECUTION_RETENTION": "7d", "AX_AUDIT_RETENTION": "36h"}))
	require.NoError(t, err)
	require.Equal(t, 7*24*time.Hour, c.ExecutionRetention)
	require.Equal(t, 36*time.Hour, c.AuditRetention)
}

// Not parallel: the collector setting is the process's.
func TestSetGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	setGCPercent(envOf(map[string]string{"GOGC": "150"}))
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: left as the runtime has it")
	setGCPercent(envOf(nil))
	require.Equal(t, gcPercentDefault, debug.SetGCPercent(100))
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	badPEM := filepath.Join(t.TempDir(), "keys.pem")
	require.NoError(t, os.WriteFile(badPEM, []byte("not a pem"), 0o600))
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"bad addr", map[string]string{"AX_HTTP_ADDR": "8080"}, []string{`AX_HTTP_ADDR="8080"`, "host:port"}},
		{"bad port", map[string]string{"AX_HTTP_ADDR": ":99999"}, []string{"AX_HTTP_ADDR", "0 to 65535"}},
		{"short secret", map[string]string{"AX_JWT_SECRET": "abc"}, []string{"AX_JWT_SECRET", "at least 32"}},
		{"secret not echoed", map[string]string{"AX_JWT_SECRET": "hunter2"}, []string{"AX_JWT_SECRET: must"}},
		{"bad db url", map[string]string{"AX_DATABASE_URL": "mysql-ish", "AX_JWT_SECRET": "0123456789abcdef0123456789abcdef"}, []string{"AX_DATABASE_URL", "PostgreSQL URL"}},
		{"bad bool", map[string]string{"AX_ALLOW_PRIVATE_TARGETS": "yes please"}, []string{"AX_ALLOW_PRIVATE_TARGETS", "true or false"}},
		{"bad migrate bool", map[string]string{"AX_AUTO_MIGRATE": "maybe"}, []string{"AX_AUTO_MIGRATE"}},
		{"bad admin-is-operator bool", map[string]string{"AX_ADMIN_IS_OPERATOR": "sometimes"}, []string{"AX_ADMIN_IS_OPERATOR", "true or false"}},
		{"bad level", map[string]string{"AX_LOG_LEVEL": "loud"}, []string{"AX_LOG_LEVEL", "debug, info, warn or error"}},
		{"bad timeout", map[string]string{"AX_SHUTDOWN_TIMEOUT": "-3s"}, []string{"AX_SHUTDOWN_TIMEOUT", "positive duration"}},
		{"bad body", map[string]string{"AX_MAX_BODY_BYTES": "12"}, []string{"AX_MAX_BODY_BYTES"}},
		{"poll too fast", map[string]string{"AX_FETCH_POLL_INTERVAL": "1ms"}, []string{"AX_FETCH_POLL_INTERVAL", "10ms to 10s"}},
		{"poll not a duration", map[string]string{"AX_FETCH_POLL_INTERVAL": "often"}, []string{"AX_FETCH_POLL_INTERVAL"}},
		{"missing keys file", map[string]string{"AX_JWT_PUBLIC_KEYS": "/nonexistent/keys.pem"}, []string{"AX_JWT_PUBLIC_KEYS", "no such file"}},
		{"bad keys file", map[string]string{"AX_JWT_PUBLIC_KEYS": badPEM}, []string{"AX_JWT_PUBLIC_KEYS", "no PEM public keys"}},
		{"retention not a duration", map[string]string{"AX_EXECUTION_RETENTION": "a month"}, []string{"AX_EXECUTION_RETENTION", `"30d"`}},
		{"retention in fractional days", map[string]string{"AX_AUDIT_RETENTION": "1.5d"}, []string{"AX_AUDIT_RETENTION", "at least 1h"}},
		{"retention too short", map[string]string{"AX_AUDIT_RETENTION": "10m"}, []string{`AX_AUDIT_RETENTION="10m"`, "at least 1h"}},
		{"several at once", map[string]string{"AX_HTTP_ADDR": "x", "AX_LOG_LEVEL": "x"}, []string{"AX_HTTP_ADDR", "AX_LOG_LEVEL"}},
		{"dead-after too short", map[string]string{"AX_REPLICA_DEAD_AFTER": "1s"}, []string{"AX_REPLICA_DEAD_AFTER", "from 3s to 1h0m0s"}},
		{"dead-after not a duration", map[string]string{"AX_REPLICA_DEAD_AFTER": "soon"}, []string{"AX_REPLICA_DEAD_AFTER"}},
		{
			"rescue below the default job timeout",
			map[string]string{"AX_RESCUE_STUCK_JOBS_AFTER": "60s"},
			[]string{`AX_RESCUE_STUCK_JOBS_AFTER="60s"`, "at least AX_JOB_TIMEOUT (5m30s)"},
		},
		{
			"rescue below the job timeout",
			map[string]string{"AX_RESCUE_STUCK_JOBS_AFTER": "60s", "AX_JOB_TIMEOUT": "90s"},
			[]string{"AX_RESCUE_STUCK_JOBS_AFTER", "at least AX_JOB_TIMEOUT (1m30s)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadConfig(envOf(tc.env))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "hunter2")
		})
	}
}

func TestServeNeedsAVerificationKey(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AX_DATABASE_URL": "postgres://u@h/db"}
	c, err := loadConfig(envOf(env))
	require.NoError(t, err, "migrate needs no JWT key")
	require.ErrorContains(t, c.checkAuth(), "required with AX_DATABASE_URL")
	err = run(t.Context(), nil, envOf(env), new(syncBuffer))
	require.ErrorContains(t, err, "AX_JWT_SECRET")
}

func TestRunUnknownCommand(t *testing.T) {
	t.Parallel()
	err := run(t.Context(), []string{"frobnicate"}, envOf(nil), new(syncBuffer))
	require.ErrorContains(t, err, `unknown command "frobnicate"`)
}

func TestRunVersion(t *testing.T) {
	t.Parallel()
	out := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"version"}, envOf(nil), out))
	require.Regexp(t, `^ax \S+\n$`, out.String())
}

func TestServeRejectsBadConfigBeforeStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	err := run(t.Context(), nil, envOf(map[string]string{"AX_DATA_DIR": dir, "AX_HTTP_ADDR": "nope"}), new(syncBuffer))
	require.ErrorContains(t, err, "AX_HTTP_ADDR")
	entries, _ := os.ReadDir(dir)
	require.Empty(t, entries, "nothing is created when the configuration is invalid")
}

// TestRunHelp: -h, --help and help print the usage on stdout, after any
// command; ax token's lists its flags.
func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"serve", "--help"}, {"migrate", "-h"}, {"serve", "-help"}} {
		out := new(syncBuffer)
		require.NoError(t, run(t.Context(), args, envOf(nil), out), "%v", args)
		require.Contains(t, out.String(), "usage: ax [command]", "%v", args)
	}
	out := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"token", "--help"}, envOf(nil), out))
	require.Contains(t, out.String(), "usage: ax token --tenant T")
	require.Contains(t, out.String(), "ax token --operator")
	require.Contains(t, out.String(), "-tenant")
	require.Contains(t, out.String(), "-operator")
}

// TestTokenSaysWhenItCreatesASecret: in embedded mode ax token signs with
// the data directory's secret; when it has to create one (a data directory
// no server used), it says so on stderr, since a server started with
// another data directory refuses the token. The banner's hint names the
// data directory.
func TestTokenSaysWhenItCreatesASecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data dir")
	env := envOf(map[string]string{"AX_DATA_DIR": dir})
	var said strings.Builder
	out := new(syncBuffer)
	require.NoError(t, token([]string{"--tenant", "acme"}, env, out, &said))
	require.Contains(t, said.String(), "created a new development secret in "+filepath.Join(dir, secretFile))
	require.NotContains(t, out.String(), "secret", "stdout carries only the token")
	said.Reset()
	require.NoError(t, token([]string{"--tenant", "acme"}, env, out, &said))
	require.Empty(t, said.String(), "the secret exists now")

	cfg, err := loadConfig(env)
	require.NoError(t, err)
	secret, err := jwtSecret(cfg)
	require.NoError(t, err)
	var banner strings.Builder
	printBanner(&banner, "http://localhost:8080", cfg, secret)
	require.Contains(t, banner.String(), "More tokens: AX_DATA_DIR='"+dir+"' go run ./cmd/server token --tenant demo")
	require.Contains(t, banner.String(), "AX_DATA_DIR='"+dir+"' go run ./cmd/server token --operator")
}

// TestIdleConnsPerHost: the keep-alive pool per receiver host has room
// for every send slot of both lanes, so that a host that both lanes send
// to reuses its connections instead of opening one per delivery.
func TestIdleConnsPerHost(t *testing.T) {
	t.Parallel()
	require.Equal(t, 2*jobs.DeliverWorkersDefault, idleConnsPerHost(config{}))
	require.Equal(t, 100, idleConnsPerHost(config{DeliverWorkers: 50}))
	require.Equal(t, 60, idleConnsPerHost(config{DeliverWorkers: 50, BulkWorkers: 10}))
}
