package db

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is a connection pool on ax's database. Outside this package it is
// only handed on: to this package's functions, to River, to InTx. Code
// outside db/ runs no SQL of its own.
type Pool = pgxpool.Pool

// Tx is a transaction in progress (InTx), also the transaction type River
// inserts jobs in.
type Tx = pgx.Tx

// InTx runs fn in a transaction on pool: committed when fn returns nil,
// rolled back otherwise. The commit's error is translated like every
// error of this package.
func InTx(ctx context.Context, pool *Pool, fn func(Tx) error) error {
	return translate(pgx.BeginFunc(ctx, pool, fn))
}

// InReadSnapshot runs fn in a read-only REPEATABLE READ transaction (every
// statement sees the same snapshot) whose statements are cancelled after
// timeout (ErrQueryCanceled).
func InReadSnapshot(ctx context.Context, pool *Pool, timeout time.Duration, fn func(Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return translate(pgx.BeginTxFunc(ctx, pool, opts, func(tx Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`,
			strconv.FormatInt(timeout.Milliseconds(), 10)); err != nil {
			return wrap("set statement timeout", err)
		}
		return fn(tx)
	}))
}

// TaskChangedChannel is the NOTIFY channel a task write signals on, so
// that scheduler loops (ListenTaskChanges) wake at once.
const TaskChangedChannel = "ax_task_changed"

// NotifyTaskChanged signals TaskChangedChannel; in a transaction the
// notification goes out at commit.
func NotifyTaskChanged(ctx context.Context, q Querier) error {
	_, err := q.Exec(ctx, `SELECT pg_notify($1, '')`, TaskChangedChannel)
	return wrap("notify task change", err)
}

// ListenTaskChanges holds one connection of pool LISTENing on
// TaskChangedChannel and calls notify once when it starts listening (for
// changes made while nothing listened) and once per notification, until
// ctx ends or the connection fails; it returns why. The connection is
// taken out of the pool for good (it holds LISTEN state) and closed.
func ListenTaskChanges(ctx context.Context, pool *Pool, notify func()) error {
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		return wrap("listen for task changes", err)
	}
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+TaskChangedChannel); err != nil {
		return wrap("listen for task changes", err)
	}
	notify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return wrap("wait for task changes", err)
		}
		notify()
	}
}
