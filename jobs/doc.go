// Package jobs runs ax's background work: the River client, the scheduler
// loop, the deliver worker and the webhook sender.
package jobs
