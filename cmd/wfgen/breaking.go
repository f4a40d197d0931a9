package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/worldfoundry/wfgen/gen/breaking"
	"github.com/worldfoundry/wfgen/gen/validate"
)

func init() {
	commands["breaking"] = command{
		summary: "classify manifest changes against a git revision, folder or file",
		run:     runBreaking,
	}
}

const breakingUsage = `usage: wfgen breaking --against REF [--format text|json|github] [--allow RULE[:SUBJECT]]... [--skip-invalid-old] [PATH...]
REF is the old side: git:REV, a git revision (read with git ls-tree / git show,
nothing is checked out), or path:P, a manifest file or folder. A bare REF is
accepted when it is only one of the two; one that names both an existing path and
a revision is refused. PATH is a manifest file or folder of the new side (without
PATHs, the inputs of wfgen.yaml). wfgen.yaml's breaking.allow adds to --allow.
An old manifest that does not load fails the check (exit 1, reported like a
validate problem) unless --skip-invalid-old is given, for a first run against a
side that an older wfgen wrote.
Exit 0 when no breaking change is found (or each is allowed), 1 when one is (or a
manifest on either side is invalid), 2 on usage, I/O or git errors. docs/ci.md
lists the rules.`

// runBreaking is "wfgen breaking --against REF [--format F] [--allow R]... PATH...".
func runBreaking(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("breaking", stderr)
	against := fs.String("against", "", "old side: `REF` = git:REV (e.g. git:origin/main) or path:FILE-OR-FOLDER")
	format := fs.String("format", "text", "output `format`: text, json or github")
	var allows []breaking.Allow
	skipInvalidOld := fs.Bool("skip-invalid-old", false, "compare without old manifests that do not load (they compare as added) instead of failing; for a first run against a side that holds none yet or that an older wfgen wrote")
	fs.Func("allow", "allow breaking changes matching `RULE[:SUBJECT]` (globs; repeatable)", func(s string) error {
		a, err := breaking.ParseAllow(s)
		if err != nil {
			return err
		}
		allows = append(allows, a)
		return nil
	})
	paths, code := parseArgs(fs, breakingUsage, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if code := checkFormat("breaking", *format, stderr); code >= 0 {
		return code
	}
	cfg, err := findConfig()
	if err != nil {
		return usageError(stderr, "breaking", "%v", err)
	}
	if len(paths) == 0 {
		paths = cfg.Inputs
	}
	if *against == "" || len(paths) == 0 {
		printUsage(stderr, fs, breakingUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := breaking.Check(ctx, breaking.Options{
		Against:        *against,
		Paths:          paths,
		Allow:          append(cfg.Allow, allows...),
		Files:          loadOptions("breaking", cfg, stderr),
		SkipInvalidOld: *skipInvalidOld,
	})
	if err != nil {
		fmt.Fprintf(stderr, "wfgen breaking: %v\n", err)
		return 2
	}
	if len(res.Invalid) > 0 {
		if err := validate.WriteDiagnostics(stdout, *format, res.Invalid); err != nil {
			fmt.Fprintf(stderr, "wfgen breaking: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "wfgen breaking: %d problem(s) in the new manifests; nothing compared (run wfgen validate)\n", len(res.Invalid))
		return 1
	}
	if len(res.OldInvalid) > 0 && !res.OldSkipped {
		if err := validate.WriteDiagnostics(stdout, *format, res.OldInvalid); err != nil {
			fmt.Fprintf(stderr, "wfgen breaking: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "wfgen breaking: %d problem(s) in the old manifests at %s; nothing compared (a family whose old manifest does not load would compare as added, hiding every change to it). Fix them there, or pass --skip-invalid-old to compare without them.\n", len(res.OldInvalid), *against)
		return 1
	}
	if *format == "github" {
		if err := validate.WriteWarnings(stdout, res.OldInvalid); err != nil {
			fmt.Fprintf(stderr, "wfgen breaking: %v\n", err)
			return 2
		}
	}
	for _, d := range res.OldInvalid {
		fmt.Fprintf(stderr, "wfgen breaking: warning: old manifest not compared (--skip-invalid-old): %s\n", d)
	}
	if err := breaking.Write(stdout, *format, res.Changes); err != nil {
		fmt.Fprintf(stderr, "wfgen breaking: %v\n", err)
		return 2
	}
	for _, a := range res.Unused {
		fmt.Fprintf(stderr, "wfgen breaking: warning: --allow %s matched no breaking change\n", a.Text)
	}
	sum := res.Summary()
	if len(res.Changes) > 0 && *format == "text" {
		fmt.Fprintf(stderr, "wfgen breaking: %s change(s) against %s\n", sum, *against)
	}
	if sum.Failing() {
		return 1
	}
	return 0
}
