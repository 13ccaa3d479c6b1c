package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestServeDebugServesProfiles(t *testing.T) {
	t.Parallel()
	addr, stop, err := serveDebug(t.Context(), "127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer stop()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/debug/pprof/goroutine?debug=1", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "goroutine profile")

	_, _, err = serveDebug(t.Context(), "not an address", slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "AX_DEBUG_ADDR")
}
