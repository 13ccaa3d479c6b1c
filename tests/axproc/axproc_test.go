package axproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// buildFake builds testdata/fakeax, with -race when race.
func buildFake(t *testing.T, race bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakeax")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(t.Context(), "go", append(args, "./testdata/fakeax")...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// TestRaceIsReported: a race detector's report in the process's log, and
// its exit status 66, are what Race reports; a clean run reports nothing.
func TestRaceIsReported(t *testing.T) {
	t.Parallel()
	bin := buildFake(t, true)
	for _, tc := range []struct {
		name string
		race bool
		stop syscall.Signal
	}{
		{"race, stopped", true, syscall.SIGTERM},
		{"race, killed", true, syscall.SIGKILL},
		{"clean", false, syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"PATH=" + os.Getenv("PATH")}
			if tc.race {
				env = append(env, "FAKEAX_RACE=1")
			}
			var log strings.Builder
			logged := make(chan struct{})
			p, err := Start(t.Context(), Config{Binary: bin, Env: env, Log: writerFunc(func(b []byte) {
				log.Write(b)
				if strings.Contains(log.String(), "fakeax: ready") {
					select {
					case <-logged:
					default:
						close(logged)
					}
				}
			})})
			require.NoError(t, err)
			require.Equal(t, "http://127.0.0.1:1", p.Base())
			<-logged
			require.NoError(t, p.Stop(tc.stop, 30*time.Second))
			if !tc.race {
				require.Empty(t, p.Race())
				require.Zero(t, p.ExitCode())
				return
			}
			require.Contains(t, p.Race(), "1 data race report(s)")
			require.Contains(t, p.Race(), raceMarker)
			if tc.stop == syscall.SIGTERM {
				require.Equal(t, RaceExitCode, p.ExitCode(), "a race binary exits 66 after a race")
			}
		})
	}
}

// TestRaceExitCodeAlone: exit status 66 without a report in the log (a
// GORACE log_path elsewhere) is still reported.
func TestRaceExitCodeAlone(t *testing.T) {
	t.Parallel()
	bin := buildFake(t, true)
	env := []string{"PATH=" + os.Getenv("PATH"), "FAKEAX_RACE=1", "GORACE=log_path=" + filepath.Join(t.TempDir(), "race")}
	p, err := Start(t.Context(), Config{Binary: bin, Env: env})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(filepath.Dir(strings.TrimPrefix(env[2], "GORACE=log_path=")), "race*"))
		return len(m) > 0
	}, 30*time.Second, 10*time.Millisecond, "the race detector wrote its report")
	require.NoError(t, p.Stop(syscall.SIGTERM, 30*time.Second))
	require.Equal(t, RaceExitCode, p.ExitCode())
	require.Contains(t, p.Race(), "status 66")
}

// TestRaceWatchSplitWrites: a marker split over writes is found once.
func TestRaceWatchSplitWrites(t *testing.T) {
	t.Parallel()
	log := "noise\n==================\n" + raceMarker + "\nWrite at 0x1 by goroutine 7:\n  main.main()\n" +
		"==================\nmore\n" + raceMarker + "\nRead at 0x2\n"
	for _, size := range []int{1, 2, 7, 17, 18, 19, len(log)} {
		var w raceWatch
		for i := 0; i < len(log); i += size {
			_, err := w.Write([]byte(log[i:min(i+size, len(log))]))
			require.NoError(t, err)
		}
		r := w.report()
		require.True(t, strings.HasPrefix(r, "2 data race report(s); the first:\n"+raceMarker+"\nWrite at 0x1"), "writes of %d: %q", size, r)
		require.True(t, strings.HasSuffix(r, "Read at 0x2\n"), "writes of %d: %q", size, r)
	}
	var w raceWatch
	_, _ = w.Write([]byte("WARNING: DATA RAC"))
	_, _ = w.Write([]byte("X\n"))
	require.Empty(t, w.report())
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) {
	f(append([]byte{}, b...))
	return len(b), nil
}
