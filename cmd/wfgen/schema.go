package main

import (
	"fmt"
	"io"

	"github.com/worldfoundry/wfgen/gen/importer"
	"github.com/worldfoundry/wfgen/schema"
)

func init() {
	commands["schema"] = command{
		summary: "print (or write) the manifest JSON Schema generated from the Go types",
		run:     runSchema,
	}
}

const schemaUsage = `usage: wfgen schema [-o FILE]
Prints the manifest JSON Schema, byte for byte what schema/manifest.schema.json
holds when that file is up to date; -o writes it to FILE instead (atomically:
a reader sees the old file or the new one, never half of it).`

// runSchema is "wfgen schema [-o FILE]".
func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("schema", stderr)
	out := fs.String("o", "", "write the schema to `FILE` (atomically) instead of standard output")
	pos, code := parseArgs(fs, schemaUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		printUsage(stderr, fs, schemaUsage)
		return 2
	}
	b, err := schema.Generate()
	if err != nil {
		fmt.Fprintf(stderr, "wfgen schema: %v\n", err)
		return 2
	}
	if *out != "" {
		err = importer.WriteFile(*out, b)
	} else {
		_, err = stdout.Write(b)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wfgen schema: %v\n", err)
		return 2
	}
	return 0
}
