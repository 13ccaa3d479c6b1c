// Package jobs runs ax's background work: the Runner that owns every
// background loop (the scheduler loop, its housekeeping, retention, the
// callback and SLA sweeps, the limits' dispatcher, the replica heartbeat
// …), the River client, the deliver worker and the webhook sender.
package jobs
