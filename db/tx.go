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
// error of this package. When ctx carries a transaction on pool (WithTx),
// fn runs in a savepoint of it instead: released when fn returns nil,
// rolled back to otherwise, and committed only with that transaction.
func InTx(ctx context.Context, pool *Pool, fn func(Tx) error) error {
	if tx := txOf(ctx, pool); tx != nil {
		return translate(pgx.BeginFunc(ctx, tx, fn))
	}
	return translate(pgx.BeginFunc(ctx, pool, fn))
}

// ctxTx is the transaction a context carries, with the pool it is on.
type ctxTx struct {
	pool *Pool
	tx   Tx
}

type ctxTxKey struct{}

// WithTx returns ctx carrying tx, a transaction on pool, so that the work
// done with ctx on pool joins it: InTx runs in a savepoint of tx, and
// Using returns tx. A caller that wants everything a call writes to commit
// or roll back with tx (and with what it writes itself) passes such a ctx.
func WithTx(ctx context.Context, pool *Pool, tx Tx) context.Context {
	return context.WithValue(ctx, ctxTxKey{}, ctxTx{pool: pool, tx: tx})
}

// Using returns the transaction ctx carries on pool (WithTx), or pool
// itself: the Querier for a single statement that should join the
// caller's transaction when there is one and otherwise commit on its own.
func Using(ctx context.Context, pool *Pool) Querier {
	if tx := txOf(ctx, pool); tx != nil {
		return tx
	}
	return pool
}

func txOf(ctx context.Context, pool *Pool) Tx {
	if c, ok := ctx.Value(ctxTxKey{}).(ctxTx); ok && c.pool == pool {
		return c.tx
	}
	return nil
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
