package db

import "testing"

// TestBehind: a delivery queued behind a held one names the limit of the
// first gate they share, in that gate's own terms.
func TestBehind(t *testing.T) {
	tenant := Gate{Name: TenantGate, MaxInflight: 10}
	tenantRate := Gate{Name: TenantGate, Rate: 20}
	ep := Gate{Name: EndpointGate("a"), Rate: 50}
	epConc := Gate{Name: EndpointGate("a"), MaxInflight: 5, Rate: 50}
	for _, c := range []struct {
		name       string
		gs         []Gate
		aheadGates []string
		aheadLimit string
		want       string
	}{
		{"same endpoint gate", []Gate{ep}, []string{"endpoint:a"}, "rate_limit_per_second", "rate_limit_per_second"},
		{"same gate, both limits", []Gate{epConc}, []string{"endpoint:a"}, "max_concurrency", "max_concurrency"},
		{"shares the tenant gate only", []Gate{tenant, ep}, []string{"tenant", "endpoint:b"}, "rate_limit_per_second",
			"max_inflight_deliveries"},
		{"tenant rate only", []Gate{tenantRate, ep}, []string{"tenant", "endpoint:b"}, "max_concurrency", "max_deliveries_per_second"},
		{"ahead held by the tenant gate, shares the endpoint", []Gate{ep}, []string{"tenant", "endpoint:a"},
			"max_inflight_deliveries", "rate_limit_per_second"},
		{"tenant limit named by the held one", []Gate{tenant}, []string{"tenant"}, "max_deliveries_per_second",
			"max_deliveries_per_second"},
	} {
		if got := behind(c.gs, c.aheadGates, c.aheadLimit); got != c.want {
			t.Errorf("%s: behind = %q, want %q", c.name, got, c.want)
		}
	}
}
