package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["generate"] = command{
		summary: "compile manifests into one typed Go package per model family",
		run:     func(args []string, stdout, stderr io.Writer) int { return runOutput(goOutput, args, stdout, stderr) },
	}
}

// output describes a command that writes generated files to a folder:
// generate and docs.
type output struct {
	name       string
	usage      string
	defaultOut string
	// configured returns the output folder the configuration sets.
	configured func(*config) string
	// record is the name of the record of written files in the folder.
	record string
	// generate validates the manifests at paths and produces the files
	// (rendered on demand: a tree.Source) and the manifest path of each;
	// origin gives the path a header records for a manifest path; check is
	// set for --check, which must never trust anything on disk; agg, when
	// set, is the aggregate package to add (generate only). done releases
	// what the files hold. Diagnostics mean no files.
	generate func(opts validate.Options, paths []string, origin func(string) string, out string, check bool, agg *emit.Aggregate) (
		files tree.Source, origins map[string]string, done func() error, diags []validate.Diagnostic, err error)
	// aggregate is set when the command writes wfgen.yaml's
	// generate.registry package.
	aggregate bool
	// options are the tree options (owned files, extension).
	options func(clean bool) tree.Options
}

var goOutput = output{
	name: "generate",
	usage: `usage: wfgen generate [-o DIR] [--check] [--clean] [--format text|json|github] [PATH...]
Writes DIR/<package>/<package>.go for each model family. PATH is a manifest file
or a folder (searched recursively for *.yaml, *.yml, *.json; a JSON Schema
document found there, such as wfgen schema's output, is skipped with a note);
without PATHs, the inputs of wfgen.yaml. DIR defaults to wfgen.yaml's generate.output, else generated.
When wfgen.yaml sets generate.registry to NAME, a run over its inputs into its
generate.output also writes DIR/NAME/NAME.go, a package that imports every family
package. DIR/.wfgen-generate records what was written, so that --clean removes
only files earlier runs wrote for the same manifests. Exit 0 on success (with --check: all
current), 1 when a manifest is invalid or --check finds a difference, 2 on usage
or I/O errors.`,
	defaultOut: "generated",
	configured: func(c *config) string { return c.GenerateOutput },
	record:     ".wfgen-generate",
	generate: func(opts validate.Options, paths []string, origin func(string) string, out string, check bool, agg *emit.Aggregate) (
		tree.Source, map[string]string, func() error, []validate.Diagnostic, error) {
		// Validation keeps only the valid manifests' paths and packages;
		// each is read again when its file is rendered, so that a run over
		// many manifests holds a few families at a time.
		valid, diags, err := opts.Scan(paths)
		if err != nil || len(diags) > 0 {
			return nil, nil, nil, diags, err
		}
		load := func(v validate.Scanned) (*ir.Family, error) {
			fam, diags, err := validate.File(v.Path)
			switch {
			case err != nil:
				return nil, err
			case fam == nil:
				return nil, fmt.Errorf("%s changed while wfgen ran: %v", v.Path, diags)
			}
			fam.File.Origin = origin(v.Path)
			fam.File.Release()
			return fam, nil
		}
		// The cache lets plain generate verify an unchanged family by
		// hash instead of generating it again (see gen/emit/cache;
		// WFGEN_CACHE=off disables it). It trusts the folder it verifies
		// against, so --check never uses it: it compares fresh bytes.
		var c *cache.Cache
		if !check {
			c = cache.Default()
		}
		o, err := emit.NewScannedOutput(valid, load, out, c)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if agg != nil {
			if err := o.AddAggregate(*agg); err != nil {
				o.Close()
				return nil, nil, nil, nil, err
			}
		}
		return o, o.Origins(), o.Close, nil, nil
	},
	aggregate: true,
	options:   emit.TreeOptions,
}

// outputFlags are what generate and docs were told.
type outputFlags struct {
	out    string // the output folder
	outSet bool   // -o was given
	check  bool
	clean  bool
	format string
	paths  []string // the manifest paths
	given  []string // the paths given on the command line (nil when from wfgen.yaml)
}

