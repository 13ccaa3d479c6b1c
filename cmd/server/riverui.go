package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/db"
)

// newRiverUI returns River's web UI for api.Config.RiverUI, or nil when
// AX_RIVERUI=false. The api package puts it behind operator-only
// authentication. Job args carry ids only (service.DeliverArgs,
// service.AlertArgs), and the job list hides them by default anyway.
func newRiverUI(ctx context.Context, cfg config, pool *db.Pool, logger *slog.Logger) (http.Handler, error) {
	if !cfg.RiverUI {
		return nil, nil
	}
	// An insert-only client: the UI reads and updates jobs and queues
	// through its driver, and works no queue.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river UI client: %w", err)
	}
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints:                riverui.NewEndpoints(client, nil),
		Logger:                   logger.With("component", "riverui"),
		Prefix:                   api.RiverUIPrefix,
		JobListHideArgsByDefault: true,
	})
	if err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	// The handler's background services count jobs every few seconds (an
	// exact count of river_job every 30 s to 15 min): start them when an
	// operator first opens the UI, not in every replica forever. They stop
	// with ctx, when the server shuts down.
	start := sync.OnceFunc(func() {
		if err := h.Start(ctx); err != nil {
			logger.Error("start river UI", "error", err.Error())
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start()
		h.ServeHTTP(w, r)
	}), nil
}
