package callback

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGrantsStayBounded: a full Grants drops the grants whose attempt's
// deadline passed before it keeps another, and keeps nothing more while
// every one it holds may still act; a grant past its deadline is not
// returned.
func TestGrantsStayBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	g := NewGrants(2)
	g.nowFunc = func() time.Time { return now }
	hash := func(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }
	has := func(s string) bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		k, ok := g.byHash[hash(s)]
		return ok && now.Before(k.until)
	}
	g.keep(hash("a"), Grant{ExecutionID: "a"}, now.Add(time.Second))
	g.keep(hash("b"), Grant{ExecutionID: "b"}, now.Add(time.Hour))
	require.Equal(t, 2, g.Len())

	now = now.Add(2 * time.Second)
	require.False(t, has("a"), "past its deadline")
	g.keep(hash("c"), Grant{ExecutionID: "c"}, now.Add(time.Hour))
	require.True(t, has("b"))
	require.True(t, has("c"))
	require.Equal(t, 2, g.Len(), "a's place went to c")

	g.keep(hash("d"), Grant{ExecutionID: "d"}, now.Add(time.Hour))
	require.False(t, has("d"), "full of grants that may still act")
	require.Equal(t, 2, g.Len())

	b := Grant{TokenHash: func() []byte { h := hash("b"); return h[:] }()}
	g.Forget(&b)
	require.False(t, has("b"))
	require.Equal(t, 1, g.Len())
}
