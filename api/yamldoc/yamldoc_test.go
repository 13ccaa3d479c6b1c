package yamldoc

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestKeepTimestamps: unquoted dates and times stay the strings written,
// at any depth; other scalars keep their types.
func TestKeepTimestamps(t *testing.T) {
	t.Parallel()
	var n yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("dates: [2026-12-25, 2027-01-01]\nstart_at: 2026-12-31T16:00:00Z\nn: 3\nok: true\n"), &n))
	KeepTimestamps(&n)
	var v map[string]any
	require.NoError(t, n.Decode(&v))
	require.Equal(t, map[string]any{
		"dates": []any{"2026-12-25", "2027-01-01"}, "start_at": "2026-12-31T16:00:00Z", "n": 3, "ok": true,
	}, v)
}
