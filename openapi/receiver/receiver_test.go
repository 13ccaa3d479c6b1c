package receiver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/openapi/receiver"
)

// The test vector published with the Standard Webhooks reference libraries.
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = 1614265330
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(receiver.HeaderID, id)
	h.Set(receiver.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(receiver.HeaderSignature, sig)
	return h
}

func clock(sec int64) receiver.Option {
	return receiver.WithClock(func() time.Time { return time.Unix(sec, 0) })
}

func TestVerifyStandardWebhooksVector(t *testing.T) {
	v, err := receiver.NewVerifier([]string{vecSecret}, clock(vecTS))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(headers(vecID, vecTS, vecSig), []byte(vecBody)); err != nil {
		t.Fatalf("the reference vector does not verify: %v", err)
	}
	sig, err := receiver.Sign(vecSecret, vecID, time.Unix(vecTS, 0), []byte(vecBody))
	if err != nil || sig != vecSig {
		t.Fatalf("Sign = %q, %v; want %q", sig, err, vecSig)
	}
	for name, tc := range map[string]struct {
		h    http.Header
		body string
		want error
	}{
		"body changed":      {headers(vecID, vecTS, vecSig), `{"test": 2432232315}`, receiver.ErrNoMatchingSignature},
		"id changed":        {headers(vecID+"x", vecTS, vecSig), vecBody, receiver.ErrNoMatchingSignature},
		"other version":     {headers(vecID, vecTS, "v1a,"+strings.TrimPrefix(vecSig, "v1,")), vecBody, receiver.ErrNoMatchingSignature},
		"garbage signature": {headers(vecID, vecTS, "v1,!!!"), vecBody, receiver.ErrNoMatchingSignature},
		"missing id":        {headers("", vecTS, vecSig), vecBody, receiver.ErrMissingHeaders},
		"too old":           {headers(vecID, vecTS-301, vecSig), vecBody, receiver.ErrTimestampTooOld},
		"too new":           {headers(vecID, vecTS+301, vecSig), vecBody, receiver.ErrTimestampTooNew},
	} {
		if err := v.Verify(tc.h, []byte(tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", name, err, tc.want)
		}
	}
	h := headers(vecID, vecTS, vecSig)
	h.Set(receiver.HeaderTimestamp, "soon")
	if err := v.Verify(h, []byte(vecBody)); !errors.Is(err, receiver.ErrInvalidTimestamp) {
		t.Errorf("malformed timestamp: %v", err)
	}
}

func TestReplayWindowIsConfigurable(t *testing.T) {
	v, err := receiver.NewVerifier([]string{vecSecret}, clock(vecTS+3600), receiver.WithTolerance(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(headers(vecID, vecTS, vecSig), []byte(vecBody)); err != nil {
		t.Fatalf("an hour-old delivery within a 2 h window: %v", err)
	}
	v, _ = receiver.NewVerifier([]string{vecSecret}, clock(vecTS+301))
	if err := v.Verify(headers(vecID, vecTS, vecSig), []byte(vecBody)); !errors.Is(err, receiver.ErrTimestampTooOld) {
		t.Fatalf("301 s old with the default window: %v", err)
	}
}

// TestVerifiesAxSignatures cross-checks with the signer ax's sender uses,
// including the two signatures it sends during a secret rotation.
func TestVerifiesAxSignatures(t *testing.T) {
	oldSecret, newSecret := "whsec_"+b64("old-key-0123456789abcdef"), "whsec_"+b64("new-key-0123456789abcdef")
	now := time.Now()
	body := []byte(`{"order":42,"note":"订单"}`)
	id := "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e"
	rotating := jobs.SignatureHeader([][]byte{[]byte("new-key-0123456789abcdef"), []byte("old-key-0123456789abcdef")}, id, now, body)
	for _, secrets := range [][]string{{oldSecret}, {newSecret}, {newSecret, oldSecret}} {
		v, err := receiver.NewVerifier(secrets)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(headers(id, now.Unix(), rotating), body); err != nil {
			t.Errorf("secrets %v: %v", secrets, err)
		}
	}
	// A receiver that already moved to the new secret still accepts a
	// delivery signed with the old one only while it lists both.
	oldOnly := jobs.Sign([]byte("old-key-0123456789abcdef"), id, now, body)
	v, _ := receiver.NewVerifier([]string{newSecret})
	if err := v.Verify(headers(id, now.Unix(), oldOnly), body); !errors.Is(err, receiver.ErrNoMatchingSignature) {
		t.Errorf("old signature, new secret only: %v", err)
	}
	v, _ = receiver.NewVerifier([]string{newSecret, oldSecret})
	if err := v.Verify(headers(id, now.Unix(), oldOnly), body); err != nil {
		t.Errorf("old signature, both secrets: %v", err)
	}
}

func TestNewVerifierRefusesBadSecrets(t *testing.T) {
	for _, s := range [][]string{nil, {""}, {"whsec_not base64!"}} {
		if _, err := receiver.NewVerifier(s); err == nil {
			t.Errorf("NewVerifier(%q) accepted", s)
		}
	}
	// The prefix may be left off.
	if _, err := receiver.NewVerifier([]string{strings.TrimPrefix(vecSecret, "whsec_")}); err != nil {
		t.Error(err)
	}
}

func TestMiddleware(t *testing.T) {
	v, _ := receiver.NewVerifier([]string{vecSecret}, clock(vecTS))
	var got string
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		want int
	}{
		{"valid", headers(vecID, vecTS, vecSig), vecBody, http.StatusNoContent},
		{"tampered", headers(vecID, vecTS, vecSig), vecBody + " ", http.StatusUnauthorized},
		{"replayed", headers(vecID, vecTS-3600, vecSig), vecBody, http.StatusUnauthorized},
		{"unsigned", http.Header{}, vecBody, http.StatusBadRequest},
	} {
		got = ""
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(tc.body))
		for k, vs := range tc.h {
			req.Header[k] = vs
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, rec.Code, tc.want)
		}
		if want := map[bool]string{true: vecBody}[tc.want == http.StatusNoContent]; got != want {
			t.Errorf("%s: handler saw body %q, want %q", tc.name, got, want)
		}
	}
}

