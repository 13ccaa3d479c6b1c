package endpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/resource"
)

// TestPayloadMax caps a test request's payload (as a trigger's).
const TestPayloadMax = 256 << 10

// TestRequest is one signed request to an endpoint, built by Test and sent
// by a Probe.
type TestRequest struct {
	Endpoint Endpoint
	// Keys sign it (Endpoint.SigningKeys).
	Keys [][]byte
	// ID is its fresh webhook-id (and Idempotency-Key).
	ID   string
	Body []byte
}

// TestResult is what a test request got.
type TestResult struct {
	// StatusCode is 0 when no response came (Error says why).
	StatusCode      int
	Duration        time.Duration
	ResponseExcerpt string
	Error           string
}

// Probe sends a test request the way deliveries are sent (signed, through
// the SSRF guard, no redirects): the webhook sender, handed in by the
// process.
type Probe func(ctx context.Context, r TestRequest) TestResult

// Test sends one signed request to endpoint id now, with payload ({} when
// nil), and returns what came back: whether the endpoint accepts ax's
// signature and answers in time, before the first slot. Nothing is stored
// but its audit record; a disabled endpoint is tested too.
func (s *Endpoints) Test(ctx context.Context, tenant, id string, payload json.RawMessage, probe Probe) (TestResult, error) {
	var ve errs.ValidationError
	switch {
	case payload == nil:
		payload = json.RawMessage(`{}`)
	case len(payload) > TestPayloadMax:
		ve.Add("payload", fmt.Sprintf("must be at most %d bytes", TestPayloadMax))
	case !json.Valid(payload):
		ve.Add("payload", "must be valid JSON")
	}
	if err := ve.Err(); err != nil {
		return TestResult{}, err
	}
	ep, err := s.Get(ctx, tenant, id)
	if err != nil {
		return TestResult{}, err
	}
	keys, err := ep.SigningKeys(time.Now())
	if err != nil {
		return TestResult{}, err
	}
	res := probe(ctx, TestRequest{Endpoint: ep, Keys: keys, ID: resource.NewID(), Body: payload})
	rec := map[string]any{"status_code": res.StatusCode, "duration_ms": res.Duration.Milliseconds()}
	if res.Error != "" {
		rec["error"] = res.Error
	}
	if err := audit.Record(context.WithoutCancel(ctx), s.pool, tenant, audit.Test, audit.ResourceEndpoint, ep.ID, rec); err != nil {
		return TestResult{}, err
	}
	return res, nil
}
