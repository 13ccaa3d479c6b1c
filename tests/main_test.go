package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/tests/axproc"
)

// axBinary is the server binary built once for the package, with the
// race detector when the tests run with it (make test), unless
// AX_TEST_RACE_AX says otherwise ("0" or "1").
var axBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ax-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	axBinary = filepath.Join(dir, "ax")
	race := axproc.RaceEnabled
	if v := os.Getenv("AX_TEST_RACE_AX"); v != "" {
		race = v == "1"
	}
	if err := axproc.Build(context.Background(), axBinary, race); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := dbtest.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running ax process (axproc.Proc) started by startAx.
type proc struct {
	*axproc.Proc
	base string
	done <-chan struct{}
}

// startAx starts the binary with env (plus PATH) and waits until it prints
// its address. It is killed at the end of the test if still running, and
// the test fails if the race detector reported a data race in it. Its log
// goes to the test's log.
func startAx(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	return startAxLogTo(t, &testLogWriter{t: t}, env, args...)
}

// startAxLogTo is startAx with the server's log (its stderr) written to
// log instead.
func startAxLogTo(t *testing.T, log io.Writer, env map[string]string, args ...string) *proc {
	t.Helper()
	vars := []string{"PATH=" + os.Getenv("PATH"), "AX_HTTP_ADDR=127.0.0.1:0", "AX_LOG_LEVEL=warn"}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	p, err := axproc.Start(t.Context(), axproc.Config{Binary: axBinary, Args: args, Env: vars, Log: log})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if race := p.Race(); race != "" {
			t.Errorf("ax %s (pid %d): the race detector found a data race:\n%s", p.Base(), p.Pid(), race)
		}
		if dir := env["AX_DATA_DIR"]; dir != "" {
			// Let the embedded postgres finish its shutdown before the
			// test's temporary directory is removed.
			deadline := time.Now().Add(20 * time.Second)
			for len(postgresFor(dir)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	return &proc{Proc: p, base: p.Base(), done: p.Done()}
}

// stop sends sig and waits for the process to exit; it fails the test
// when the process had already exited, or does not exit within a minute.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.False(t, p.ExitedEarly(), "ax %s exited before it was stopped (status %d)", p.base, p.ExitCode())
	require.NoError(t, p.Stop(sig, 60*time.Second))
}

// tryDo sends one JSON request (body nil: none) and returns the status
// and body. It fails no test, so that goroutines other than the test's
// can send requests: they hand the error back.
func tryDo(ctx context.Context, method, url, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// testLogWriter sends the server's log lines to the test log.
type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	return t.Context()
}
