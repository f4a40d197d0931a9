package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["validate"] = command{
		summary: "check manifests against the schema, the semantic rules and the checkpoints at hand",
		run:     runValidate,
	}
}

const validateUsage = `usage: wfgen validate [--format text|json|github] [PATH...]
PATH is a manifest file or a folder (searched recursively for *.yaml, *.yml,
*.json; a JSON Schema document found there, such as wfgen schema's output, is
skipped with a note); without PATHs, the inputs of wfgen.yaml. A variant's model checkpoint
found next to the manifest (or under $WORLDFOUNDRY_CHECKPOINT_ROOT) is read, and
every task is checked against it as a load would check it. Exit 0 when every
manifest is valid, 1 when any is invalid, 2 on usage or I/O errors.`

// runValidate is "wfgen validate [--format text|json|github] PATH...":
// exit 0 when every manifest is valid, 1 when any is invalid, 2 on usage or
// I/O errors.
func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stderr)
	format := fs.String("format", "text", "output `format`: text, json or github")
	paths, code := parseArgs(fs, validateUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if code := checkFormat("validate", *format, stderr); code >= 0 {
		return code
	}
	cfg, err := findConfig()
	if err != nil {
		return usageError(stderr, "validate", "%v", err)
	}
	if len(paths) == 0 {
		paths = cfg.Inputs
	}
	if len(paths) == 0 {
		printUsage(stderr, fs, validateUsage)
		return 2
	}
	// A short-lived process with a small live heap (Check keeps no
	// files): trading memory for fewer collections makes it faster. The
	// soft limit takes the trade back when hostile files make the heap
	// big (the parse budget keeps what is live near 350 MB).
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(256 << 20)
	valid, diags, err := loadOptions("validate", cfg, stderr).Check(paths)
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
