package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axhq/ax/cmd/server/apply"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/openapi/client"
)

// BenchmarkApply1000Tasks applies 1,000 tasks (and their endpoint) to a
// fresh tenant of an in-process server, then applies the same files
// again (no change, no write); it reports both as seconds per apply
// (create-s, noop-s). make bench-apply runs it.
func BenchmarkApply1000Tasks(b *testing.B) {
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(b), "AX_JWT_SECRET": testSecret, "AX_TENANT_API_RPS": "100000",
		"AX_HTTP_ADDR": "127.0.0.1:0", "AX_LOG_LEVEL": "error", "AX_SHUTDOWN_TIMEOUT": "5s", "PATH": os.Getenv("PATH"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := new(syncBuffer)
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, envOf(env), out) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	var base string
	for deadline := time.Now().Add(time.Minute); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := listenRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			b.Fatal("the server did not start")
		}
	}
	var docs strings.Builder
	docs.WriteString("kind: Endpoint\nname: billing\nspec: {url: https://hooks.example.com/ax}\n")
	for i := range 1000 {
		fmt.Fprintf(&docs, "---\nkind: Task\nname: task-%04d\nspec:\n  endpoint: billing\n  schedule: {type: cron, cron: \"%d %d * * *\", timezone: Europe/Paris}\n"+
			"  payload: {n: %d}\n  retry: {max_attempts: 3}\n  labels: {team: billing}\n", i, i%60, i%24, i)
	}
	file := filepath.Join(b.TempDir(), "tasks.yaml")
	if err := os.WriteFile(file, []byte(docs.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	var create, noop time.Duration
	for i := 0; b.Loop(); i++ {
		tok := new(syncBuffer)
		if err := run(ctx, []string{"token", "--tenant", fmt.Sprintf("bench-%d", i)}, envOf(env), tok); err != nil {
			b.Fatal(err)
		}
		api, err := client.New(base, strings.TrimSpace(tok.String()))
		if err != nil {
			b.Fatal(err)
		}
		for _, want := range []int{1001, 0} {
			start := time.Now()
			// Load is part of an apply: read and check the files.
			ds, err := apply.Load(file, nil)
			if err != nil {
				b.Fatal(err)
			}
			sum, err := apply.Apply(ctx, api, ds, apply.Options{}, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			if sum.Writes() != want {
				b.Fatalf("%d writes, want %d", sum.Writes(), want)
			}
			if want > 0 {
				create += time.Since(start)
			} else {
				noop += time.Since(start)
			}
		}
	}
	b.ReportMetric(create.Seconds()/float64(b.N), "create-s")
	b.ReportMetric(noop.Seconds()/float64(b.N), "noop-s")
	b.ReportMetric(0, "ns/op")
}
