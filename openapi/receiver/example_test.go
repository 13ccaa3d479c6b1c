package receiver_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/axhq/ax/openapi/receiver"
)

func b64(s string) string {
	var buf bytes.Buffer
	enc := base64.NewEncoder(base64.StdEncoding, &buf)
	_, _ = enc.Write([]byte(s))
	_ = enc.Close()
	return buf.String()
}

// A receiver that verifies every delivery and processes each webhook-id
// once. During a secret rotation list the new secret and the old one.
func Example() {
	verifier, err := receiver.NewVerifier([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		log.Fatal(err)
	}
	store := receiver.NewMemoryStore(24 * time.Hour) // pgstore.Store with several replicas
	handler := verifier.Middleware(receiver.Once(store, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the verified body
		fmt.Printf("processing %s: %s\n", r.Header.Get("webhook-id"), body)
		w.WriteHeader(http.StatusNoContent)
	})))

	// What ax sends (built here with Sign; in production it arrives over HTTP).
	body := []byte(`{"order":42}`)
	sig, _ := receiver.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "exec-1", time.Now(), body)
	for range 2 { // a delivery and its redelivery
		req := httptest.NewRequest(http.MethodPost, "/hooks/ax", bytes.NewReader(body))
		req.Header.Set("webhook-id", "exec-1")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// processing exec-1: {"order":42}
	// 204
	// 200
}

// Verifying by hand, e.g. inside a framework that has already read the body.
func ExampleVerifier_Verify() {
	v, _ := receiver.NewVerifier([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		receiver.WithTolerance(10*time.Minute))
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	sig, _ := receiver.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Now(), []byte(`{"test": 2432232314}`))
	h.Set("webhook-signature", sig)
	fmt.Println(v.Verify(h, []byte(`{"test": 2432232314}`)))
	fmt.Println(v.Verify(h, []byte(`{"test": 1}`)))
	// Output:
	// <nil>
	// receiver: no matching signature
}
