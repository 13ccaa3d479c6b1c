// Package crontab turns a crontab into ax apply documents: one Task per
// schedule line, its command the payload of an `ax runner` endpoint.
//
// It reads the user crontab format (`m h dom mon dow command`) and, with
// System, the system one (/etc/crontab, /etc/cron.d: a user field before
// the command). Environment lines apply to the lines after them as cron
// applies them: CRON_TZ (or TZ) sets the time zone, SHELL the shell the
// command runs with, MAILTO becomes a label (ax's alerts replace mail),
// and every other NAME=value, PATH included, goes into the command's env.
// A line cron would run that ax cannot (@reboot, a command with an
// unescaped % that cron feeds to stdin) and a line that is not a crontab
// line are refused with its number; nothing is printed then.
package crontab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/axhq/ax/service/schedule"
)

// Options shape the documents.
type Options struct {
	// Endpoint is the name of the runner's endpoint the tasks call.
	Endpoint string
	// Timezone is the zone of lines before any CRON_TZ ("" is UTC).
	Timezone string
	// Prefix starts every task name ("" none).
	Prefix string
	// System reads the system format, with a user field.
	System bool
	// Timeout bounds each command (the payload's timeout_s); in callback
	// mode the completion timeout is a minute more, so the runner reports
	// a timeout before ax gives up on it.
	Timeout time.Duration
	// Response makes the tasks wait for the command within the request
	// (completion mode response) instead of the default callback mode.
	Response bool
}

// HeartbeatTimeout is the callback tasks' heartbeat timeout: a runner
// heartbeats at a third of it.
const HeartbeatTimeout = 2 * time.Minute

// Document is one apply document.
type Document struct {
	Kind string   `yaml:"kind" json:"kind"`
	Name string   `yaml:"name" json:"name"`
	Spec TaskSpec `yaml:"spec" json:"spec"`
}

// TaskSpec is a task's create body, its endpoint by name.
type TaskSpec struct {
	Endpoint   string            `yaml:"endpoint" json:"endpoint"`
	Schedule   Schedule          `yaml:"schedule" json:"schedule"`
	Payload    Payload           `yaml:"payload" json:"payload"`
	Completion Completion        `yaml:"completion" json:"completion"`
	Labels     map[string]string `yaml:"labels" json:"labels"`
}

// Schedule is a cron schedule.
type Schedule struct {
	Type     string `yaml:"type" json:"type"`
	Cron     string `yaml:"cron" json:"cron"`
	Timezone string `yaml:"timezone" json:"timezone"`
}

// Payload is the runner's command.
type Payload struct {
	Shell    string            `yaml:"shell,omitempty" json:"shell,omitempty"`
	Command  []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env      map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	TimeoutS int64             `yaml:"timeout_s" json:"timeout_s"`
}

// Completion is the task's completion mode.
type Completion struct {
	Mode               string `yaml:"mode" json:"mode"`
	TimeoutMS          int64  `yaml:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
	HeartbeatTimeoutMS int64  `yaml:"heartbeat_timeout_ms,omitempty" json:"heartbeat_timeout_ms,omitempty"`
}

// LineError is a refused line.
type LineError struct {
	Line   int
	Reason string
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Errors is every refused line of a crontab.
type Errors []LineError

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, le := range e {
		parts[i] = le.Error()
	}
	return strings.Join(parts, "\n")
}

// macros are the @ forms ax runs; @reboot is not a schedule.
var macros = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

var (
	envLine  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$`)
	userName = regexp.MustCompile(`^[a-z_][a-z0-9_.-]*\$?$`)
)

