package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/api/console"
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/pglocal"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/idempotency"
	"github.com/axhq/ax/service/metrics"
)

// database is an open pool and, in embedded mode, the cluster behind it.
type database struct {
	pool *db.Pool
	// deliveryPool serves only the deliver and alert workers' transitions
	// (db.OpenPools).
	deliveryPool *db.Pool
	cluster      *pglocal.Cluster
}

// openDatabase connects to AX_DATABASE_URL, or starts the embedded cluster.
func openDatabase(ctx context.Context, cfg config, getenv func(string) string, logger *slog.Logger) (*database, error) {
	d := &database{}
	url := cfg.DatabaseURL
	if cfg.Embedded() {
		if err := makeDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
		logger.Info("starting embedded postgres (AX_DATABASE_URL is not set)", "dir", filepath.Join(cfg.DataDir, "pg"))
		c, err := pglocal.Start(ctx, pglocal.Config{
			Dir: filepath.Join(cfg.DataDir, "pg"), Getenv: getenv, Durable: true, Logger: logger,
		})
		if err != nil {
			return nil, fmt.Errorf("embedded postgres: %w", err)
		}
		d.cluster = c
		if err := c.CreateDatabase(ctx, "ax"); err != nil {
			d.close(logger)
			return nil, err
		}
		url = c.URL("ax")
	}
	// pgxpool's default (the number of CPUs) would make hundreds of
	// delivery workers, the scheduler and the API queue for four
	// connections. A pool_max_conns in the URL wins.
	pools, err := db.OpenPools(ctx, url, cfg.DBMaxConns)
	if err != nil {
		d.close(logger)
		return nil, fmt.Errorf("AX_DATABASE_URL: %w", err)
	}
	d.pool, d.deliveryPool = pools.Main, pools.Delivery
	pool := d.pool
	pingCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		d.close(logger)
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return d, nil
}

// close closes the pool, then stops the embedded cluster.
func (d *database) close(logger *slog.Logger) {
	if d.deliveryPool != nil {
		d.deliveryPool.Close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.cluster.Stop(ctx); err != nil {
			logger.Error("stop embedded postgres", "error", err.Error())
		}
	}
}

