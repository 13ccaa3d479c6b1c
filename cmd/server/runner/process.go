package runner

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Output is what a run produced: the completion's output in callback mode,
// the response body in response mode.
type Output struct {
	// ExitCode is the process's exit status; -1 when a signal ended it or
	// it never started.
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	StdoutTail string `json:"stdout_tail"`
	StderrTail string `json:"stderr_tail"`
}

// result is a finished run: its output, and when it failed, why and
// whether another attempt may succeed.
type result struct {
	Output
	Err       string
	Retryable bool
}

func (r result) ok() bool { return r.Err == "" }

// WaitDelayDefault bounds how long a run waits, once its process has
// exited, for stdout and stderr to close (a background child may hold
// them open).
const WaitDelayDefault = 2 * time.Second

// stopReason says why a run's process group was ended early.
type stopReason int

const (
	stopTimeout  stopReason = iota + 1 // its timeout passed
	stopShutdown                       // the runner is shutting down
	stopCancel                         // ax says the execution was cancelled
)

// execute runs c in its own process group and waits for it; a value on
// stop (or the timeout) ends the whole group: SIGTERM, then SIGKILL after
// killAfter. env is the complete environment.
func execute(c Command, env []string, timeout, killAfter time.Duration, retryCodes []int, stop <-chan stopReason) result {
	start := time.Now()
	var stdout, stderr tail
	// No context: a context's end would kill the leader alone; the group is
	// ended by killGroup.
	cmd := exec.Command(c.Program(), c.args()...) //nolint:noctx // ended by killGroup, not a context
	cmd.Env, cmd.Dir = env, c.Dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = WaitDelayDefault
	finish := func(res result) result {
		res.DurationMS = time.Since(start).Milliseconds()
		res.StdoutTail, res.StderrTail = stdout.String(), stderr.String()
		return res
	}
	if err := cmd.Start(); err != nil {
		// A missing program or a bad dir does not mend itself.
		return finish(result{Output: Output{ExitCode: -1}, Err: "start: " + err.Error()})
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		why     stopReason
		waitErr error
	)
	select {
	case waitErr = <-done:
	case <-timer.C:
		why = stopTimeout
	case why = <-stop:
	}
	if why != 0 {
		waitErr = killGroup(pgid, killAfter, done)
	}
	res := result{Output: Output{ExitCode: cmd.ProcessState.ExitCode()}}
	switch {
	case why == stopTimeout:
		res.Err, res.Retryable = fmt.Sprintf("timed out after %s; the process group was killed", timeout), true
	case why == stopShutdown:
		res.Err, res.Retryable = "the runner shut down while the command ran; the process group was killed", true
	case why == stopCancel:
		res.Err = "the execution was cancelled; the process group was killed"
	case signalled(cmd):
		res.Err, res.Retryable = "killed by signal: "+cmd.ProcessState.Sys().(syscall.WaitStatus).Signal().String(), true
	case res.ExitCode != 0:
		res.Err = fmt.Sprintf("exit status %d", res.ExitCode)
		res.Retryable = slices.Contains(retryCodes, res.ExitCode)
	case errors.Is(waitErr, exec.ErrWaitDelay):
		// Exit 0, but a child kept the output open: a success; the tail
		// may lack what the child wrote later.
	case waitErr != nil:
		res.Err, res.Retryable = "wait: "+waitErr.Error(), true
	}
	return finish(res)
}

// killGroup ends process group pgid: SIGTERM, then, after killAfter or as
// soon as the leader has gone, SIGKILL, so that a child ignoring SIGTERM
// goes too. It returns the leader's Wait error.
func killGroup(pgid int, killAfter time.Duration, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(killAfter)
	defer grace.Stop()
	var (
		err    error
		waited bool
	)
	select {
	case err = <-done:
		waited = true
		// The leader went on SIGTERM; give the rest of the group the
		// same grace before SIGKILL.
		select {
		case <-grace.C:
		case <-groupGone(pgid):
		}
	case <-grace.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !waited {
		err = <-done
	}
	return err
}

// groupGone closes when no process is left in group pgid (polled).
func groupGone(pgid int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for syscall.Kill(-pgid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return ch
}

func signalled(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// environ is the environment a command gets: base, then ax's facts about
// the delivery, then the payload's env (a later entry wins).
func environ(base []string, facts map[string]string, env map[string]string) []string {
	out := make([]string, 0, len(base)+len(facts)+len(env))
	out = append(out, base...)
	for _, m := range []map[string]string{facts, env} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, k+"="+m[k])
		}
	}
	return dedupEnv(out)
}

// dedupEnv keeps the last entry of each name, in first-seen order.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := env[:0:0]
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}

// BaseEnv is the runner's own environment without its AX_* variables (its
// configuration and secrets are not the commands' business).
func BaseEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "AX_") {
			out = append(out, kv)
		}
	}
	return out
}
