package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// axBinary is the server binary built once for the package.
var axBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ax-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	axBinary = filepath.Join(dir, "ax")
	build := exec.Command("go", "build", "-o", axBinary, "../cmd/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ax:", err)
		os.Exit(1)
	}
	code := dbtest.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running ax process.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout strings.Builder
	done   chan struct{}
	base   string
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// startAx starts the binary with env (plus PATH) and waits until it prints
// its address. It is killed at the end of the test if still running. Its
// log goes to the test's log.
func startAx(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	return startAxLogTo(t, &testLogWriter{t: t}, env, args...)
}

// startAxLogTo is startAx with the server's log (its stderr) written to
// log instead.
func startAxLogTo(t *testing.T, log io.Writer, env map[string]string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(axBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AX_HTTP_ADDR=127.0.0.1:0", "AX_LOG_LEVEL=warn"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if dir := env["AX_DATA_DIR"]; dir != "" {
			// Let the embedded postgres finish its shutdown before the
			// test's temporary directory is removed.
			deadline := time.Now().Add(20 * time.Second)
			for len(postgresFor(dir)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	deadline := time.After(90 * time.Second)
	for p.base == "" {
		select {
		case l := <-lines:
			if m := listenRE.FindStringSubmatch(l); m != nil {
				p.base = m[1]
			}
		case <-p.done:
			t.Fatalf("ax exited before listening: %s", p.Stdout())
		case <-deadline:
			t.Fatalf("ax did not start within 90s")
		}
	}
	return p
}

// Stdout returns what the process printed so far.
func (p *proc) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// stop sends sig and waits for the process to exit.
func (p *proc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("ax did not exit within 60s after %v", sig)
	}
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
