package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Shell is the program a "shell" payload runs, as `/bin/sh -c SCRIPT`; the
// --allow patterns must admit it for shell payloads to run.
const Shell = "/bin/sh"

// TimeoutMax bounds a payload's timeout_s (a day).
const TimeoutMax = 24 * time.Hour

// Command is a webhook's payload: what to run.
type Command struct {
	// Argv is run as is (no shell); Script, when set, runs as /bin/sh -c
	// Script. Exactly one of the two is given.
	Argv   []string
	Script string
	// Env adds to (or overrides) the environment the runner passes on.
	Env map[string]string
	// Dir is the working directory ("" is the runner's).
	Dir string
	// Timeout ends the process group (0: the runner's default).
	Timeout time.Duration
}

// Program is what --allow is matched against: argv[0], or Shell.
func (c Command) Program() string {
	if c.Script != "" {
		return Shell
	}
	return c.Argv[0]
}

// args returns the program's arguments.
func (c Command) args() []string {
	if c.Script != "" {
		return []string{"-c", c.Script}
	}
	return c.Argv[1:]
}

// payload is the JSON a task sends to the runner.
type payload struct {
	Command  []string          `json:"command"`
	Shell    *string           `json:"shell"`
	Env      map[string]string `json:"env"`
	Dir      string            `json:"dir"`
	TimeoutS *float64          `json:"timeout_s"`
}

// ParseCommand reads a payload; its error says what is wrong in the words
// of the payload's fields. Unknown fields are refused, so that a misspelt
// "timeout" does not run a command without its limit.
func ParseCommand(body []byte) (Command, error) {
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Command{}, fmt.Errorf("the payload is not a runner command: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Command{}, errors.New("the payload is not a runner command: it holds more than one JSON value")
	}
	var c Command
	switch {
	case p.Shell != nil && p.Command != nil:
		return Command{}, errors.New("give either command or shell, not both")
	case p.Shell != nil:
		if strings.TrimSpace(*p.Shell) == "" {
			return Command{}, errors.New("shell is empty")
		}
		c.Script = *p.Shell
	case len(p.Command) == 0:
		return Command{}, errors.New(`command (["program", "arg", …]) or shell ("script") is required`)
	default:
		if p.Command[0] == "" {
			return Command{}, errors.New("command[0], the program, is empty")
		}
		c.Argv = p.Command
	}
	for _, s := range append(append([]string{c.Script, p.Dir}, c.Argv...), envPairs(p.Env)...) {
		if strings.ContainsRune(s, 0) {
			return Command{}, errors.New("the command, its dir and env cannot hold a NUL character")
		}
	}
	for k := range p.Env {
		if k == "" || strings.ContainsRune(k, '=') {
			return Command{}, fmt.Errorf("env name %q is not a valid variable name", k)
		}
	}
	c.Env, c.Dir = p.Env, p.Dir
	if p.TimeoutS != nil {
		d := time.Duration(*p.TimeoutS * float64(time.Second))
		if *p.TimeoutS <= 0 || d > TimeoutMax {
			return Command{}, fmt.Errorf("timeout_s must be above 0 and at most %d", int(TimeoutMax.Seconds()))
		}
		c.Timeout = d
	}
	return c, nil
}

func envPairs(env map[string]string) []string {
	out := make([]string, 0, 2*len(env))
	for k, v := range env {
		out = append(out, k, v)
	}
	return out
}

// Allowlist is the --allow patterns: a program runs only when one of them
// matches it in full.
type Allowlist []*regexp.Regexp

// ParseAllowlist compiles patterns, each anchored at both ends.
func ParseAllowlist(patterns []string) (Allowlist, error) {
	if len(patterns) == 0 {
		return nil, errors.New("at least one --allow pattern is required: the runner runs only the programs they match")
	}
	out := make(Allowlist, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return nil, fmt.Errorf("--allow %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Allows reports whether program matches a pattern in full.
func (a Allowlist) Allows(program string) bool {
	for _, re := range a {
		if re.MatchString(program) {
			return true
		}
	}
	return false
}

// TailMax is how much of stdout and of stderr an output keeps: the last
// 4 KiB of each.
const TailMax = 4 << 10

// tail keeps the last TailMax bytes written to it.
type tail struct {
	buf     []byte
	dropped bool
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= TailMax {
		t.dropped = t.dropped || len(t.buf) > 0 || len(p) > TailMax
		t.buf = append(t.buf[:0], p[len(p)-TailMax:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - TailMax; over > 0 {
		t.dropped = true
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the tail as valid UTF-8: a character cut by the 4 KiB
// boundary is dropped, and invalid bytes become U+FFFD.
func (t *tail) String() string {
	b := t.buf
	if t.dropped {
		for n := 0; n < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); n++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