// parseOutput parses the flags of generate and docs and applies wfgen.yaml.
func parseOutput(o output, args []string, stdout, stderr io.Writer) (outputFlags, *config, int) {
	var f outputFlags
	fs := newFlags(o.name, stderr)
	fs.StringVar(&f.out, "o", "", "output `folder` (default: wfgen.yaml, else "+o.defaultOut+")")
	fs.BoolVar(&f.check, "check", false, "write nothing; print a diff and the missing and stale files, exit 1 when anything differs")
	fs.BoolVar(&f.clean, "clean", false, "remove files earlier runs wrote into the folder for these manifests that they no longer produce")
	fs.StringVar(&f.format, "format", "text", "diagnostics `format`: text, json or github")
	pos, code := parseArgs(fs, o.usage, args, stdout, stderr)
	if code >= 0 {
		return f, nil, code
	}
	if code := checkFormat(o.name, f.format, stderr); code >= 0 {
		return f, nil, code
	}
	fs.Visit(func(fl *flag.Flag) { f.outSet = f.outSet || fl.Name == "o" })
	if f.outSet && f.out == "" {
		return f, nil, usageError(stderr, o.name, "-o needs a folder")
	}
	cfg, err := findConfig()
	if err != nil {
		return f, nil, usageError(stderr, o.name, "%v", err)
	}
	f.given, f.paths = pos, pos
	if len(pos) == 0 {
		f.paths = cfg.Inputs
	}
	if !f.outSet {
		f.out = o.configured(cfg)
		if f.out == "" {
			f.out = o.defaultOut
		}
	}
	if len(f.paths) == 0 {
		printUsage(stderr, fs, o.usage)
		return f, nil, 2
	}
	return f, cfg, -1
}

// runOutput runs generate or docs.
func runOutput(o output, args []string, stdout, stderr io.Writer) int {
	f, cfg, code := parseOutput(o, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "wfgen %s: %v\n", o.name, err)
		return 2
	}
	opts := loadOptions(o.name, cfg, stderr)
	outAbs, err := filepath.Abs(f.out)
	if err != nil {
		return fail(err)
	}
	root := moduleRoot(outAbs)
	origin := func(p string) string { return originPath(p, root) }
	// The run wfgen.yaml describes writes its aggregate package, and the
	// configuration is one of its sources (so that the package is stale
	// once the setting changes).
	described := cfg.describes(f.out, f.paths, o.configured(cfg))
	var agg *emit.Aggregate
	if described && o.aggregate && cfg.Registry != "" {
		if agg, err = aggregate(cfg, f.out, outAbs, root); err != nil {
			return fail(err)
		}
	}
	gen, origins, done, diags, err := o.generate(opts, f.paths, origin, f.out, f.check, agg)
	if conflict := (*emit.AggregateConflictError)(nil); errors.As(err, &conflict) {
		err = cfg.registryError("%v", conflict)
	}
	if err != nil {
		return fail(err)
	}
	if len(diags) == 0 {
		defer done()
		covers, err := coverage(outAbs, f.paths, opts.Exclude)
		if err != nil {
			return fail(err)
		}
		if described {
			cfgSource, inputs := recordedSource(outAbs, cfg.File), covers
			covers = func(src string) bool { return src == cfgSource || inputs(src) }
		}
		topts := o.options(f.clean)
		topts.Record = &tree.Record{Name: o.record, Tool: "wfgen " + o.name, Sources: map[string]string{}, Covers: covers}
		for p, m := range origins {
			topts.Record.Sources[p] = recordedSource(outAbs, m)
		}
		return apply(o, f, gen, topts, stdout, stderr)
	}
	if err := validate.WriteDiagnostics(stdout, f.format, diags); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "wfgen %s: %d problem(s); nothing written\n", o.name, len(diags))
	return 1
}