func TestMemoryStoreExpiry(t *testing.T) {
	ctx := context.Background()
	s := receiver.NewMemoryStore(time.Hour)
	for _, want := range []receiver.Claim{receiver.Claimed, receiver.InProgress} {
		if c, err := s.Claim(ctx, "a"); err != nil || c != want {
			t.Fatalf("Claim = %v, %v; want %v", c, err, want)
		}
	}
	_ = s.Complete(ctx, "a")
	if c, _ := s.Claim(ctx, "a"); c != receiver.Done {
		t.Fatalf("after Complete: %v", c)
	}
	_ = s.Release(ctx, "a") // a done id stays done
	if c, _ := s.Claim(ctx, "b"); c != receiver.Claimed {
		t.Fatal(c)
	}
	_ = s.Release(ctx, "b")
	if c, _ := s.Claim(ctx, "b"); c != receiver.Claimed {
		t.Fatalf("after Release: %v", c)
	}
	if n := s.Len(); n != 2 {
		t.Fatalf("Len = %d", n)
	}
}

// TestOnce checks the handler-level guarantee with a real server: a
// redelivered id runs once, a failed one runs again.
func TestOnce(t *testing.T) {
	secret := "whsec_" + b64("once-key-0123456789")
	v, _ := receiver.NewVerifier([]string{secret})
	var calls atomic.Int32
	fail := atomic.Bool{}
	srv := httptest.NewServer(v.Middleware(receiver.Once(receiver.NewMemoryStore(time.Hour), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))))
	defer srv.Close()
	post := func(id string) int {
		body := []byte(`{}`)
		now := time.Now()
		sig, _ := receiver.Sign(secret, id, now, body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header = headers(id, now.Unix(), sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fail.Store(true)
	if code := post("x"); code != 500 {
		t.Fatalf("failing handler: %d", code)
	}
	fail.Store(false)
	for range 3 {
		if code := post("x"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (one failure, one success)", n)
	}
}

// TestOnceInProgressIsRetried: a redelivery of an id still being processed
// gets a status ax retries (503 with Retry-After), not a final 4xx.
func TestOnceInProgressIsRetried(t *testing.T) {
	secret := "whsec_" + b64("once-key-0123456789")
	v, _ := receiver.NewVerifier([]string{secret})
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(v.Middleware(receiver.Once(receiver.NewMemoryStore(time.Hour), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))))
	defer srv.Close()
	post := func() (*http.Response, error) {
		now := time.Now()
		sig, _ := receiver.Sign(secret, "slow", now, []byte(`{}`))
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header = headers("slow", now.Unix(), sig)
		return http.DefaultClient.Do(req)
	}
	first := make(chan error, 1)
	go func() {
		resp, err := post()
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-entered
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(release)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "10" {
		t.Fatalf("redelivery while in progress: %d, Retry-After %q; want 503 and 10", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
