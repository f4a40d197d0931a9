package main

import (
	"fmt"
	"io"

	"github.com/worldfoundry/wfgen/schema"
)

func init() {
	commands["schema"] = command{
		summary: "print the manifest JSON Schema generated from the Go types",
		run:     runSchema,
	}
}

// runSchema is "wfgen schema": it prints the manifest schema, byte for byte
// what schema/manifest.schema.json holds when that file is up to date.
func runSchema(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: wfgen schema (no arguments; redirect the output to a file)")
		return 2
	}
	b, err := schema.Generate()
	if err != nil {
		fmt.Fprintf(stderr, "wfgen schema: %v\n", err)
		return 2
	}
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "wfgen schema: %v\n", err)
		return 2
	}
	return 0
}
