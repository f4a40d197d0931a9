package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/worldfoundry/wfgen/runtime/playground"
)

func init() {
	commands["playground"] = command{
		summary: "write a family's playground page as static files that call any OIP server",
		run:     runPlayground,
	}
}

const playgroundUsage = `usage: wfgen playground -o DIR PATH...
Writes the playground page of the manifests' family into DIR as static files
(index.html, app.js, transport.js, style.css, families.js): the page wfserve
serves at /playground/FAMILY, which calls the Open Inference Protocol server
named by its ?server= parameter or its Server URL field. With several
families, each goes to DIR/FAMILY. PATH is a manifest file or a folder. Exit 0
on success, 1 when a manifest is invalid (its problems are printed), 2 on
usage or I/O errors. See docs/playground.md.`

// runPlayground is "wfgen playground -o DIR PATH...".
func runPlayground(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("playground", stderr)
	out := fs.String("o", "", "write the page into `DIR`")
	paths, code := parseArgs(fs, playgroundUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if *out == "" || len(paths) == 0 {
		printUsage(stderr, fs, playgroundUsage)
		return 2
	}
	cfg, err := findConfig()
	if err != nil {
		return usageError(stderr, "playground", "%v", err)
	}
	fams, code := loadFamilies("playground", "page", cfg, paths, stderr)
	if code >= 0 {
		return code
	}
	for _, f := range fams {
		dir := *out
		if len(fams) > 1 {
			dir = filepath.Join(*out, f.Spec.ModelFamilyID)
		}
		if err := playground.Write(dir, f.Spec); err != nil {
			fmt.Fprintf(stderr, "wfgen playground: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "wrote the playground of %s to %s (open %s?server=URL)\n", f.Spec.ModelFamilyID, dir, filepath.Join(dir, "index.html"))
	}
	return 0
}