func migrate(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		return errors.New("migrate takes no arguments")
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg.LogLevel)
	d, err := openDatabase(ctx, cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer d.close(logger)
	if err := db.Migrate(ctx, d.pool, logger); err != nil {
		return err
	}
	logger.Info("database is up to date")
	return nil
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return errors.New("serve takes no arguments; configure it with AX_* variables")
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if err := cfg.checkAuth(); err != nil {
		return err
	}
	logger := newLogger(cfg.LogLevel)
	if cfg.AdminIsOperator {
		logger.Warn("AX_ADMIN_IS_OPERATOR=true is deprecated and goes in the next release: tenant tokens with admin " +
			"still set their own tenant's limits, list the replicas and open River UI; mint operator tokens " +
			"(ax token --operator) and unset it")
	}
	setGCPercent(getenv)
	secret, err := jwtSecret(cfg)
	if err != nil {
		return err
	}
	auth, err := api.NewAuthenticator(api.AuthConfig{
		HMACSecret: secret, PublicKeys: cfg.JWTPublicKeys, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience,
	})
	if err != nil {
		return err
	}
	// Listen before the slow start-up steps so a bad address fails fast.
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("AX_HTTP_ADDR: %w", err)
	}
	defer ln.Close()

	d, err := openDatabase(ctx, cfg, getenv, logger)
	if err != nil {
		return err
	}
	defer d.close(logger)
	if cfg.AutoMigrate {
		if err := db.Migrate(ctx, d.pool, logger); err != nil {
			return err
		}
	} else if err := db.CheckMigrated(ctx, d.pool); err != nil {
		logger.Warn("the database is not migrated and AX_AUTO_MIGRATE=false; run `ax migrate`", "error", err.Error())
	}

	enq, err := service.NewEnqueuer(d.pool, logger)
	if err != nil {
		return err
	}
	sender := jobs.NewSender(jobs.SenderConfig{
		AllowPrivateTargets: cfg.AllowPrivateTargets, UserAgent: "ax/" + version(),
		MaxIdleConnsPerHost: idleConnsPerHost(cfg),
	})
	defer sender.Close()
	stats := service.NewStats(d.pool)
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		jobs.NewQueueCollector(stats.QueueDepths))
	axMetrics := metrics.New(registry)
	limits := service.NewLimits(d.pool, service.LimitsConfig{
		Defaults:  cfg.TenantDefaults,
		PermitTTL: cmp.Or(cfg.JobTimeout, jobs.JobTimeoutDefault) + time.Minute,
	})
	if err := limits.Refresh(ctx); err != nil {
		// Not migrated yet (AX_AUTO_MIGRATE=false) or the database is
		// away: the limits_refresh loop reads them again every second.
		logger.Warn("tenant limits not read yet; retrying in the background", "error", err.Error())
	}
	deliveries := service.NewDeliveries(d.deliveryPool, enq, service.DeliveriesConfig{Limits: limits, Metrics: axMetrics})
	registry.MustRegister(jobs.NewBatchCollector(deliveries.BatchStats))
	clock := new(service.DBClock)
	tasks := service.NewTasks(d.pool, service.TasksConfig{Clock: clock, Limits: limits, Metrics: axMetrics})
	backfills := service.NewBackfills(d.pool, enq, tasks)
	workflows := service.NewWorkflows(d.pool, enq, service.WorkflowsConfig{
		FetchAhead: jobs.RiverConfig{FetchPollInterval: cfg.FetchPollInterval}.FetchAhead(), Limits: limits, Metrics: axMetrics,
	})
	bg, err := startBackground(ctx, backgroundDeps{
		db: d, enq: enq, deliveries: deliveries, sender: sender, metrics: axMetrics,
		clock: clock, backfills: backfills, workflows: workflows, limits: limits,
	}, cfg, logger)
	if err != nil {
		return err
	}
	defer bg.stop()
	riverUI, err := newRiverUI(ctx, cfg, d.pool, logger)
	if err != nil {
		return err
	}

	tenants, endpoints, executions := service.NewTenants(d.pool), service.NewEndpoints(d.pool), service.NewExecutions(d.pool, enq,
		service.ExecutionsConfig{Metrics: axMetrics, FetchAhead: jobs.RiverConfig{FetchPollInterval: cfg.FetchPollInterval}.FetchAhead()})
	calendars, auditLog := service.NewCalendars(d.pool, tasks), audit.NewLog(d.pool)
	events := service.NewEventsRunBy(d.pool, enq, workflows, axMetrics, bg.events)
	handler := api.New(api.Config{
		Logger:        logger,
		Auth:          auth,
		Tenants:       tenants,
		Endpoints:     endpoints,
		Tasks:         tasks,
		Idempotency:   idempotency.New(d.pool),
		Executions:    executions,
		Deliveries:    deliveries,
		Calendars:     calendars,
		Backfills:     backfills,
		Workflows:     workflows,
		Events:        events,
		Ready:         func(ctx context.Context) error { return db.CheckMigrated(ctx, d.pool) },
		ClockDrift:    clock.Drift,
		EndpointProbe: sender.Probe,
		BodyLimit:     cfg.MaxBodyBytes,
		Version:       version(),
		Metrics:       registry,
		Stats:         stats,
		Audit:         auditLog,
		Replicas:      service.NewReplicas(d.pool),
		RiverUI:       riverUI,
		Limits:        limits,
		// Deprecated: the rule before operator tokens, for one release.
		AdminIsOperator: cfg.AdminIsOperator,
	})
	// The tenant web console, over the same services (api/console).
	console.Mount(handler, console.Config{
		Logger: logger, Auth: auth, Tenants: tenants, Endpoints: endpoints, Tasks: tasks, Executions: executions,
		Stats: stats, Backfills: backfills, Workflows: workflows, Limits: limits, EndpointProbe: sender.Probe,
		Calendars: calendars, Audit: auditLog, AdminIsOperator: cfg.AdminIsOperator,
		Events: events,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cfg.DebugAddr != "" {
		_, stopDebug, err := serveDebug(ctx, cfg.DebugAddr, logger)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	base := "http://" + displayAddr(ln.Addr())
	logger.Info("ax started", "addr", ln.Addr().String(), "version", version(), "embedded_postgres", cfg.Embedded(),
		"replica_id", bg.replica.ID())
	printBanner(stdout, base, cfg, secret)

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
	// Shut down in order: stop taking requests and let in-flight ones
	// finish; then (deferred) stop the background loops and River
	// (in-flight deliveries get the soft-stop timeout) in the runner's
	// reverse order, close the pool and stop the embedded Postgres.
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("http shutdown", "error", err.Error())
	}
	return nil
}

// setGCPercent applies ax's collector setting unless GOGC is set. ax's
// live heap is small (tens of MiB) and it allocates per delivery: at Go's
// default of 100 a collection ran several times a second and took a fifth
// of ax's CPU at 3,000 deliveries/s.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentDefault)
	}
}

// printBanner tells a newcomer where ax is and, in embedded mode, hands out
// a ready-to-use development token.
func printBanner(w io.Writer, base string, cfg config, secret []byte) {
	fmt.Fprintf(w, "ax %s listening on %s\n", version(), base)
	if !cfg.Embedded() || len(secret) == 0 {
		return
	}
	const ttl = 24 * time.Hour
	tok, err := api.IssueToken(secret, "demo", "ax-dev", api.AllScopes(), ttl, cfg.JWTIssuer, cfg.JWTAudience)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "\nDevelopment token (tenant \"demo\", all scopes, valid %s):\n%s\n\n", ttl, tok)
	fmt.Fprintf(w, "Try it:\n  curl -H \"Authorization: Bearer %s\" %s/v1/me\n\n", tok, base)
	// The data directory holds the secret: a token made with another one
	// is refused.
	fmt.Fprintf(w, "More tokens: AX_DATA_DIR=%s go run ./cmd/server token --tenant demo --ttl 8h\n", shellQuote(cfg.DataDir))
	fmt.Fprintf(w, "An operator's (any tenant's limits, the replicas, River UI): AX_DATA_DIR=%s go run ./cmd/server token --operator\n",
		shellQuote(cfg.DataDir))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return fmt.Sprintf("localhost:%d", tcp.Port)
	}
	return tcp.String()
}

// idleConnsPerHost keeps a connection alive per send slot of every lane
// per receiver host: a busy endpoint would otherwise pay a new (TLS)
// connection per delivery, and with both lanes sending to one host, a
// pool sized for one lane closed every connection beyond it after use.
func idleConnsPerHost(cfg config) int {
	main := cmp.Or(cfg.DeliverWorkers, jobs.DeliverWorkersDefault)
	return main + cmp.Or(cfg.BulkWorkers, main)
}
