package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestInternalErrorsDoNotLeak: an unexpected error or a panic becomes a 500
// problem with a generic detail; the real error is only in the log, under
// the request id the client sees.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e := echo.New()
	e.HTTPErrorHandler = handleError
	e.Use(requestLogger(slog.New(slog.NewJSONHandler(&logs, nil)), newHTTPMetrics(prometheus.NewRegistry())), recoverPanics())
	e.GET("/boom", func(echo.Context) error { return errors.New("pq: password authentication failed for user secret-user") })
	e.GET("/panic", func(echo.Context) error { panic("nil map write in handler") })

	for _, path := range []string{"/boom", "/panic"} {
		logs.Reset()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set(echo.HeaderXRequestID, "req-123")
		e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusInternalServerError, rec.Code)
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		require.NotContains(t, rec.Body.String(), "secret-user")
		require.NotContains(t, rec.Body.String(), "nil map")
		var p problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Equal(t, 500, p.Status)
		require.Contains(t, p.Detail, "request id")
		require.Contains(t, logs.String(), "request failed")
		if path == "/boom" {
			require.Contains(t, logs.String(), "secret-user", "the real error is logged")
		} else {
			require.Contains(t, logs.String(), "nil map write", "the panic is logged")
		}
	}
}
