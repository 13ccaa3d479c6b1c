package limits

// The limits' names, as the API, the timeline (a throttled event's
// data.limit, an execution's reasons), the metrics
// (ax_deliveries_throttled_total{limit}), the quota and rate errors and
// the docs spell them. Table lists them all; TestNamesAreInTheTable fails
// on a name used anywhere in ax that it does not list, and on a docs list
// that differs from it.
const (
	MaxTasks               = "max_tasks"
	MaxWorkflows           = "max_workflows"
	MaxInflightDeliveries  = "max_inflight_deliveries"
	MaxDeliveriesPerSecond = "max_deliveries_per_second"
	APIRequestsPerSecond   = "api_requests_per_second"
	MaxConcurrency         = "max_concurrency"
	RateLimitPerSecond     = "rate_limit_per_second"
)

// Scope is what a limit is set on.
type Scope string

// Scopes.
const (
	ScopeTenant   Scope = "tenant"
	ScopeEndpoint Scope = "endpoint"
)

// Limit is one limit of Table.
type Limit struct {
	Name  string
	Scope Scope
	// Delivery: the limit holds deliveries back (they wait; a throttled
	// event and the throttled metric name it). Otherwise it refuses a
	// request: a quota's 409, the API rate's 429.
	Delivery bool
	// Bounds says what it bounds.
	Bounds string
}

// Table is every limit of ax.
var Table = []Limit{
	{MaxTasks, ScopeTenant, false, "tasks (not a workflow's steps)"},
	{MaxWorkflows, ScopeTenant, false, "workflows"},
	{MaxInflightDeliveries, ScopeTenant, true, "the tenant's deliveries in flight at once"},
	{MaxDeliveriesPerSecond, ScopeTenant, true, "the tenant's deliveries started per second"},
	{APIRequestsPerSecond, ScopeTenant, false, "the tenant's API requests per second"},
	{MaxConcurrency, ScopeEndpoint, true, "requests in flight to the endpoint at once"},
	{RateLimitPerSecond, ScopeEndpoint, true, "requests started to the endpoint per second"},
}

// DeliveryNames are the names of the limits that hold deliveries back,
// in Table's order.
func DeliveryNames() []string {
	var out []string
	for _, l := range Table {
		if l.Delivery {
			out = append(out, l.Name)
		}
	}
	return out
}

// ScopeOf returns the scope of the limit named name ("": not a limit).
func ScopeOf(name string) Scope {
	for _, l := range Table {
		if l.Name == name {
			return l.Scope
		}
	}
	return ""
}
