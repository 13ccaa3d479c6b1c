package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadyzWarnsOfClockDrift: a replica whose clock drifts from the
// database's stays ready and says so in /readyz's body.
func TestReadyzWarnsOfClockDrift(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		drift time.Duration
		warn  bool
		want  []string
	}{
		{drift: 40 * time.Millisecond},
		{
			drift: 350 * time.Millisecond, warn: true,
			want: []string{"this replica's clock is 350 ms ahead of the database's (more than 200 ms): check its time synchronisation"},
		},
		{
			drift: -1200 * time.Millisecond, warn: true,
			want: []string{"this replica's clock is 1200 ms behind the database's (more than 200 ms): check its time synchronisation"},
		},
	} {
		a := newAPI(t, &apiOpts{ClockDrift: func() (time.Duration, bool) { return tc.drift, tc.warn }})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, a.srv.URL+"/readyz", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body struct {
			Status   string   `json:"status"`
			Warnings []string `json:"warnings"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "ready whatever the drift")
		assert.Equal(t, "ready", body.Status)
		assert.Equal(t, tc.want, body.Warnings, "drift %s", tc.drift)
	}
}
