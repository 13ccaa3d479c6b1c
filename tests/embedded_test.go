package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var tokenRE = regexp.MustCompile(`(?m)^(eyJ[\w-]+\.[\w-]+\.[\w-]+)$`)

// dataDir returns a fresh AX_DATA_DIR the postgres account can reach when
// the tests run as root.
func dataDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.Chmod(d, 0o711))
	require.NoError(t, os.Chmod(filepath.Dir(d), 0o711))
	return filepath.Join(d, "ax")
}

func me(t *testing.T, base, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+"/v1/me", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// postgresFor lists the pids of postgres processes serving dir.
func postgresFor(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := string(b)
		if strings.Contains(cmd, "postgres") && strings.Contains(cmd, dir) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestEmbeddedQuickstart is the newcomer's path: ax with no configuration
// starts its own Postgres, prints a token that works, stops cleanly on
// Ctrl-C leaving no postgres behind, and reuses its data on the next start.
func TestEmbeddedQuickstart(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	env := map[string]string{"AX_DATA_DIR": dir}

	p := startAx(t, env)
	devToken := bannerToken(t, p)
	require.Contains(t, p.Stdout(), "curl -H \"Authorization: Bearer "+devToken+"\" "+p.base+"/v1/me")
	code, body := me(t, p.base, devToken)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "demo", body["tenant"])
	require.Contains(t, body["scopes"], "admin")

	// `ax token` with the same configuration mints tokens the server accepts.
	cmd := exec.Command(axBinary, "token", "--tenant", "acme", "--scope", "tasks:read tasks:write")
	cmd.Env = []string{"AX_DATA_DIR=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	require.NoError(t, err)
	cliToken := strings.TrimSpace(string(out))
	code, body = me(t, p.base, cliToken)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "acme", body["tenant"])

	info, err := os.Stat(filepath.Join(dir, "jwt-secret"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NotEmpty(t, postgresFor(dir))

	p.stop(t, syscall.SIGINT)
	require.Eventually(t, func() bool { return len(postgresFor(dir)) == 0 }, 10*time.Second, 50*time.Millisecond,
		"no postgres outlives ax")

	// Second start: same data, same secret, so the earlier tokens still work.
	p2 := startAx(t, env)
	code, _ = me(t, p2.base, cliToken)
	require.Equal(t, http.StatusOK, code)
	code, _ = me(t, p2.base, devToken)
	require.Equal(t, http.StatusOK, code)
	p2.stop(t, syscall.SIGTERM)
	require.Eventually(t, func() bool { return len(postgresFor(dir)) == 0 }, 10*time.Second, 50*time.Millisecond)
}

// TestEmbeddedKilled: even when ax is killed outright, its postgres stops,
// and the next start recovers.
func TestEmbeddedKilled(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	p := startAx(t, map[string]string{"AX_DATA_DIR": dir})
	require.NotEmpty(t, postgresFor(dir))
	p.stop(t, syscall.SIGKILL)
	require.Eventually(t, func() bool { return len(postgresFor(dir)) == 0 }, 20*time.Second, 50*time.Millisecond,
		"postgres follows ax down")
	p2 := startAx(t, map[string]string{"AX_DATA_DIR": dir})
	code, _ := me(t, p2.base, bannerToken(t, p2))
	require.Equal(t, http.StatusOK, code)
}

// bannerToken waits for the development token in the start-up banner.
func bannerToken(t *testing.T, p *proc) string {
	t.Helper()
	var tok string
	require.Eventually(t, func() bool {
		m := tokenRE.FindStringSubmatch(p.Stdout())
		if m != nil {
			tok = m[1]
		}
		return m != nil && strings.Contains(p.Stdout(), "/v1/me")
	}, 10*time.Second, 10*time.Millisecond, "the banner prints a token: %s", p.Stdout())
	return tok
}
