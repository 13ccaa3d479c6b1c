package receiver

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Claim is what a Store says about a webhook-id.
type Claim int

const (
	// Claimed: this call claimed the id; process the delivery, then Complete
	// (or Release on failure).
	Claimed Claim = iota + 1
	// InProgress: another delivery of the same id is being processed right
	// now (ax's retry raced a slow first attempt). Answer a status ax
	// retries (Once answers 503 with Retry-After), so that it tries again
	// later: ax takes most 4xx, 409 among them, as final.
	InProgress
	// Done: the id was processed already. Answer 2xx and do nothing.
	Done
)

// DefaultLease bounds how long a claim stays InProgress without Complete or
// Release (the process that claimed it may have died). It matches the
// longest attempt timeout ax allows.
const DefaultLease = 5 * time.Minute

// Store remembers which webhook-ids were processed, so a redelivery (ax
// retries until it sees a 2xx) runs its side effects once.
//
// Claim records id as in progress when it is unknown (or its claim has
// lapsed) and returns Claimed; otherwise it returns InProgress or Done.
// Complete marks a claimed id done for the store's retention. Release
// forgets an unfinished claim whose processing failed, so the next delivery
// runs again (a done id stays done).
type Store interface {
	Claim(ctx context.Context, id string) (Claim, error)
	Complete(ctx context.Context, id string) error
	Release(ctx context.Context, id string) error
}

// MemoryStore is a Store in process memory: right for one replica and for
// tests; several replicas need a shared store (pgstore). Done ids are kept
// for the retention given to NewMemoryStore: keep it longer than the
// retry span of the tasks that call you (a day is a safe default).
type MemoryStore struct {
	mu        sync.Mutex
	retention time.Duration
	lease     time.Duration
	now       func() time.Time
	ids       map[string]entry
	sweep     time.Time
}

type entry struct {
	done    bool
	expires time.Time
}

// NewMemoryStore returns a MemoryStore that forgets a done id retention
// after it was completed, and an unfinished claim after DefaultLease.
func NewMemoryStore(retention time.Duration) *MemoryStore {
	return &MemoryStore{retention: retention, lease: DefaultLease, now: time.Now, ids: make(map[string]entry)}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, id string) (Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !now.Before(s.sweep) { // drop expired ids now and then, not on every call
		for k, e := range s.ids {
			if !now.Before(e.expires) {
				delete(s.ids, k)
			}
		}
		s.sweep = now.Add(min(s.retention, s.lease) / 4)
	}
	if e, ok := s.ids[id]; ok && now.Before(e.expires) {
		if e.done {
			return Done, nil
		}
		return InProgress, nil
	}
	s.ids[id] = entry{expires: now.Add(s.lease)}
	return Claimed, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, id string) error {
	s.mu.Lock()
	s.ids[id] = entry{done: true, expires: s.now().Add(s.retention)}
	s.mu.Unlock()
	return nil
}

// Release implements Store. A done id stays done.
func (s *MemoryStore) Release(_ context.Context, id string) error {
	s.mu.Lock()
	if e, ok := s.ids[id]; ok && !e.done {
		delete(s.ids, id)
	}
	s.mu.Unlock()
	return nil
}

// Len returns how many unexpired ids (done or in progress) the store holds.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, now := 0, s.now()
	for _, e := range s.ids {
		if now.Before(e.expires) {
			n++
		}
	}
	return n
}

// InProgressRetryAfter is the Retry-After (seconds) Once sends with the 503
// for a webhook-id being processed.
const InProgressRetryAfter = 10

// Once wraps next so that each webhook-id is processed once. A delivery
// whose id is Done gets 200 without calling next; one whose id is
// InProgress gets 503 with Retry-After (InProgressRetryAfter seconds), a
// status ax retries. When next answers with a
// status below 300 the id is completed; any other status, or a panic,
// releases it so that ax's retry runs it again. Put Once inside
// Verifier.Middleware, so that only verified ids are claimed. A store error
// answers 503 (ax retries).
func Once(store Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderID)
		if id == "" {
			http.Error(w, "missing webhook-id header", http.StatusBadRequest)
			return
		}
		claim, err := store.Claim(r.Context(), id)
		switch {
		case err != nil:
			http.Error(w, "idempotency store unavailable", http.StatusServiceUnavailable)
			return
		case claim == Done:
			w.WriteHeader(http.StatusOK)
			return
		case claim == InProgress:
			w.Header().Set("Retry-After", strconv.Itoa(InProgressRetryAfter))
			http.Error(w, "this webhook-id is being processed; try again later", http.StatusServiceUnavailable)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		finished := false
		defer func() {
			ctx := context.WithoutCancel(r.Context())
			if finished && rec.status < 300 {
				_ = store.Complete(ctx, id)
			} else {
				_ = store.Release(ctx, id)
			}
		}()
		next.ServeHTTP(rec, r)
		finished = true
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	return r.ResponseWriter.Write(p)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
