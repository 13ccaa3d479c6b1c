package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/jobs"
)

// TestConfigurationDocumented: README's configuration table documents
// every variable loadConfig reads and nothing else, and each default it
// quotes is the one ax applies. It fails when a variable is added, renamed
// or dropped, or a default changes, and README is not brought along.
func TestConfigurationDocumented(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	read := make(map[string]bool)
	c, err := loadConfig(func(name string) string {
		mu.Lock()
		defer mu.Unlock()
		read[name] = true
		return ""
	})
	require.NoError(t, err)
	rows := readmeConfiguration(t)

	for name := range read {
		assert.Containsf(t, rows, name, "ax reads %s: README's configuration table must document it", name)
	}
	for name := range rows {
		assert.Truef(t, read[name], "README documents %s, which ax does not read", name)
	}

	// The defaults as serve applies them: the jobs package fills what
	// the configuration leaves zero.
	river := jobs.RiverConfig{
		DeliverWorkers: c.DeliverWorkers, BulkWorkers: c.BulkWorkers, FetchPollInterval: c.FetchPollInterval,
		JobTimeout: c.JobTimeout, RescueStuckJobsAfter: c.RescueAfter, SoftStopTimeout: c.SoftStopTimeout,
	}.WithDefaults()
	bulk := strconv.Itoa(river.BulkWorkers)
	if (jobs.RiverConfig{DeliverWorkers: 7}).WithDefaults().BulkWorkers == 7 {
		bulk = "AX_DELIVER_WORKERS"
	}
	defaults := map[string]string{
		"AX_DATA_DIR":                c.DataDir,
		"AX_HTTP_ADDR":               c.HTTPAddr,
		"AX_ALLOW_PRIVATE_TARGETS":   strconv.FormatBool(c.AllowPrivateTargets),
		"AX_AUTO_MIGRATE":            strconv.FormatBool(c.AutoMigrate),
		"AX_RIVERUI":                 strconv.FormatBool(c.RiverUI),
		"AX_ADMIN_IS_OPERATOR":       strconv.FormatBool(c.AdminIsOperator),
		"AX_LOG_LEVEL":               strings.ToLower(c.LogLevel.String()),
		"AX_SHUTDOWN_TIMEOUT":        docDuration(c.ShutdownTimeout),
		"AX_MAX_BODY_BYTES":          strconv.FormatInt(c.MaxBodyBytes, 10),
		"AX_EXECUTION_RETENTION":     docDuration(c.ExecutionRetention),
		"AX_AUDIT_RETENTION":         docDuration(c.AuditRetention),
		"AX_REPLICA_DEAD_AFTER":      docDuration(c.ReplicaDeadAfter),
		"AX_DB_MAX_CONNS":            strconv.Itoa(c.DBMaxConns),
		"AX_DELIVER_WORKERS":         strconv.Itoa(river.DeliverWorkers),
		"AX_BULK_WORKERS":            bulk,
		"AX_FETCH_POLL_INTERVAL":     docDuration(river.FetchPollInterval),
		"AX_JOB_TIMEOUT":             docDuration(river.JobTimeout),
		"AX_RESCUE_STUCK_JOBS_AFTER": docDuration(river.RescueStuckJobsAfter),
		"AX_SOFT_STOP_TIMEOUT":       docDuration(river.SoftStopTimeout),
		"AX_TENANT_MAX_TASKS":        strconv.Itoa(c.TenantDefaults.MaxTasks),
		"AX_TENANT_MAX_WORKFLOWS":    strconv.Itoa(c.TenantDefaults.MaxWorkflows),
		"AX_TENANT_MAX_INFLIGHT":     strconv.Itoa(c.TenantDefaults.MaxInflightDeliveries),
		"AX_TENANT_MAX_PER_SECOND":   strconv.FormatFloat(c.TenantDefaults.MaxDeliveriesPerSecond, 'f', -1, 64),
		"AX_TENANT_API_RPS":          strconv.FormatFloat(c.TenantDefaults.APIRequestsPerSecond, 'f', -1, 64),
	}
	// Variables whose default the table says in words: unset, generated,
	// derived from another variable.
	inWords := map[string]bool{
		"AX_DATABASE_URL": true, "AX_PUBLIC_URL": true, "AX_JWT_SECRET": true, "AX_JWT_PUBLIC_KEYS": true,
		"AX_JWT_ISSUER": true, "AX_JWT_AUDIENCE": true, "AX_DEBUG_ADDR": true,
	}
	for name, cell := range rows {
		want, ok := defaults[name]
		if !ok {
			assert.Truef(t, inWords[name], "%s: add its default to this test's defaults (or inWords when README says it in words)", name)
			continue
		}
		m := firstCode.FindStringSubmatch(cell)
		if assert.NotNilf(t, m, "README gives %s no default in code; ax's is %s", name, want) {
			assert.Equalf(t, want, m[1], "README's default of %s", name)
		}
	}
}

var firstCode = regexp.MustCompile("`([^`]*)`")

// readmeConfiguration returns README's configuration table: each variable
// with its default column (a row may document several variables).
func readmeConfiguration(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Configuration\n")
	require.True(t, ok, "README has a Configuration section")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := make(map[string]string)
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`AX_") {
			continue
		}
		for _, m := range firstCode.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = strings.TrimSpace(cells[len(cells)-2])
		}
	}
	require.Greater(t, len(rows), 20, "read README's table")
	return rows
}

// docDuration writes a default the way README does: "30d" for whole
// days, else Go's spelling without its trailing zero units ("6m", "5m30s").
func docDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
