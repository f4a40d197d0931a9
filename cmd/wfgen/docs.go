package main

import (
	"io"

	"github.com/worldfoundry/wfgen/gen/docs"
)

func init() {
	commands["docs"] = command{
		summary: "render one Markdown reference page per model family",
		run:     runDocs,
	}
}

// runDocs is "wfgen docs [-o DIR] [--check] [--clean] PATH...", with the
// exit codes of generate.
func runDocs(args []string, stdout, stderr io.Writer) int {
	o, paths, code := parseOutputFlags("docs", "docs/models",
		"usage: wfgen docs [-o DIR] [--check] [--clean] [--format text|json|github] PATH...\n"+
			"Writes DIR/<package>.md for each manifest (PATH is a file or a folder).",
		args, stderr)
	if code >= 0 {
		return code
	}
	files, diags, err := docs.Paths(paths)
	return applyOutput("docs", o, files, diags, err, docs.TreeOptions(o.clean), stdout, stderr)
}
