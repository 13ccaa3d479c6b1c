package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/openapi/receiver"
	"github.com/axhq/ax/openapi/receiver/pgstore"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newStore(t *testing.T, retention time.Duration) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, "", retention)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	return s, pool
}

func TestClaimCompleteRelease(t *testing.T) {
	ctx := context.Background()
	s, pool := newStore(t, time.Hour)
	step := func(id string, want receiver.Claim) {
		t.Helper()
		if c, err := s.Claim(ctx, id); err != nil || c != want {
			t.Fatalf("Claim(%s) = %v, %v; want %v", id, c, err, want)
		}
	}
	step("a", receiver.Claimed)
	step("a", receiver.InProgress)
	if err := s.Complete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	step("a", receiver.Done)
	if err := s.Release(ctx, "a"); err != nil { // a done id stays done
		t.Fatal(err)
	}
	step("a", receiver.Done)
	step("b", receiver.Claimed)
	if err := s.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	step("b", receiver.Claimed)

	// A lapsed claim (the claimer died) and an expired done id are taken over.
	if _, err := pool.Exec(ctx, `UPDATE webhook_receipts SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	step("a", receiver.Claimed)
	step("b", receiver.Claimed)
	if _, err := pool.Exec(ctx, `UPDATE webhook_receipts SET expires_at = now() - interval '1 second' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_receipts`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("rows left %d, %v", left, err)
	}
}

// TestConcurrentClaims: of many replicas racing for one id, exactly one
// claims it.
func TestConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, time.Hour)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Claim(ctx, "race")
			if err != nil {
				t.Error(err)
				return
			}
			if c == receiver.Claimed {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("%d claims won, want 1", claimed)
	}
}

func TestNewRefusesOddTableNames(t *testing.T) {
	for _, name := range []string{"x; DROP TABLE y", `"q"`, "a.b.c"} {
		if _, err := pgstore.New(nil, name, time.Hour); err == nil {
			t.Errorf("New accepted %q", name)
		}
	}
	if _, err := pgstore.New(nil, "public.receipts", time.Hour); err != nil {
		t.Error(err)
	}
}
