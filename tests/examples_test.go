package tests

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// The client examples are documentation that runs: each test below starts
// the real binary against a throwaway Postgres and runs one example against
// it, which creates an endpoint pointing at a receiver of its own, a task
// firing every second, verifies two signed deliveries, lists the
// executions, and pauses and deletes what it made.

// exampleServer starts ax for an example and returns its base URL and a
// token with the scopes the examples use. The examples' receivers listen
// on 127.0.0.1, hence AX_ALLOW_PRIVATE_TARGETS.
func exampleServer(t *testing.T) (base, token string) {
	t.Helper()
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "examples-secret-0123456789abcdef012345",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	cmd := exec.Command(axBinary, "token", "--tenant", "examples",
		"--scope", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AX_DATABASE_URL=" + env["AX_DATABASE_URL"], "AX_JWT_SECRET=" + env["AX_JWT_SECRET"]}
	out, err := cmd.Output()
	require.NoError(t, err)
	return p.base, strings.TrimSpace(string(out))
}

// runExample runs name with args and AX_URL/AX_TOKEN set, requires exit
// status 0 and returns its standard output.
func runExample(t *testing.T, dir, base, token, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AX_URL="+base, "AX_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("%s %s:\n%s%s", name, strings.Join(args, " "), out, stderr.String())
	require.NoError(t, err, "the example must exit 0; stderr:\n%s", stderr.String())
	return string(out)
}

// requireExampleFails runs name with args and a token ax refuses and
// requires exit status 1: an example that fails says so to its caller.
func requireExampleFails(t *testing.T, dir, base, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AX_URL="+base, "AX_TOKEN=not-a-token")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the example must fail without a valid token:\n%s", out)
	require.Equal(t, 1, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "401")
}

// requireExampleOutput checks the lines both examples print and that what
// they deleted is gone.
func requireExampleOutput(t *testing.T, base, token, out string) {
	t.Helper()
	line := func(re string) []string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + re + `$`).FindStringSubmatch(out)
		require.NotNil(t, m, "a line matching %q in:\n%s", re, out)
		return m
	}
	endpointID := line(`endpoint created (\S+)`)[1]
	taskID := line(`task created (\S+).*`)[1]
	first := line(`verified delivery 1 (\S+) \{"order":42\}`)[1]
	second := line(`verified delivery 2 (\S+) \{"order":42\}`)[1]
	require.NotEqual(t, first, second, "two executions, each delivered once")
	n, err := strconv.Atoi(line(`executions (\d+)`)[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2, "the listed executions include the two delivered")
	line(`execution ` + regexp.QuoteMeta(first) + ` \S+ \S+`)
	line(`task paused ` + regexp.QuoteMeta(taskID) + `.*`)
	line(`task deleted ` + regexp.QuoteMeta(taskID))
	line(`endpoint deleted ` + regexp.QuoteMeta(endpointID))
	line(`ok`)

	apiDo(t, http.MethodGet, base+"/v1/tasks/"+taskID, token, nil, http.StatusNotFound)
	apiDo(t, http.MethodGet, base+"/v1/endpoints/"+endpointID, token, nil, http.StatusNotFound)
}

// TestGoClientExample runs openapi/client/examples/quickstart (the Go
// client and openapi/receiver) against the real server.
func TestGoClientExample(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, "../openapi/client/examples/quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	base, token := exampleServer(t)
	requireExampleOutput(t, base, token, runExample(t, "", base, token, bin))
	requireExampleFails(t, "", base, bin)
}

// TestTypeScriptClientExample runs openapi/ts/examples/e2e.ts (the
// TypeScript client, a node:http receiver and the standardwebhooks
// package), compiled with the package's tsc, against the real server. It
// skips without Node.js unless AX_REQUIRE_NODE=1.
func TestTypeScriptClientExample(t *testing.T) {
	t.Parallel()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("AX_REQUIRE_NODE") == "1" {
			t.Fatalf("AX_REQUIRE_NODE=1 but Node.js is missing: node: %v; npm: %v", errNode, errNpm)
		}
		t.Skip("Node.js (node and npm) is not installed; AX_REQUIRE_NODE=1 makes this a failure")
	}
	dir := filepath.Join("..", "openapi", "ts")
	for _, args := range [][]string{
		{"ci", "--no-audit", "--no-fund", "--loglevel=error"},
		{"run", "--silent", "build:examples"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "npm %s: %s", strings.Join(args, " "), out)
	}

	base, token := exampleServer(t)
	script := filepath.Join("build", "examples", "e2e.js")
	requireExampleOutput(t, base, token, runExample(t, dir, base, token, node, script))
	requireExampleFails(t, dir, base, node, script)
}
