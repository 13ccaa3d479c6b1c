// Command server is the ax binary: `serve` (the default) runs the API, the
// scheduler and the delivery workers; `migrate` applies database migrations;
// `token` prints a signed API token; `runner` runs commands from signed
// webhooks; `version` prints the version.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ax:", err)
		os.Exit(1)
	}
}
