package pgstore_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axhq/ax/openapi/receiver"
	"github.com/axhq/ax/openapi/receiver/pgstore"
)

// A receiver with several replicas shares its idempotency record in
// Postgres. (Compiled, not run: it needs your database.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, "webhook_receipts", 7*24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	if err := store.CreateTable(ctx); err != nil { // or put its statement in your migrations
		log.Fatal(err)
	}
	verifier, err := receiver.NewVerifier([]string{os.Getenv("AX_ENDPOINT_SECRET")})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/hooks/ax", verifier.Middleware(receiver.Once(store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent) // do the work; a non-2xx answer lets ax retry
	}))))
	log.Fatal(http.ListenAndServe(":8081", nil))
}
