package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/openapi"
)

// The spec every API test holds the server to: the committed document in
// package openapi, the one GET /openapi.json serves.
var specRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	doc.Servers = nil // match paths whatever the test server's host
	return legacy.NewRouter(doc)
})

// specExchange is one request the test client sent and the answer it got.
type specExchange struct {
	Method, Path string // Path with its query string
	Header       http.Header
	Body         []byte // nil: no body
	Status       int
	RespHeader   http.Header
	RespBody     []byte
}

// checkAgainstSpec holds one exchange to the OpenAPI document:
//
//   - the response must be documented for its operation (status, content
//     type, headers and body schema), whatever the request was;
//   - a request the document refuses (a wrong type, a missing required
//     field, an unknown property, a value out of range) must be refused by
//     the server with a 4xx: a server that accepts what its document says
//     is invalid makes generated clients stricter than the server, which
//     is a drift too.
//
// A request the document accepts may still be refused (404, 409, 422 for
// rules a schema cannot say, such as an unknown endpoint id). Paths outside
// the document (the River UI, /metrics, unknown routes) are not checked.
func checkAgainstSpec(t testing.TB, x specExchange) {
	t.Helper()
	if err := specMismatch(x); err != nil {
		t.Errorf("%s %s → %d: the response or request does not match openapi/openapi.json:\n%v\nrequest body: %s\nresponse body: %s",
			x.Method, x.Path, x.Status, err, truncate(x.Body), truncate(x.RespBody))
	}
}

// specMismatch is checkAgainstSpec's verdict, nil when the exchange agrees
// with the document.
func specMismatch(x specExchange) error {
	if x.Status == http.StatusRequestHeaderFieldsTooLarge {
		return nil // net/http answers it before ax sees the request
	}
	router, err := specRouter()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(context.Background(), x.Method, "http://ax.test"+x.Path, bytes.NewReader(x.Body))
	if err != nil {
		return err
	}
	hr.Header = x.Header.Clone()
	route, params, err := router.FindRoute(hr)
	if err != nil {
		var re *routers.RouteError
		if errors.As(err, &re) && (re.Reason == routers.ErrPathNotFound.Error() || re.Reason == routers.ErrMethodNotAllowed.Error()) {
			return nil // not an operation of the document
		}
		return err
	}
	opts := &openapi3filter.Options{
		MultiError:            true,
		IncludeResponseStatus: true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	in := &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	var problems []string
	if reqErr != nil && x.Status < 400 {
		problems = append(problems, "the server accepted a request the document refuses: "+reqErr.Error())
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: x.Status, Header: x.RespHeader, Options: opts,
	}
	out.SetBodyBytes(x.RespBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		problems = append(problems, "response: "+err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "\n"))
}

func truncate(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// TestSpecCheckerCatchesDrift: the checker itself fails on an undocumented
// status, a response missing a required field, and a request the document
// refuses but the server accepted.
func TestSpecCheckerCatchesDrift(t *testing.T) {
	t.Parallel()
	json := http.Header{"Content-Type": {"application/json"}}
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	okHealth := specExchange{
		Method: http.MethodGet, Path: "/healthz", Status: http.StatusOK,
		RespHeader: json, RespBody: []byte(`{"status":"ok"}`),
	}
	require.NoError(t, specMismatch(okHealth))

	undocumented := okHealth
	undocumented.Status = http.StatusTeapot
	undocumented.RespHeader = problem
	undocumented.RespBody = []byte(`{"type":"about:blank","title":"x","status":418}`)
	require.Error(t, specMismatch(undocumented))

	missing := okHealth
	missing.RespBody = []byte(`{}`)
	require.Error(t, specMismatch(missing))

	accepted := specExchange{
		Method: http.MethodPost, Path: "/v1/endpoints", Header: json, Body: []byte(`{"name":1}`),
		Status: http.StatusCreated, RespHeader: json, RespBody: []byte(`{}`),
	}
	err := specMismatch(accepted)
	require.Error(t, err)
	require.Contains(t, err.Error(), "accepted a request the document refuses")

	refused := accepted
	refused.Status = http.StatusUnprocessableEntity
	refused.RespHeader = problem
	refused.RespBody = []byte(`{"type":"https://ax.dev/problems/validation","title":"Unprocessable","status":422,"errors":[{"field":"name","message":"must be a string"}]}`)
	require.NoError(t, specMismatch(refused))
}
