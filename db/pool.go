package db

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pools are ax's two connection pools on one database.
type Pools struct {
	// Main serves River, the scheduler and the API.
	Main *pgxpool.Pool
	// Delivery serves only the deliver and alert workers' state
	// transitions (service.Deliveries).
	Delivery *pgxpool.Pool
}

// Close closes both pools.
func (p Pools) Close() {
	if p.Delivery != nil {
		p.Delivery.Close()
	}
	if p.Main != nil {
		p.Main.Close()
	}
}

// mainSessionParams returns the main pool's session parameters (set on each new
// connection); a parameter of the database URL wins.
//
// Every statement is planned for the table sizes of the moment
// (plan_cache_mode force_custom_plan) instead of a cached generic plan.
// River's fetch is the reason: a generic plan made while river_job was
// empty (an idle server polls every 20 ms) is a sequential scan joined by a
// nested loop, and it stays cached until the next ANALYZE of river_job —
// minutes in which a burst of 10,000 due jobs was fetched at 20 ms and more
// per query instead of about 1. These statements are few or batched, so
// planning each costs little.
//
// ax's hot tables (river_job, executions, tasks due soon) are in memory: a
// random page read costs about a sequential one. With the default
// random_page_cost of 4 the planner joined River's fetch to a sequential
// scan of river_job (12 of its 15 ms) instead of 44 primary-key lookups.
func mainSessionParams() map[string]string {
	return map[string]string{"plan_cache_mode": "force_custom_plan", "random_page_cost": "1.1"}
}

// deliverySessionParams returns the delivery pool's session parameters, on top of
// the main pool's; they win over the URL (set after it, on each new
// connection).
//
// Every transition but one commits durably (the server's
// synchronous_commit, on by default): a transition that ends an execution,
// or hands it to another job, must be on disk before the worker returns
// and River marks the job that carried it finished. River's completer
// retries through a database outage, so a job can be marked completed
// after a crash that lost an asynchronous commit made before it; the
// execution would then stay unfinished with no job left to finish it.
// The one exception is the batched start (StartPendingDeliveries), which
// commits without waiting for the flush: losing it leaves the execution
// pending or running under a job that is still running, and the job's
// next run sends it again with the same idempotency key; the durable
// commit of its outcome flushes the start with it.
//
// The statements are primary-key lookups and updates, thousands a second in
// small batches, where planning a custom plan cost five times the
// execution (1 ms against 0.2 ms). So they keep generic plans, and
// sequential scans, hash and merge joins are ruled out: a plan made on an
// empty table is then the same as one made on a large table.
//
// No statement there waits for a lock longer than lock_timeout (the
// batched start skips locked rows; the batched success and the row-by-row
// path wait for rows that an API command or a single delivery holds for
// milliseconds): a statement that times out fails, and River runs its
// delivery again.
func deliverySessionParams() map[string]string {
	return map[string]string{
		"plan_cache_mode": "force_generic_plan",
		"enable_seqscan":  "off", "enable_hashjoin": "off", "enable_mergejoin": "off",
		"lock_timeout": "10s",
	}
}

// ConnectTimeoutDefault bounds a connection attempt unless the database URL
// sets connect_timeout.
const ConnectTimeoutDefault = 10 * time.Second

// OpenPools opens the main and delivery pools on url with maxConns
// connections between them (three fifths main, two fifths delivery),
// unless the URL sets pool_max_conns, which then applies to each. A
// connection attempt gives up after ConnectTimeoutDefault unless the URL
// sets connect_timeout.
func OpenPools(ctx context.Context, url string, maxConns int) (Pools, error) {
	main, err := pgxpool.ParseConfig(url)
	if err != nil {
		return Pools{}, err
	}
	main.MaxConnIdleTime = time.Minute
	if !strings.Contains(url, "connect_timeout") {
		// Without it a connection attempt to a host that does not answer
		// waits for the kernel to give up (minutes), and so does every
		// request that needs a connection; with it they fail with
		// ErrUnavailable.
		main.ConnConfig.ConnectTimeout = ConnectTimeoutDefault
	}
	delivery := main.Copy()
	mainParams := map[string]string{}
	for name, value := range mainSessionParams() {
		if _, set := main.ConnConfig.RuntimeParams[name]; !set {
			mainParams[name] = value
		}
	}
	deliveryParams := maps.Clone(mainParams)
	maps.Copy(deliveryParams, deliverySessionParams())
	main.AfterConnect = setParams(mainParams)
	delivery.AfterConnect = setParams(deliveryParams)
	if !strings.Contains(url, "pool_max_conns") {
		main.MaxConns = int32(max(2, maxConns-maxConns*2/5)) // bounded by config validation
		delivery.MaxConns = int32(max(2, maxConns*2/5))      // bounded by config validation
	}
	var p Pools
	if p.Main, err = pgxpool.NewWithConfig(ctx, main); err != nil {
		return Pools{}, wrap("open database pool", err)
	}
	if p.Delivery, err = pgxpool.NewWithConfig(ctx, delivery); err != nil {
		p.Close()
		return Pools{}, wrap("open database pool", err)
	}
	return p, nil
}

// setParams sets session parameters on a new connection with set_config
// rather than as startup parameters, which PgBouncer refuses unless told to
// ignore them (and then drops). Behind PgBouncer ax needs session pooling
// anyway: River LISTENs.
func setParams(params map[string]string) func(context.Context, *pgx.Conn) error {
	names, values := make([]string, 0, len(params)), make([]string, 0, len(params))
	for name, value := range params {
		names, values = append(names, name), append(values, value)
	}
	return func(ctx context.Context, conn *pgx.Conn) error {
		if len(names) == 0 {
			return nil
		}
		_, err := conn.Exec(ctx, `SELECT set_config(name, value, false) FROM unnest($1::text[], $2::text[]) AS p(name, value)`,
			names, values)
		if err != nil {
			return wrap("set session parameters", err)
		}
		return nil
	}
}
