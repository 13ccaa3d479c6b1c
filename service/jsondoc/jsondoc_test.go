package jsondoc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// HasNUL finds U+0000 in a string or a key of JSON text, and only
// there: an escaped backslash before u0000 is the text \u0000.
func TestJSONHasNUL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`{"a":"x\u0000"}`:            true,
		`{"\u0000":1}`:               true,
		`[1,{"b":["\u0000"]}]`:       true,
		`"\u0000"`:                   true,
		`{"a":"\\u0000"}`:            false,
		`{"a":"\\\u0000"}`:           true,
		`{"a":"u0000","b":"\u00a0"}`: false,
		`{}`:                         false,
		``:                           false,
		`{"a":"\u0000`:               false, // invalid JSON: refused as such elsewhere
		`not json \u0000`:            false,
	} {
		require.Equal(t, want, HasNUL([]byte(raw)), raw)
	}
}
