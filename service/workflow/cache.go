package workflow

import (
	"context"
	"fmt"
	"sync"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Cache keeps parsed versions (immutable) by tenant, workflow and
// version: a version's document holds every node's payload, and reading
// and parsing it again for each advance of a run costs more than the rest
// of the advance (BenchmarkWorkflowAdvance). Each value that advances runs
// owns one; its zero value is ready, and a nil *Cache reads through.
type Cache struct {
	mu sync.Mutex
	m  map[string]*Graph
}

// cacheMax bounds the versions a cache holds: past it, it starts over.
const cacheMax = 10_000

// Load returns the parsed version, from the cache or read with q.
func (c *Cache) Load(ctx context.Context, q db.Querier, tenant, workflowID string, version int32) (*Graph, error) {
	key := fmt.Sprintf("%s\x00%s\x00%d", tenant, workflowID, version)
	if c != nil {
		c.mu.Lock()
		g := c.m[key]
		c.mu.Unlock()
		if g != nil {
			return g, nil
		}
	}
	doc, err := db.GetWorkflowVersion(ctx, q, tenant, workflowID, version)
	if err != nil {
		return nil, errs.Store(err, "load workflow version")
	}
	g, err := ParseGraph(string(doc))
	if err != nil {
		return nil, err
	}
	if c != nil {
		c.mu.Lock()
		if c.m == nil || len(c.m) > cacheMax {
			c.m = map[string]*Graph{}
		}
		c.m[key] = g
		c.mu.Unlock()
	}
	return g, nil
}