// Parse reads a crontab. It returns the documents in the file's order, or
// Errors naming every line it refuses.
func Parse(r io.Reader, opt Options) ([]Document, error) {
	if opt.Endpoint == "" {
		return nil, errors.New("the runner's endpoint name is required")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = time.Hour
	}
	st := state{tz: opt.Timezone, shell: "/bin/sh", env: map[string]string{}}
	if st.tz == "" {
		st.tz = "UTC"
	}
	if _, err := schedule.LoadZone(st.tz); err != nil {
		return nil, fmt.Errorf("time zone %q: %w", st.tz, err)
	}
	var (
		docs    []Document
		bad     Errors
		comment string
		names   = map[string]int{}
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			comment = ""
			continue
		case strings.HasPrefix(line, "#"):
			comment = strings.TrimSpace(strings.TrimLeft(line, "#"))
			continue
		}
		if m := envLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "@") {
			if err := st.set(m[1], unquote(m[2])); err != nil {
				bad = append(bad, LineError{n, err.Error()})
			}
			continue
		}
		doc, err := st.task(line, n, comment, opt)
		comment = ""
		if err != nil {
			bad = append(bad, LineError{n, err.Error()})
			continue
		}
		doc.Name = unique(names, doc.Name)
		docs = append(docs, doc)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return docs, nil
}

// state is what the environment lines so far set.
type state struct {
	tz, shell, mailto string
	env               map[string]string
}

func (s *state) set(name, value string) error {
	switch name {
	case "CRON_TZ", "TZ":
		if _, err := schedule.LoadZone(value); err != nil {
			return fmt.Errorf("%s=%s: not a time zone ax knows", name, value)
		}
		s.tz = value
		if name == "TZ" {
			s.env["TZ"] = value
		}
	case "SHELL":
		if !strings.HasPrefix(value, "/") {
			return fmt.Errorf("SHELL=%s: give the shell's absolute path", value)
		}
		s.shell = value
	case "MAILTO", "MAILFROM":
		if name == "MAILTO" {
			s.mailto = value
		}
	default:
		if value == "" {
			delete(s.env, name)
			return nil
		}
		s.env[name] = value
	}
	return nil
}

func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// task reads a schedule line.
func (s *state) task(line string, n int, comment string, opt Options) (Document, error) {
	fields := strings.Fields(line)
	var when string
	switch {
	case fields[0] == "@reboot":
		return Document{}, errors.New("@reboot runs at boot, not on a schedule: ax has no equivalent; start it with the machine's init system")
	case strings.HasPrefix(fields[0], "@"):
		if !macros[strings.ToLower(fields[0])] {
			return Document{}, fmt.Errorf("%s is not a cron macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)", fields[0])
		}
		when, fields = strings.ToLower(fields[0]), fields[1:]
	case len(fields) < 6:
		return Document{}, errors.New("not a crontab line: five time fields and a command, a macro (@daily …) and a command, or NAME=value")
	default:
		when, fields = strings.Join(fields[:5], " "), fields[5:]
	}
	labels := map[string]string{"source": "crontab", "crontab_line": strconv.Itoa(n)}
	if opt.System {
		if len(fields) < 2 || !userName.MatchString(fields[0]) {
			return Document{}, errors.New("a system crontab line needs a user name before the command")
		}
		labels["crontab_user"], fields = fields[0], fields[1:]
	}
	if len(fields) == 0 {
		return Document{}, errors.New("the line has no command")
	}
	cmd := commandText(line, fields)
	if i := unescapedPercent(cmd); i >= 0 {
		return Document{}, errors.New("the command holds an unescaped %, which cron turns into a newline and feeds the rest to stdin; write \\% for a literal %, or move the input into a script")
	}
	cmd = strings.ReplaceAll(cmd, `\%`, "%")
	if _, err := schedule.Parse(schedule.Spec{Type: "cron", Cron: when, Timezone: s.tz}, time.Now()); err != nil {
		var ve *schedule.ValidationError
		if errors.As(err, &ve) && len(ve.Fields) > 0 {
			return Document{}, fmt.Errorf("schedule %q: %s", when, ve.Fields[0].Message)
		}
		return Document{}, fmt.Errorf("schedule %q: %w", when, err)
	}
	if comment != "" {
		labels["comment"] = truncate(comment, 256)
	}
	if s.mailto != "" {
		labels["mailto"] = truncate(s.mailto, 256)
	}
	p := Payload{TimeoutS: int64(opt.Timeout / time.Second)}
	if s.shell == "/bin/sh" {
		p.Shell = cmd
	} else {
		p.Command = []string{s.shell, "-c", cmd}
	}
	if len(s.env) > 0 {
		p.Env = make(map[string]string, len(s.env))
		for k, v := range s.env {
			p.Env[k] = v
		}
	}
	c := Completion{Mode: "callback", TimeoutMS: (opt.Timeout + time.Minute).Milliseconds(), HeartbeatTimeoutMS: HeartbeatTimeout.Milliseconds()}
	if opt.Response {
		c = Completion{Mode: "response"}
	}
	return Document{Kind: "Task", Name: taskName(opt.Prefix, cmd), Spec: TaskSpec{
		Endpoint: opt.Endpoint,
		Schedule: Schedule{Type: "cron", Cron: when, Timezone: s.tz},
		Payload:  p, Completion: c, Labels: labels,
	}}, nil
}

