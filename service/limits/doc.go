// Package limits is ax's limits and fairness: the table of limit names,
// the tenants' limits (a cache each replica keeps), the count quotas of
// creates, the API's request rate, and the delivery limits — admission of
// an attempt through its gates, the holds of the deliveries a limit keeps
// back and the dispatcher that grants them permits, the sweep of expired
// permits — and the fair sharing of the deliver queues between tenants.
//
// The decisions are here, most of them pure functions (gate.go, pass.go,
// budget.go); the SQL they need is db's small named statements, which
// read and write the shared state (flow_gates, flow_permits, flow_holds,
// api_budgets) and decide nothing. The admin API (Get, Set, Usage) is
// here too. The package imports db and service's errs and audit: service
// calls it (Deliveries admits and releases through it, as its decisions
// say) and hands its admin API to the API.
package limits
