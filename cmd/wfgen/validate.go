package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["validate"] = command{
		summary: "check manifests against the schema and the semantic rules",
		run:     runValidate,
	}
}

// runValidate is "wfgen validate [--format text|json|github] PATH...":
// exit 0 when every manifest is valid, 1 when any is invalid, 2 on usage or
// I/O errors.
func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "text", "output format: text, json or github")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wfgen validate [--format text|json|github] PATH...")
		fmt.Fprintln(stderr, "PATH is a manifest file or a folder (searched recursively for *.yaml, *.yml, *.json).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *format != "text" && *format != "json" && *format != "github" {
		fmt.Fprintf(stderr, "wfgen validate: unknown --format %q (want text, json or github)\n", *format)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	// A short-lived process with a small live heap (Check keeps no
	// files): trading memory for fewer collections makes it faster. The
	// soft limit takes the trade back when hostile files make the heap
	// big (the parse budget keeps what is live near 350 MB).
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(256 << 20)
	valid, diags, err := validate.Check(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "wfgen validate: %v\n", err)
		return 2
	}
	if err := validate.WriteDiagnostics(stdout, *format, diags); err != nil {
		fmt.Fprintf(stderr, "wfgen validate: %v\n", err)
		return 2
	}
	if len(diags) > 0 {
		if *format == "text" {
			fmt.Fprintf(stderr, "%d problem(s); %d manifest(s) valid\n", len(diags), valid)
		}
		return 1
	}
	if *format == "text" {
		fmt.Fprintf(stderr, "%d manifest(s) valid\n", valid)
	}
	return 0
}
