// Package service is ax's domain: tenants, endpoints, tasks, executions,
// schedules (next-fire computation), validation and policies. It owns
// transactions and knows no HTTP framework; api/ and jobs/ call into it.
package service
