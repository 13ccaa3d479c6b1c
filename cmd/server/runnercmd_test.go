package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/cmd/server/crontab"
)

// TestRunnerFlags: ax runner refuses to start without what it needs, and
// its --help lists its flags.
func TestRunnerFlags(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for args, want := range map[string]string{
		"":                                    "--secret (or AX_RUNNER_SECRETS) is required",
		"--secret " + secret:                  "at least one --allow pattern is required",
		"--secret " + secret + " --allow (":   `--allow "("`,
		"--secret whsec_!! --allow /bin/true": "not whsec_ followed by base64",
		"--secret " + secret + " --allow x --ax-url ftp://":      "not an http(s) URL",
		"--secret " + secret + " --allow x --retry-exit-codes 0": "not an exit status from 1 to 255",
	} {
		err := run(t.Context(), append([]string{"runner"}, strings.Fields(args)...), envOf(nil), new(syncBuffer))
		require.ErrorContains(t, err, want, args)
	}
	out := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"runner", "--help"}, envOf(nil), out))
	for _, flag := range []string{"usage: ax runner", "-allow", "-secret", "-workers", "-ax-url", "-state-dir", "-grace", "-retry-exit-codes"} {
		require.Contains(t, out.String(), flag)
	}
}

// TestImportCrontab: the documents are YAML an apply reads back; a bad
// line prints nothing and names its number.
func TestImportCrontab(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "crontab")
	require.NoError(t, os.WriteFile(file, []byte("CRON_TZ=Europe/Paris\n0 2 * * * /usr/local/bin/backup.sh\n@weekly /usr/local/bin/report\n"), 0o600))
	out := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"import-crontab", file, "--endpoint", "runner"}, envOf(nil), out))
	dec := yaml.NewDecoder(strings.NewReader(out.String()))
	var docs []crontab.Document
	for {
		var d crontab.Document
		if dec.Decode(&d) != nil {
			break
		}
		docs = append(docs, d)
	}
	require.Len(t, docs, 2)
	require.Equal(t, "backup.sh", docs[0].Name)
	require.Equal(t, crontab.Schedule{Type: "cron", Cron: "@weekly", Timezone: "Europe/Paris"}, docs[1].Spec.Schedule)

	require.NoError(t, os.WriteFile(file, []byte("@reboot /usr/local/bin/daemon\n"), 0o600))
	out = new(syncBuffer)
	err := run(t.Context(), []string{"import-crontab", file, "--endpoint", "runner"}, envOf(nil), out)
	require.ErrorContains(t, err, "line 1: @reboot")
	require.Empty(t, out.String())
	require.ErrorContains(t, run(t.Context(), []string{"import-crontab", file}, envOf(nil), out), "--endpoint NAME is required")
}
