package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/axhq/ax/cmd/server/runner"
)

const runnerUsage = `usage: ax runner --secret whsec_… --allow REGEXP [--allow REGEXP…] [flags]

Runs commands from ax's signed webhooks: point an endpoint at this address
and give its tasks payloads such as
  {"command": ["/usr/local/bin/backup", "--full"], "timeout_s": 600}
  {"shell": "cd /srv/app && ./report.sh > /tmp/report.log", "env": {"LANG": "C"}}
A program (command[0], or /bin/sh for shell) runs only when an --allow
pattern matches it in full. Callback-mode tasks get 202 at once, heartbeats
and a completion with the exit status and the output's last 4 KiB (this
needs --ax-url); response-mode tasks get 200 or 500 with that output.

flags:
`

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runRunner is `ax runner`.
func runRunner(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	var errBuf strings.Builder
	fs.SetOutput(&errBuf)
	var secrets, allow stringList
	listen := fs.String("listen", ":8090", "the address to listen on")
	fs.Var(&secrets, "secret", "an endpoint signing secret (whsec_…); give two during a rotation (or AX_RUNNER_SECRETS, space-separated)")
	fs.Var(&allow, "allow", "a regular expression a program must match in full to run; repeatable, at least one")
	workers := fs.Int("workers", runner.WorkersDefault, "commands run at once; beyond, deliveries get 429 with Retry-After")
	axURL := fs.String("ax-url", getenv("AX_URL"), "ax's API base URL, for callback-mode heartbeats and completions (or AX_URL)")
	stateDir := fs.String("state-dir", "", "keep the last day's successes here, so a restarted runner still answers them without running again")
	timeout := fs.Duration("timeout", runner.TimeoutDefault, "a command's limit when its payload has no timeout_s")
	killAfter := fs.Duration("kill-after", runner.KillAfterDefault, "between SIGTERM and SIGKILL when a process group is ended")
	grace := fs.Duration("grace", runner.GraceDefault, "on SIGTERM, how long running commands may finish before they are ended and reported retryable")
	heartbeat := fs.Duration("heartbeat", runner.HeartbeatDefault, "heartbeat period when a delivery does not carry its heartbeat timeout")
	retryCodes := fs.String("retry-exit-codes", "", "comma-separated non-zero exit statuses reported as retryable (e.g. 75,111)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(stdout, runnerUsage+errBuf.String())
		return err
	} else if err != nil {
		return fmt.Errorf("runner: %s", strings.TrimSpace(errBuf.String()))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("runner: unexpected argument %q", fs.Arg(0))
	}
	secrets = append(secrets, strings.Fields(getenv("AX_RUNNER_SECRETS"))...)
	if len(secrets) == 0 {
		return errors.New("runner: --secret (or AX_RUNNER_SECRETS) is required: the endpoint's signing secret")
	}
	allowlist, err := runner.ParseAllowlist(allow)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	codes, err := parseExitCodes(*retryCodes)
	if err != nil {
		return fmt.Errorf("runner: --retry-exit-codes: %w", err)
	}
	if *axURL != "" && !strings.HasPrefix(*axURL, "http://") && !strings.HasPrefix(*axURL, "https://") {
		return fmt.Errorf("runner: --ax-url %q is not an http(s) URL", *axURL)
	}
	logger := newLogger(slog.LevelInfo)
	r, err := runner.New(runner.Config{
		Secrets: secrets, Allow: allowlist, Workers: *workers, AXURL: *axURL, StateDir: *stateDir,
		Timeout: *timeout, KillAfter: *killAfter, Grace: *grace, Heartbeat: *heartbeat, RetryExitCodes: codes,
		Env: runner.BaseEnv(os.Environ()), Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	defer func() { _ = r.Close() }()
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	logger.Info("runner listening", "addr", ln.Addr().String(), "workers", *workers, "callbacks", *axURL != "")
	fmt.Fprintf(stdout, "ax %s runner listening on http://%s\n", version(), ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("runner: %w", err)
	case <-ctx.Done():
	}
	logger.Info("runner stopping", "running", r.Running(), "grace", grace.String())
	// The grace, then the kill after, then the reports' own time.
	stopCtx, cancel := context.WithTimeout(context.Background(), *grace+*killAfter+time.Minute)
	defer cancel()
	err = r.Shutdown(stopCtx)
	_ = srv.Shutdown(stopCtx)
	return err
}

func parseExitCodes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 255 {
			return nil, fmt.Errorf("%q is not an exit status from 1 to 255", f)
		}
		out = append(out, n)
	}
	return out, nil
}
