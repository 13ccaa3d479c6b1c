package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrettyJSON: a JSON value is indented and cut at jsonShortMax on a
// character boundary, whole in Full; bytes that are not JSON are shown as
// they are.
func TestPrettyJSON(t *testing.T) {
	t.Parallel()
	v := prettyJSON([]byte(`{"a":[1,2]}`))
	require.Equal(t, jsonView{Short: "{\n  \"a\": [\n    1,\n    2\n  ]\n}", Full: "{\n  \"a\": [\n    1,\n    2\n  ]\n}", Size: 29}, v)

	require.Equal(t, "not json {", prettyJSON([]byte("not json {")).Full)

	long := `"` + strings.Repeat("é", jsonShortMax) + `"`
	v = prettyJSON([]byte(long))
	require.True(t, v.Truncated)
	require.Equal(t, long, v.Full)
	require.Equal(t, len(long), v.Size)
	require.True(t, strings.HasSuffix(v.Short, "\n…"))
	short := strings.TrimSuffix(v.Short, "\n…")
	require.LessOrEqual(t, len(short), jsonShortMax)
	require.True(t, strings.HasPrefix(long, short))
	require.NotContains(t, v.Short, "\uFFFD", "cut on a character boundary")
	require.Equal(t, short+"é", long[:len(short)+2])
}
