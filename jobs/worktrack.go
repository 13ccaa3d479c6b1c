package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// WorkTracker knows which River jobs this process is working, and which
// it finished lately: a River worker middleware. A job River shows running
// under this process's client that is neither is stranded — its end was
// never recorded, because River's completer gave up while the database
// was unreachable — and would otherwise wait for River's rescuer
// (service.Replicas.ReleaseStranded).
type WorkTracker struct {
	river.MiddlewareDefaults

	mu      sync.Mutex
	running map[int64]int
	ended   map[int64]time.Time
}

var _ rivertype.WorkerMiddleware = (*WorkTracker)(nil)

// NewWorkTracker returns an empty tracker; pass it to NewRiverClient
// (WorkerDeps.Work) and NewReplica (ReplicaConfig.Work).
func NewWorkTracker() *WorkTracker {
	return &WorkTracker{running: map[int64]int{}, ended: map[int64]time.Time{}}
}

// Work implements rivertype.WorkerMiddleware.
func (w *WorkTracker) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	defer w.track(job.ID)()
	return doInner(ctx)
}

// track records job id as worked from now until the returned func is
// called (River's workers, and the jobs EventRunner claims).
func (w *WorkTracker) track(id int64) func() {
	w.mu.Lock()
	w.running[id]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.running[id]--; w.running[id] <= 0 {
			delete(w.running, id)
		}
		w.ended[id] = time.Now()
	}
}

// Busy returns the jobs being worked and those whose work ended within
// the last recent (River may still be recording their end), and forgets
// older ends.
func (w *WorkTracker) Busy(recent time.Duration) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int64, 0, len(w.running)+len(w.ended))
	for id := range w.running {
		out = append(out, id)
	}
	for id, at := range w.ended {
		if time.Since(at) > recent {
			delete(w.ended, id)
			continue
		}
		out = append(out, id)
	}
	return out
}
