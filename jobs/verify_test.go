package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/endpoint"
)

// verifierDir holds verify.mjs and package.json, which pins the reference
// library's version; node_modules is installed there on demand.
const verifierDir = "testdata"

// TestReferenceVerifier sends real webhooks and checks them with the
// Standard Webhooks reference library (npm standardwebhooks), as a
// receiver would.
func TestReferenceVerifier(t *testing.T) {
	t.Parallel()

	node := installVerifier(t)

	oldSecret, err := service.GenerateSecret()
	require.NoError(t, err)
	newSecret, err := service.GenerateSecret()
	require.NoError(t, err)
	otherSecret, err := service.GenerateSecret()
	require.NoError(t, err)
	oldKey, err := service.ParseSecret(oldSecret)
	require.NoError(t, err)
	newKey, err := service.ParseSecret(newSecret)
	require.NoError(t, err)

	srv, got := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	send := func(keys [][]byte, body string) received {
		req := testRequest(srv.URL, nil)
		req.Keys = keys
		req.Body = []byte(body)
		res := s.Send(t.Context(), req)
		require.NoError(t, res.Err)
		return <-got
	}

	single := send([][]byte{newKey}, `{"b":1,  "a":2, "s":"caf\u00e9 ü \ud83d\ude00"}`)
	// An endpoint's test request (POST /v1/endpoints/{id}/test) is signed
	// as a delivery is.
	probe := s.Probe(t.Context(), endpoint.TestRequest{
		Endpoint: endpoint.Endpoint{URL: srv.URL + "/hook", Method: http.MethodPost, Timeout: 5 * time.Second},
		Keys:     [][]byte{newKey}, ID: service.NewID(), Body: []byte(`{"test":true}`),
	})
	require.Empty(t, probe.Error)
	tested := <-got
	require.Equal(t, "true", tested.Header.Get("X-Ax-Test"))
	rotated := send([][]byte{newKey, oldKey}, `{"order":42,"items":[1,2,3]}`)
	require.Len(t, strings.Fields(rotated.Header.Get("Webhook-Signature")), 2)

	tests := []struct {
		name   string
		secret string
		r      received
		body   []byte // nil: as received
		want   string
	}{
		{"single key", newSecret, single, nil, "ok"},
		{"single key, other secret", otherSecret, single, nil, "No matching signature found"},
		{"rotation, new key", newSecret, rotated, nil, "ok"},
		{"rotation, old key", oldSecret, rotated, nil, "ok"},
		{"rotation, other secret", otherSecret, rotated, nil, "No matching signature found"},
		{"re-serialised body", newSecret, single, []byte(`{"b":1,"a":2,"s":"café ü 😀"}`), "No matching signature found"},
		{"endpoint test request", newSecret, tested, nil, "ok"},
		{"endpoint test request, other secret", otherSecret, tested, nil, "No matching signature found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			body := tt.body
			if body == nil {
				body = tt.r.Body
			}
			require.Equal(t, tt.want, runVerifier(t, node, tt.secret, tt.r.Header, body))
		})
	}
}

// runVerifier runs verify.mjs and returns its one-line verdict.
func runVerifier(t *testing.T, node, secret string, header http.Header, body []byte) string {
	t.Helper()
	headers := map[string]string{
		"webhook-id":        header.Get("Webhook-Id"),
		"webhook-timestamp": header.Get("Webhook-Timestamp"),
		"webhook-signature": header.Get("Webhook-Signature"),
	}
	headersJSON, err := json.Marshal(headers)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.mjs", secret, string(headersJSON))
	cmd.Dir = verifierDir
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if err != nil && (!errors.As(err, &exitErr) || exitErr.ExitCode() != 1) {
		require.NoError(t, err, "node verify.mjs: %s", stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// installVerifier returns the path of node, installing the pinned
// standardwebhooks package into testdata/node_modules when it is missing.
// The install goes to a fresh directory first and is renamed into place,
// so concurrent test processes never see a half-installed tree.
func installVerifier(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "Node.js (18 or later) must be installed: the reference verifier test runs testdata/verify.mjs with node")

	want := pinnedVerifierVersion(t)
	if installedVerifierVersion() == want {
		return node
	}
	npm, err := exec.LookPath("npm")
	require.NoError(t, err, "npm must be installed to fetch the standardwebhooks package for the reference verifier test")

	tmp, err := os.MkdirTemp(verifierDir, ".npm-install-")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-save", "--no-audit", "--no-fund", "--ignore-scripts",
		"--prefix", tmp, "standardwebhooks@"+want)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm install standardwebhooks@%s: %s", want, out)

	dest := filepath.Join(verifierDir, "node_modules")
	if err := os.Rename(filepath.Join(tmp, "node_modules"), dest); err != nil && installedVerifierVersion() != want {
		// Another version is in the way: move it aside and retry.
		require.NoError(t, os.Rename(dest, filepath.Join(tmp, "stale")))
		require.NoError(t, os.Rename(filepath.Join(tmp, "node_modules"), dest))
	}
	require.Equal(t, want, installedVerifierVersion(), "standardwebhooks in %s", dest)
	return node
}

func pinnedVerifierVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(verifierDir, "package.json"))
	require.NoError(t, err)
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(raw, &pkg))
	v := pkg.Dependencies["standardwebhooks"]
	require.NotEmpty(t, v, "testdata/package.json must pin standardwebhooks")
	return v
}

// installedVerifierVersion returns the installed standardwebhooks version,
// or "" when there is none.
func installedVerifierVersion() string {
	raw, err := os.ReadFile(filepath.Join(verifierDir, "node_modules", "standardwebhooks", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(raw, &pkg) != nil {
		return ""
	}
	return pkg.Version
}
