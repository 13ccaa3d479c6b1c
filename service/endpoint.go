package service

import (
	"slices"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/endpoint"
)

// Endpoints (service/endpoint), as the service's callers name them.
const (
	TimeoutMin        = endpoint.TimeoutMin
	TimeoutMax        = endpoint.TimeoutMax
	SecretOverlap     = endpoint.SecretOverlap
	HeaderNamePattern = endpoint.HeaderNamePattern
)

type (
	// Endpoint is a webhook target.
	Endpoint = endpoint.Endpoint
	// EndpointInput is what a client may set on an endpoint.
	EndpointInput = endpoint.Input
	// Endpoints manages webhook endpoints.
	Endpoints = endpoint.Endpoints
	// EndpointProbe sends an endpoint's test request (the webhook sender's
	// Probe).
	EndpointProbe = endpoint.Probe
)

// NewEndpoints returns an Endpoints backed by pool.
func NewEndpoints(pool *db.Pool) *Endpoints { return endpoint.New(pool) }

// validateTimeout checks a delivery's timeout (endpoint.CheckTimeout).
func validateTimeout(ve *ValidationError, field string, d time.Duration) {
	endpoint.CheckTimeout(ve, field, d)
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
