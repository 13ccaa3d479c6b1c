// Command schemagen writes the JSON Schema of ax apply's documents
// (apply.JSONSchema). `go generate` in package openapi runs it after
// openapi.json is written.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/axhq/ax/cmd/server/apply"
)

func main() {
	out := flag.String("out", "apply.schema.json", "the file to write")
	flag.Parse()
	b, err := apply.JSONSchema()
	if err == nil {
		err = os.WriteFile(*out, append(b, '\n'), 0o644) //nolint:gosec // a generated file, read by everyone
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
