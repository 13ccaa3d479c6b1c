package jobs

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSendReadBody: a request with ReadBody (a workflow node's in
// response mode) gets its whole answer up to ResponseReadMax, beside the
// same excerpt as any other; a longer answer is too large and kept as
// none; without ReadBody (a task's delivery) only the excerpt is kept.
func TestSendReadBody(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		size     int
		readBody bool
		tooLarge bool
	}{
		{"small", 10, true, false},
		{"at the bound", ResponseReadMax, true, false},
		{"past the bound", ResponseReadMax + 1, true, true},
		{"a task's delivery", 10, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := strings.Repeat("a", tt.size)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, body)
			}))
			t.Cleanup(srv.Close)
			s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
			req := testRequest(srv.URL, mustKey(t))
			req.ReadBody = tt.readBody
			res := s.Send(t.Context(), req)
			require.NoError(t, res.Err)
			require.NoError(t, res.BodyErr)
			require.Equal(t, body[:min(tt.size, MaxResponseBytesDefault)], res.Excerpt, "the excerpt is the same either way")
			require.Equal(t, tt.tooLarge, res.BodyTooLarge)
			switch {
			case !tt.readBody, tt.tooLarge:
				require.Nil(t, res.Body)
			default:
				require.Equal(t, body, string(res.Body))
			}
		})
	}
}

// BenchmarkNewRequest: building and signing one delivery's request, as
// Send does before the transport takes it.
func BenchmarkNewRequest(b *testing.B) {
	s := NewSender(SenderConfig{AllowPrivateTargets: true})
	defer s.Close()
	r := testRequest("http://127.0.0.1:9/hook", bytes.Repeat([]byte{7}, 32))
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.newRequest(ctx, r, time.Unix(1_700_000_000, 0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendExcerpt: one delivery to a receiver answering 200 with a
// short body (the excerpt kept), on a kept-alive connection; the
// transport's own allocations included.
func BenchmarkSendExcerpt(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	s := NewSender(SenderConfig{AllowPrivateTargets: true})
	defer s.Close()
	r := testRequest(srv.URL, bytes.Repeat([]byte{7}, 32))
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, r); res.Err != nil || res.Excerpt != `{"ok":true}` {
			b.Fatal(res.Err, res.Excerpt)
		}
	}
}

// BenchmarkReadBody: keeping the excerpt of a short response body and of
// one longer than the excerpt (drained up to ResponseReadMax).
func BenchmarkReadBody(b *testing.B) {
	s := NewSender(SenderConfig{AllowPrivateTargets: true})
	defer s.Close()
	for _, size := range []int{11, 3 * MaxResponseBytesDefault} {
		body := strings.Repeat("a", size)
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := s.readBody(io.NopCloser(strings.NewReader(body))); len(got) != min(size, MaxResponseBytesDefault) {
					b.Fatal(len(got))
				}
			}
		})
	}
}

// TestSendExcerptAfterALongerOne: the buffer an excerpt is read into is
// kept for the next response; a shorter body after a longer one is kept
// alone, nothing of the previous one after it.
func TestSendExcerptAfterALongerOne(t *testing.T) {
	t.Parallel()
	bodies := []string{strings.Repeat("z", 2*MaxResponseBytesDefault), "ok", "", "a\x00b"}
	var next atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, bodies[next.Add(1)-1])
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	for _, want := range []string{strings.Repeat("z", MaxResponseBytesDefault), "ok", "", "ab"} {
		res := s.Send(t.Context(), testRequest(srv.URL, key))
		require.NoError(t, res.Err)
		require.Equal(t, want, res.Excerpt)
	}
	// Without the requests between (goroutines, a pool's other Ps): the
	// buffer is the one the previous read used.
	for range 3 {
		require.Len(t, s.readBody(io.NopCloser(strings.NewReader(bodies[0]))), MaxResponseBytesDefault)
		require.Equal(t, "ok", s.readBody(io.NopCloser(strings.NewReader("ok"))))
	}
}
