package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A timestamp renders exactly as time.Time does, and reads back.
func TestTimestampMarshalsLikeTime(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		time.Date(2026, 12, 1, 9, 6, 5, 123456000, time.UTC),
		time.Date(2026, 12, 1, 9, 6, 5, 0, time.UTC),
		time.Date(2026, 3, 8, 3, 0, 0, 0, time.FixedZone("", -4*3600)),
	} {
		want, err := json.Marshal(struct {
			T time.Time  `json:"t"`
			P *time.Time `json:"p"`
		}{at, &at})
		require.NoError(t, err)
		got, err := json.Marshal(struct {
			T timestamp  `json:"t"`
			P *timestamp `json:"p"`
		}{stamp(at), stampPtr(&at)})
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got))
		require.Equal(t, string(want), string(got))

		var back struct {
			T timestamp `json:"t"`
		}
		require.NoError(t, json.Unmarshal(got, &back))
		require.True(t, at.Equal(time.Time(back.T)))
	}
	require.Nil(t, stampPtr(nil))
}
