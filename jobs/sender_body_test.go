package jobs

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// BenchmarkPrepare: checking, building and signing one delivery's
// request and writing it as a plain-http endpoint's is sent, as Send does
// before the connection takes it.
func BenchmarkPrepare(b *testing.B) {
	s := NewSender(SenderConfig{AllowPrivateTargets: true})
	defer s.Close()
	r := testRequest("http://127.0.0.1:9/hook", bytes.Repeat([]byte{7}, 32))
	w := bufio.NewWriterSize(io.Discard, h1BufferSize)
	b.ReportAllocs()
	for b.Loop() {
		t, method, fields, err := s.prepare(r, time.Unix(1_700_000_000, 0))
		if err != nil {
			b.Fatal(err)
		}
		writeRequest(w, t, method, fields, r.Body)
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
