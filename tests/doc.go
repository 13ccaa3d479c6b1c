// Package tests holds ax's black-box tests: they build the real binary,
// start it against a real Postgres, drive the public HTTP API and receive
// real webhooks.
package tests
