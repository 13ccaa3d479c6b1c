package db_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// bufferCounter is a db.Querier that runs each statement for real and,
// before that, under EXPLAIN (ANALYZE, BUFFERS), adding up the shared
// buffers its plan touched (hit or read). It is for statements that
// change nothing in the case measured: an Exec would run twice.
type bufferCounter struct {
	*pgxpool.Pool
	t       *testing.T
	buffers float64
}

func (b *bufferCounter) count(ctx context.Context, sql string, args ...any) {
	var plan []struct {
		Plan map[string]any `json:"Plan"`
	}
	var raw []byte
	require.NoError(b.t, b.Pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&raw))
	require.NoError(b.t, json.Unmarshal(raw, &plan))
	for _, p := range plan {
		hit, _ := p.Plan["Shared Hit Blocks"].(float64)
		read, _ := p.Plan["Shared Read Blocks"].(float64)
		b.buffers += hit + read
	}
}

func (b *bufferCounter) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b.count(ctx, sql, args...)
	return b.Pool.Query(ctx, sql, args...)
}

func (b *bufferCounter) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b.count(ctx, sql, args...)
	return b.Pool.Exec(ctx, sql, args...)
}

// TestShareQueuesReadsNoLoneBacklog: a backlog of one tenant alone (a
// burst's) has nothing to share, and ShareQueues finds that out without
// reading its jobs: the buffers its statements touch do not grow when
// that tenant's due jobs grow from 1,000 to 21,000 (reading them all, as
// it once did on every pass, touched hundreds more). A second tenant's
// single due job is then found, and the queue shared.
func TestShareQueuesReadsNoLoneBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	insert := func(tenant string, n int) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at, priority)
			SELECT jsonb_build_object('tenants', jsonb_build_array($1::text), 'executions', g::text), 'deliver_batch', 5,
				'deliver', 'available', now() - interval '10 seconds' + g * interval '1 microsecond', 1
			FROM generate_series(1, $2::int) g`, tenant, n)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `VACUUM ANALYZE river_job`)
		require.NoError(t, err)
	}
	share := func() (int64, float64) {
		t.Helper()
		b := &bufferCounter{Pool: pool, t: t}
		n, err := db.ShareQueues(ctx, b, []string{"deliver"}, 200*time.Millisecond)
		require.NoError(t, err)
		return n, b.buffers
	}

	insert("a", 1000)
	n, small := share()
	require.Zero(t, n, "one tenant: nothing to share")
	insert("a", 20000)
	n, large := share()
	require.Zero(t, n, "one tenant: nothing to share")
	require.LessOrEqual(t, large, small+10, "the reads do not grow with the lone tenant's backlog (%v buffers, then %v)", small, large)

	insert("b", 1)
	n, err := db.ShareQueues(ctx, pool, []string{"deliver"}, 200*time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, n, "a second tenant: shared")
}
