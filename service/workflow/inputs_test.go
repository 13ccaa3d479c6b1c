package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/workflow"
)

// TestResponseOutput: which 2xx bodies are a node's output, and why the
// others are not.
func TestResponseOutput(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body      string
		truncated bool
		output    string
		reason    string
	}{
		{body: ` {"rows": 7} `, output: `{"rows": 7}`},
		{body: `[1, 2]`, output: `[1, 2]`},
		{body: `"done"`, output: `"done"`},
		{body: `null`, output: `null`},
		{body: "", reason: "the response body is empty"},
		{body: " \n", reason: "the response body is empty"},
		{body: "ok", reason: "the response body is not JSON"},
		{body: `{"a":1}{"b":2}`, reason: "the response body is not JSON"},
		{body: `{"a":"\u0000"}`, reason: `the response body holds U+0000 (\u0000), which a JSON document cannot keep`},
		{body: `{}`, truncated: true, reason: "the response body is larger than 65536 bytes"},
		{body: `"` + strings.Repeat("x", callback.OutputMax) + `"`, reason: "the response body is larger than 65536 bytes"},
	} {
		out, reason := workflow.ResponseOutput([]byte(tt.body), tt.truncated)
		require.Equal(t, tt.output, string(out), "%.40q", tt.body)
		require.Equal(t, tt.reason, reason, "%.40q", tt.body)
	}
}
