package main

import (
	"flag"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["generate"] = command{
		summary: "compile manifests into one typed Go package per model family",
		run:     runGenerate,
	}
}

// outputFlags are the flags generate and docs share.
type outputFlags struct {
	out    string
	check  bool
	clean  bool
	format string
}

// parseOutputFlags parses flags that may come before or after the paths.
func parseOutputFlags(name, defaultOut, usage string, args []string, stderr io.Writer) (outputFlags, []string, int) {
	var o outputFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.out, "o", defaultOut, "output folder")
	fs.BoolVar(&o.check, "check", false, "write nothing; print a diff and the missing and stale files, exit 1 when anything differs")
	fs.BoolVar(&o.clean, "clean", false, "remove files wfgen generated earlier that no manifest produces any more")
	fs.StringVar(&o.format, "format", "text", "diagnostics format: text, json or github")
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return o, nil, 0
			}
			return o, nil, 2
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if o.format != "text" && o.format != "json" && o.format != "github" {
		fmt.Fprintf(stderr, "wfgen %s: unknown --format %q (want text, json or github)\n", name, o.format)
		return o, nil, 2
	}
	if len(paths) == 0 || o.out == "" {
		fs.Usage()
		return o, nil, 2
	}
	return o, paths, -1
}

// runGenerate is "wfgen generate [-o DIR] [--check] [--clean] PATH...".
// Exit 0 on success (and with --check when everything is current), 1 when
// a manifest is invalid or --check finds a difference, 2 on usage or I/O
// errors.
func runGenerate(args []string, stdout, stderr io.Writer) int {
	o, paths, code := parseOutputFlags("generate", "generated",
		"usage: wfgen generate [-o DIR] [--check] [--clean] [--format text|json|github] PATH...\n"+
			"PATH is a manifest file or a folder (searched recursively for *.yaml, *.yml, *.json).",
		args, stderr)
	if code >= 0 {
		return code
	}
	// The cache lets an unchanged family be verified by hash instead of
	// generated again (see gen/emit/cache; WFGEN_CACHE=off disables it).
	files, diags, err := emit.PathsCached(paths, o.out, cache.Default())
	return applyOutput("generate", o, files, diags, err, emit.TreeOptions(o.clean), stdout, stderr)
}

// applyOutput reports diagnostics or writes / checks the files.
func applyOutput(name string, o outputFlags, files tree.Files, diags []validate.Diagnostic, err error, opts tree.Options, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "wfgen %s: %v\n", name, err)
		return 2
	}
	if len(diags) > 0 {
		if err := validate.WriteDiagnostics(stdout, o.format, diags); err != nil {
			fmt.Fprintf(stderr, "wfgen %s: %v\n", name, err)
			return 2
		}
		fmt.Fprintf(stderr, "wfgen %s: %d problem(s); nothing written\n", name, len(diags))
		return 1
	}
	show := func(p string) string { return path.Join(strings.ReplaceAll(o.out, `\`, "/"), p) }
	if o.check {
		rep, err := tree.Check(o.out, files, opts)
		if err != nil {
			fmt.Fprintf(stderr, "wfgen %s: %v\n", name, err)
			return 2
		}
		io.WriteString(stdout, rep.Diff)
		for _, p := range rep.Created {
			fmt.Fprintf(stdout, "missing: %s\n", show(p))
		}
		for _, p := range rep.Stale {
			fmt.Fprintf(stdout, "stale: %s\n", show(p))
		}
		if rep.Current() {
			fmt.Fprintf(stderr, "wfgen %s: %d file(s) current\n", name, len(rep.Unchanged))
			return 0
		}
		fmt.Fprintf(stderr, "wfgen %s: out of date: %d changed, %d missing, %d stale; run wfgen %s -o %s --clean\n",
			name, len(rep.Updated), len(rep.Created), len(rep.Stale), name, o.out)
		return 1
	}
	rep, err := tree.Write(o.out, files, opts)
	if err != nil {
		fmt.Fprintf(stderr, "wfgen %s: %v\n", name, err)
		return 2
	}
	if !o.clean {
		for _, p := range rep.Stale {
			fmt.Fprintf(stderr, "wfgen %s: stale: %s (no manifest produces it; --clean removes it)\n", name, show(p))
		}
	}
	fmt.Fprintf(stderr, "wfgen %s: %d written, %d unchanged, %d removed\n", name, rep.Written(), len(rep.Unchanged), len(rep.Removed))
	return 0
}