// aggregate is the aggregate package wfgen.yaml's generate.registry asks
// for in the output folder out (outAbs absolute), which is in the Go
// module rooted at modRoot ("" when there is none): its family packages
// are imported as the module path plus the folder's path in the module.
func aggregate(cfg *config, out, outAbs, modRoot string) (*emit.Aggregate, error) {
	if modRoot == "" {
		return nil, cfg.registryError("no go.mod in %s or a folder above it, so the import path of the generated packages is unknown", out)
	}
	gomod := filepath.Join(modRoot, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return nil, err
	}
	mod := modfile.ModulePath(data)
	if mod == "" {
		return nil, cfg.registryError("%s has no module line, so the import path of the generated packages is unknown", gomod)
	}
	imp := mod
	if rel, _ := within(modRoot, outAbs); rel != "." {
		imp += "/" + rel
	}
	if err := module.CheckImportPath(imp + "/" + cfg.Registry); err != nil {
		return nil, cfg.registryError("the packages in %s cannot be imported: %v", out, err)
	}
	return &emit.Aggregate{Package: cfg.Registry, ImportPath: imp, Origin: originPath(cfg.File, modRoot), Source: cfg.File}, nil
}

// rerun is the command that brings the folder up to date: the same
// command with the -o and paths it was given.
func rerun(o output, f outputFlags, clean bool) string {
	var words []string
	words = append(words, o.name)
	if f.outSet {
		words = append(words, "-o", f.out)
	}
	if clean {
		words = append(words, "--clean")
	}
	if len(f.given) > 0 {
		for _, p := range f.given {
			if strings.HasPrefix(p, "-") {
				words = append(words, "--")
				break
			}
		}
		words = append(words, f.given...)
	}
	return selfCommand() + " " + commandLine(words...)
}

// apply writes or checks the files and reports.
func apply(o output, f outputFlags, files tree.Source, opts tree.Options, stdout, stderr io.Writer) int {
	show := func(p string) string { return path.Join(filepath.ToSlash(f.out), p) }
	if f.check {
		rep, err := tree.Check(f.out, files, opts)
		if err != nil {
			fmt.Fprintf(stderr, "wfgen %s: %v\n", o.name, err)
			return 2
		}
		if rep.Current() {
			if f.format == "json" {
				io.WriteString(stdout, "[]\n")
			}
			fmt.Fprintf(stderr, "wfgen %s: %d file(s) current\n", o.name, len(rep.Unchanged))
			return 0
		}
		hint := rerun(o, f, len(rep.Stale) > 0)
		if f.format == "text" {
			io.WriteString(stdout, rep.Diff)
			for _, p := range rep.Created {
				fmt.Fprintf(stdout, "missing: %s\n", show(p))
			}
			for _, p := range rep.Stale {
				fmt.Fprintf(stdout, "stale: %s\n", show(p))
			}
		} else {
			var diags []validate.Diagnostic
			add := func(ps []string, msg string) {
				for _, p := range ps {
					what := "generated file"
					if p == opts.Record.Name {
						what = "the record of generated files"
					}
					diags = append(diags, validate.Diagnostic{File: show(p), Line: 1, Column: 1, Message: what + " " + msg + "; run: " + hint})
				}
			}
			add(rep.Updated, "is out of date")
			add(rep.Created, "is missing")
			add(rep.Stale, "is stale: no manifest produces it any more")
			if err := validate.WriteDiagnostics(stdout, f.format, diags); err != nil {
				fmt.Fprintf(stderr, "wfgen %s: %v\n", o.name, err)
				return 2
			}
			if f.format == "github" {
				io.WriteString(stdout, rep.Diff)
			}
		}
		fmt.Fprintf(stderr, "wfgen %s: out of date: %d changed, %d missing, %d stale; run: %s\n",
			o.name, len(rep.Updated), len(rep.Created), len(rep.Stale), hint)
		return 1
	}
	rep, err := tree.Write(f.out, files, opts)
	if err != nil {
		fmt.Fprintf(stderr, "wfgen %s: %v\n", o.name, err)
		var ue *tree.UnrecordedError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "wfgen %s: to start the record: %s\n", o.name, rerun(o, f, false))
		}
		return 2
	}
	if !f.clean {
		for _, p := range rep.Stale {
			fmt.Fprintf(stderr, "wfgen %s: stale: %s (no manifest produces it any more; %s removes it)\n", o.name, show(p), rerun(o, f, true))
		}
	}
	fmt.Fprintf(stderr, "wfgen %s: %d written, %d unchanged, %d removed\n", o.name, rep.Written(), len(rep.Unchanged), len(rep.Removed))
	return 0
}
