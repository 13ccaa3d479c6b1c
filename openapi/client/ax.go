// Package client is a Go client for the ax API, generated from
// openapi/openapi.json by oapi-codegen (client.gen.go: every operation as
// a method of ClientWithResponses, every schema as a type), plus a thin
// hand-written layer in this file:
//
//   - New: a client that sends a bearer token with every request;
//   - Check: a non-2xx answer as a *ProblemError (the RFC 9457 body);
//   - NewIdempotencyKey: a fresh key for a create's Idempotency-Key;
//   - AllTasks, AllEndpoints, AllExecutions: iterators over every page.
//
// It imports nothing of the ax server. `make generate` regenerates
// client.gen.go; `make verify` fails when it is stale.
//
//	c, err := client.New("https://ax.example.com", token)
//	key := client.NewIdempotencyKey()
//	res, err := c.CreateEndpointWithResponse(ctx, &client.CreateEndpointParams{IdempotencyKey: &key},
//		client.EndpointRequest{Name: "billing", Url: "https://hooks.example.com/ax"})
//	if err == nil {
//		err = client.Check(res.HTTPResponse, res.Body)
//	}
//	// res.JSON201.Secret: store it now, no other answer shows it.
package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// New returns a client for the ax server at baseURL (for example
// "https://ax.example.com") that authenticates every request with token.
// opts may replace the HTTP client (WithHTTPClient) or add request editors.
func New(baseURL, token string, opts ...ClientOption) (*ClientWithResponses, error) {
	auth := WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
	return NewClientWithResponses(baseURL, append([]ClientOption{auth}, opts...)...)
}

// ProblemError is an answer that was not a 2xx: its status and the
// problem document the server sent.
type ProblemError struct {
	Status  int
	Problem Problem
	// RetryAfter is the Retry-After header of a 429 or 503 (0 when absent).
	RetryAfter time.Duration
}

func (e *ProblemError) Error() string {
	var msg strings.Builder
	fmt.Fprintf(&msg, "ax: %d %s", e.Status, e.Problem.Title)
	if e.Problem.Detail != nil && *e.Problem.Detail != "" {
		msg.WriteString(": " + *e.Problem.Detail)
	}
	if e.Problem.Errors != nil {
		for _, f := range *e.Problem.Errors {
			fmt.Fprintf(&msg, "; %s: %s", f.Field, f.Message)
		}
	}
	return msg.String()
}

// Check returns nil when res is a 2xx answer and a *ProblemError
// otherwise (body is the response's Body field, which the generated
// methods have already read).
func Check(res *http.Response, body []byte) error {
	if res == nil {
		return errors.New("ax: no response")
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return nil
	}
	e := &ProblemError{Status: res.StatusCode}
	if err := json.Unmarshal(body, &e.Problem); err != nil || e.Problem.Title == "" {
		e.Problem = Problem{Status: res.StatusCode, Title: http.StatusText(res.StatusCode), Type: "about:blank"}
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// NewIdempotencyKey returns a random key for a create's Idempotency-Key
// parameter: sending the same request again with the same key (a retry
// after a timeout) replays the first answer instead of creating twice.
func NewIdempotencyKey() string {
	return rand.Text()
}

// pages walks a cursor-paginated list: fetch gets the page after cursor
// (nil: the first) and returns its items and the next cursor (nil or
// empty: the last page).
func pages[T any](ctx context.Context, fetch func(context.Context, *string) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var cursor *string
		for {
			items, next, err := fetch(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			cursor = next
		}
	}
}

// AllTasks yields every task that params select, page after page; an
// error ends the sequence.
func (c *ClientWithResponses) AllTasks(ctx context.Context, params ListTasksParams) iter.Seq2[Task, error] {
	return pages(ctx, func(ctx context.Context, cursor *string) ([]Task, *string, error) {
		params.Cursor = cursor
		res, err := c.ListTasksWithResponse(ctx, &params)
		if err != nil {
			return nil, nil, err
		}
		if err := Check(res.HTTPResponse, res.Body); err != nil {
			return nil, nil, err
		}
		return res.JSON200.Items, res.JSON200.NextCursor, nil
	})
}

// AllEndpoints yields every endpoint, page after page.
func (c *ClientWithResponses) AllEndpoints(ctx context.Context, params ListEndpointsParams) iter.Seq2[Endpoint, error] {
	return pages(ctx, func(ctx context.Context, cursor *string) ([]Endpoint, *string, error) {
		params.Cursor = cursor
		res, err := c.ListEndpointsWithResponse(ctx, &params)
		if err != nil {
			return nil, nil, err
		}
		if err := Check(res.HTTPResponse, res.Body); err != nil {
			return nil, nil, err
		}
		return res.JSON200.Items, res.JSON200.NextCursor, nil
	})
}

// AllExecutions yields every execution that params select, page after page.
func (c *ClientWithResponses) AllExecutions(ctx context.Context, params ListExecutionsParams) iter.Seq2[Execution, error] {
	return pages(ctx, func(ctx context.Context, cursor *string) ([]Execution, *string, error) {
		params.Cursor = cursor
		res, err := c.ListExecutionsWithResponse(ctx, &params)
		if err != nil {
			return nil, nil, err
		}
		if err := Check(res.HTTPResponse, res.Body); err != nil {
			return nil, nil, err
		}
		return res.JSON200.Items, res.JSON200.NextCursor, nil
	})
}
