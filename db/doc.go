// Package db holds ax's Postgres schema and its migrations: the application
// tables as numbered SQL files embedded in the binary, and River's tables
// through rivermigrate. It imports nothing else from this module.
package db
