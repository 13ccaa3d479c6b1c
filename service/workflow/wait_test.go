package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/workflow"
)

// TestCheckKey: what a wait_for node's rendered key may be: a string, or
// a number or boolean as its JSON text, of 1 to event.KeyMax printable
// characters.
func TestCheckKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ out, key, err string }{
		{out: `"order-7"`, key: "order-7"},
		{out: `42`, key: "42"},
		{out: `true`, key: "true"},
		{out: `""`, err: `rendered "": an event's key is 1 to`},
		{out: `"a\u0007b"`, err: "printable characters"},
		{out: `{"a":1}`, err: `rendered {"a":1}: want a string`},
		{out: `null`, err: "rendered null: want a string"},
		{out: `nope`, err: "rendered no value"},
		{out: `"` + strings.Repeat("k", event.KeyMax+1) + `"`, err: "printable characters"},
	} {
		key, err := workflow.CheckKey([]byte(tt.out))
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.out)
			continue
		}
		require.NoError(t, err, tt.out)
		require.Equal(t, tt.key, key)
	}
}

// TestRunIfVerdict: true fires, false skips (as JSON booleans or as
// strings, spaces trimmed); anything else fails the node, saying what it
// rendered.
func TestRunIfVerdict(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		out        string
		fire, skip bool
		reason     string
	}{
		{out: `true`, fire: true},
		{out: `false`, skip: true},
		{out: `" true "`, fire: true},
		{out: `"false"`, skip: true},
		{out: `"yes"`, reason: `run_if rendered "yes": want true or false`},
		{out: `1`, reason: "run_if rendered 1: want true or false"},
		{out: `{`, reason: "run_if rendered no value: "},
	} {
		fire, skip, reason := workflow.RunIfVerdict([]byte(tt.out))
		require.Equal(t, tt.fire, fire, tt.out)
		require.Equal(t, tt.skip, skip, tt.out)
		require.True(t, strings.HasPrefix(reason, tt.reason) && (tt.reason == "") == (reason == ""), "%s: %q", tt.out, reason)
	}
}

// TestTruncateText cuts on a character boundary, never inside one.
func TestTruncateText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", workflow.TruncateText("short", 10))
	require.Equal(t, "ab…", workflow.TruncateText("abcdef", 2))
	require.Equal(t, "a…", workflow.TruncateText("aé", 2)) // é is 2 bytes: cut before it
}
