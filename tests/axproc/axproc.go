// Package axproc runs the ax binary for the black-box tests (tests/), the
// benchmark (tests/bench) and the soak (tests/soak): it builds the binary
// once, with or without the race detector, starts it with an environment,
// copies its log, waits until it listens, stops it by a signal with a
// deadline, and reports how it exited and whether the race detector found
// a data race in it.
package axproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// mainPackage is the server's main package.
const mainPackage = "github.com/axhq/ax/cmd/server"

// RaceExitCode is the status a binary built with -race exits with when
// the race detector found a data race (GORACE's exitcode, 66 unless set).
const RaceExitCode = 66

// ReadyTimeoutDefault bounds the wait for the banner when Config leaves
// ReadyTimeout unset.
const ReadyTimeoutDefault = 90 * time.Second

// Build compiles the server into path, with the race detector when race.
// The go command's output goes to stderr.
func Build(ctx context.Context, path string, race bool) error {
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, mainPackage)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build ax: %w", err)
	}
	return nil
}

// Config is how to start one process.
type Config struct {
	// Binary is the executable (Build's path).
	Binary string
	// Args are its arguments ("serve"; none runs the default command).
	Args []string
	// Env is its whole environment, KEY=VALUE.
	Env []string
	// Log receives its stderr (ax's log), nil: none. LogFile, when set,
	// is created and receives it too, and is closed when the process ends.
	Log     io.Writer
	LogFile string
	// ParentDeathSignal is sent to it when this process's thread that
	// started it ends (Linux); 0: none.
	ParentDeathSignal syscall.Signal
	// ReadyTimeout bounds the wait for its banner; ReadyTimeoutDefault
	// when 0.
	ReadyTimeout time.Duration
}

// Proc is a running (or exited) ax process.
type Proc struct {
	cmd     *exec.Cmd
	base    string
	done    chan struct{}
	stopped atomic.Bool
	race    raceWatch

	mu     sync.Mutex
	stdout strings.Builder
}

// stdoutMax bounds what Stdout keeps (ax prints a banner there, no more).
const stdoutMax = 1 << 20

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// Start starts the process and waits until it prints the address it
// listens on. On an error the process is not running.
func Start(ctx context.Context, cfg Config) (*Proc, error) {
	cmd := exec.Command(cfg.Binary, cfg.Args...) //nolint:noctx // ended by signals (Stop, Kill), not by a context
	cmd.Env = cfg.Env
	if cfg.ParentDeathSignal != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: cfg.ParentDeathSignal}
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	logs := []io.Writer{&p.race}
	if cfg.Log != nil {
		logs = append(logs, cfg.Log)
	}
	var logFile *os.File
	if cfg.LogFile != "" {
		f, err := os.Create(cfg.LogFile)
		if err != nil {
			return nil, err
		}
		logFile = f
		logs = append(logs, f)
	}
	closeLog := func() {
		if logFile != nil {
			_ = logFile.Close()
		}
	}
	cmd.Stderr = io.MultiWriter(logs...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		closeLog()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, fmt.Errorf("start ax: %w", err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.stdout.Len() < stdoutMax {
				p.stdout.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		closeLog()
		close(p.done)
	}()
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = ReadyTimeoutDefault
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case p.base = <-listening:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("ax exited before listening (%s); stdout: %q", p.cmd.ProcessState, p.Stdout())
	case <-deadline.C:
		p.Kill()
		return nil, fmt.Errorf("ax did not print its address within %s", timeout)
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// Base is the URL it listens on (http://127.0.0.1:port).
func (p *Proc) Base() string { return p.base }

// Pid is its process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once it has exited and its output is copied.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether it has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitedEarly reports whether it exited without Stop or Kill.
func (p *Proc) ExitedEarly() bool { return p.Exited() && !p.stopped.Load() }

// Signal sends sig (SIGSTOP, SIGCONT … ; Stop and Kill also wait).
func (p *Proc) Signal(sig os.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Stop sends sig and waits up to grace for the process to exit; past it
// the process is killed and Stop returns an error saying so. It returns
// nil at once when the process has already exited.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) error {
	p.stopped.Store(true)
	if p.Exited() {
		return nil
	}
	if err := p.Signal(sig); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		p.Kill()
		return fmt.Errorf("ax (pid %d) did not exit within %s of %v; killed it", p.Pid(), grace, sig)
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Proc) Kill() {
	p.stopped.Store(true)
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// ExitCode is the exit status once it has exited: -1 while it runs or
// when a signal ended it.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Stdout returns what it printed on stdout so far.
func (p *Proc) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// Race returns the race detector's reports found in its log, or, when it
// exited with RaceExitCode without one there, a line saying so; "" when
// neither (a binary built without -race never reports one).
func (p *Proc) Race() string {
	if r := p.race.report(); r != "" {
		return r
	}
	if p.ExitCode() == RaceExitCode {
		return fmt.Sprintf("ax exited with status %d, the race detector's", RaceExitCode)
	}
	return ""
}

// raceMarker starts every report of the race detector.
const raceMarker = "WARNING: DATA RACE"

// raceReportMax bounds the report text kept.
const raceReportMax = 64 << 10

// raceWatch is a writer that finds the race detector's reports in a log
// written in pieces of any size.
type raceWatch struct {
	mu    sync.Mutex
	tail  []byte // the last len(raceMarker)-1 bytes, for a marker split across writes
	races int
	text  []byte // from the first marker on, up to raceReportMax
}

func (w *raceWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := make([]byte, 0, len(w.tail)+len(b))
	buf = append(append(buf, w.tail...), b...)
	// The tail is shorter than the marker: a marker counted here was not
	// counted before.
	w.races += strings.Count(string(buf), raceMarker)
	if w.text == nil {
		if i := strings.Index(string(buf), raceMarker); i >= 0 {
			w.text = append([]byte{}, buf[i:min(len(buf), i+raceReportMax)]...)
		}
	} else if room := raceReportMax - len(w.text); room > 0 {
		w.text = append(w.text, b[:min(len(b), room)]...)
	}
	keep := min(len(buf), len(raceMarker)-1)
	w.tail = append(w.tail[:0], buf[len(buf)-keep:]...)
	return len(b), nil
}

func (w *raceWatch) report() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.races == 0 {
		return ""
	}
	return fmt.Sprintf("%d data race report(s); the first:\n%s", w.races, w.text)
}