// commandText is the rest of line from the first of fields on, its inner
// spacing kept.
func commandText(line string, fields []string) string {
	rest := line
	// Skip the tokens before the command, in order.
	all := strings.Fields(line)
	for _, tok := range all[:len(all)-len(fields)] {
		i := strings.Index(rest, tok)
		rest = rest[i+len(tok):]
	}
	return strings.TrimSpace(rest)
}

// unescapedPercent returns the index of the first % not preceded by a
// backslash, or -1.
func unescapedPercent(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '%':
			return i
		}
	}
	return -1
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// nameMax leaves room for a uniqueness suffix within a task name's 128.
const nameMax = 60

// wrappers are commands that say nothing of the job: a name skips them.
var wrappers = map[string]bool{
	"exec": true, "nice": true, "ionice": true, "env": true, "sudo": true, "flock": true,
	"timeout": true, "/usr/bin/env": true,
}

// redirection matches a word that redirects (>, >>, 2>, &>, <, 2>&1 …).
var redirection = regexp.MustCompile(`^(\d*|&)?[<>]`)

// taskName derives a stable, valid name from a command: the base names of
// its first meaningful words (up to three, up to the first redirection or
// shell operator after a word was found), lower-cased, other characters
// as dashes.
func taskName(prefix, cmd string) string {
	var parts []string
	words := strings.Fields(cmd)
	for i := 0; i < len(words) && len(parts) < 3; i++ {
		w := words[i]
		switch {
		case w == "cd" && i+1 < len(words):
			i++ // its directory
			continue
		case w == "&&" || w == "||" || w == ";" || w == "|" || strings.HasSuffix(w, ";"):
			if len(parts) > 0 {
				i = len(words)
			}
			continue
		case redirection.MatchString(w):
			if len(parts) > 0 {
				i = len(words)
			} else if w == ">" || w == ">>" || w == "<" {
				i++ // its file
			}
			continue
		case wrappers[w], strings.HasPrefix(w, "-"), strings.ContainsAny(w, "=$`{}()"):
			continue
		}
		if b := slug(path.Base(strings.Trim(w, `"'`))); b != "" {
			parts = append(parts, b)
		}
	}
	name := strings.Join(parts, "-")
	if prefix != "" {
		name = slug(prefix) + "-" + name
	}
	name = strings.Trim(truncate(name, nameMax), "-._")
	if name == "" {
		name = "job"
	}
	return name
}

// slug keeps lower-case letters, digits, dots and underscores; any other
// run of characters becomes one dash.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-._")
}

// unique returns name, or name-2, name-3 … when taken.
func unique(seen map[string]int, name string) string {
	seen[name]++
	if seen[name] == 1 {
		return name
	}
	for k := seen[name]; ; k++ {
		candidate := name + "-" + strconv.Itoa(k)
		if seen[candidate] == 0 {
			seen[candidate] = 1
			return candidate
		}
	}
}
