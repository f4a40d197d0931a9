package main

import (
	"io"

	"github.com/worldfoundry/wfgen/gen/docs"
	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["docs"] = command{
		summary: "render one Markdown reference page per model family",
		run:     func(args []string, stdout, stderr io.Writer) int { return runOutput(docsOutput, args, stdout, stderr) },
	}
}

// docsOutput is "wfgen docs [-o DIR] [--check] [--clean] PATH...", with the
// exit codes of generate.
var docsOutput = output{
	name: "docs",
	usage: `usage: wfgen docs [-o DIR] [--check] [--clean] [--format text|json|github] [PATH...]
Writes DIR/<package>.md for each manifest (PATH is a file or a folder; without
PATHs, the inputs of wfgen.yaml). DIR defaults to wfgen.yaml's docs.output, else
docs/models. DIR/.wfgen-docs records what was written, so that --clean removes
only pages earlier runs wrote for the same manifests. Exit codes as for generate.`,
	defaultOut: "docs/models",
	configured: func(c *config) string { return c.DocsOutput },
	record:     ".wfgen-docs",
	generate: func(opts validate.Options, paths []string, origin func(string) string, _ string, _ bool, _ *emit.Aggregate) (
		tree.Source, map[string]string, func() error, []validate.Diagnostic, error) {
		fams, diags, err := opts.Paths(paths)
		if err != nil || len(diags) > 0 {
			return nil, nil, nil, diags, err
		}
		for _, fam := range fams {
			fam.File.Origin = origin(fam.File.Path)
		}
		files, origins, err := docs.GenerateWithOrigins(fams)
		return files, origins, func() error { return nil }, nil, err
	},
	options: docs.TreeOptions,
}
