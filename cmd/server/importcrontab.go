package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/cmd/server/crontab"
	"github.com/axhq/ax/service/schedule"
)

const importCrontabUsage = `usage: ax import-crontab FILE --endpoint NAME [--timezone TZ] [--prefix NAME] [flags]

Prints ax apply documents (YAML) for a crontab: one Task per schedule line,
calling the endpoint NAME (an ax runner) with the line's command as
{"shell": "…"}. FILE "-" reads stdin; /etc/crontab and /etc/cron.d/* are
read in the system format (a user field), or give --system. Lines ax cannot
run (@reboot, a command with an unescaped %, anything that is not a crontab
line) are listed with their numbers on stderr and nothing is printed.

  ax import-crontab /etc/crontab --endpoint runner | ax apply -f -

flags:
`

// importCrontab is `ax import-crontab`.
func importCrontab(args []string, getenv func(string) string, stdin io.Reader, stdout, notices io.Writer) error {
	fs := flag.NewFlagSet("import-crontab", flag.ContinueOnError)
	var errBuf strings.Builder
	fs.SetOutput(&errBuf)
	endpoint := fs.String("endpoint", "", "the name of the runner's endpoint the tasks call (required)")
	tz := fs.String("timezone", "", "the time zone of the lines before any CRON_TZ (default: this machine's)")
	prefix := fs.String("prefix", "", "a prefix for every task name (e.g. the host's name)")
	system := fs.Bool("system", false, "the system format, with a user field (the default for /etc/crontab and /etc/cron.d)")
	timeout := fs.Duration("timeout", time.Hour, "each command's limit (payload timeout_s)")
	response := fs.Bool("response", false, "wait for each command within the request (completion mode response) instead of callbacks")
	// The file may come before the flags (ax import-crontab FILE --endpoint …).
	var file string
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		_, err := fmt.Fprint(stdout, importCrontabUsage+errBuf.String())
		return err
	} else if err != nil {
		return fmt.Errorf("import-crontab: %s", strings.TrimSpace(errBuf.String()))
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("import-crontab: unexpected argument %q", fs.Arg(0))
	}
	switch {
	case file == "":
		return errors.New("import-crontab: give the crontab FILE (- for stdin)")
	case *endpoint == "":
		return errors.New("import-crontab: --endpoint NAME is required: the endpoint of the ax runner that will run the commands")
	}
	in := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("import-crontab: %w", err)
		}
		defer func() { _ = f.Close() }()
		in = f
		clean := filepath.Clean(file)
		*system = *system || clean == "/etc/crontab" || filepath.Dir(clean) == "/etc/cron.d"
	}
	zone := *tz
	if zone == "" {
		zone = localZone(getenv)
		if zone == "" {
			zone = "UTC"
			fmt.Fprintln(notices, "import-crontab: this machine's time zone is unknown: reading the times as UTC (give --timezone)")
		}
	}
	docs, err := crontab.Parse(in, crontab.Options{
		Endpoint: *endpoint, Timezone: zone, Prefix: *prefix, System: *system,
		Timeout: *timeout, Response: *response,
	})
	if err != nil {
		return fmt.Errorf("import-crontab: %s: nothing printed:\n%w", file, err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("import-crontab: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("import-crontab: %w", err)
	}
	fmt.Fprintf(notices, "import-crontab: %d tasks\n", len(docs))
	_, err = stdout.Write(buf.Bytes())
	return err
}

// localZone is this machine's IANA time zone name: TZ, /etc/timezone, or
// where /etc/localtime points; "" when none says.
func localZone(getenv func(string) string) string {
	candidates := []string{strings.TrimPrefix(getenv("TZ"), ":")}
	if b, err := os.ReadFile("/etc/timezone"); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(b)))
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			candidates = append(candidates, name)
		}
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := schedule.LoadZone(c); err == nil {
			return c
		}
	}
	return ""
}
