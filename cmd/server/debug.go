package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// serveDebug serves Go's profiles (net/http/pprof) on their own listener,
// which AX_DEBUG_ADDR must keep private (e.g. 127.0.0.1:6060): they have
// no authentication and reveal the program's internals. It returns the
// address it listens on and a function that closes the listener.
func serveDebug(ctx context.Context, addr string, logger *slog.Logger) (string, func(), error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("AX_DEBUG_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// Profiles and traces take as long as asked (?seconds=30).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug server", "error", err.Error())
		}
	}()
	logger.Info("serving Go profiles", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
