package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axhq/ax/cmd/server/runner"
)

// BenchmarkShortCommands: 200 deliveries at once, each running /bin/true
// through the whole path (signature, allowlist, process group, output);
// it reports completions per second.
//
//	go test ./cmd/server/runner -run '^$' -bench ShortCommands -benchtime 10x
func BenchmarkShortCommands(b *testing.B) {
	const concurrent = 200
	f := newFixture(b, func(c *runner.Config) { c.Workers = concurrent })
	var (
		seq  atomic.Int64
		fail atomic.Int64
	)
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				a, err := f.send(context.Background(), fmt.Sprintf("msg_%d", seq.Add(1)), map[string]any{"command": []string{"/bin/true"}})
				if err != nil || a.status != http.StatusOK {
					fail.Add(1)
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	if n := fail.Load(); n > 0 {
		b.Fatalf("%d of %d deliveries failed", n, seq.Load())
	}
	b.ReportMetric(float64(seq.Load())/elapsed.Seconds(), "completions/s")
}
