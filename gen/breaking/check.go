package breaking

import (
	"context"

	"github.com/worldfoundry/wfgen/gen/validate"
)

// Options configure Check.
type Options struct {
	// Against is the old side: "git:REV", "path:FILE-OR-FOLDER", or a
	// bare argument that is only one of the two (see Loader.LoadRef).
	Against string
	// Paths are the new manifests' files and folders.
	Paths []string
	// Allow are the --allow rules.
	Allow []Allow
	// Files says how files are found in folders, on both sides.
	Files validate.Options
	// SkipInvalidOld compares without the old manifests that do not load
	// (their families compare as added) instead of failing. It is for
	// the first run against a side whose manifests an older wfgen wrote
	// or that holds none yet; otherwise a manifest that stopped loading
	// (a leftover merge marker) would hide every change to its family.
	SkipInvalidOld bool
}

// Result is what Check found.
type Result struct {
	// Changes are every change, sorted, allowed ones marked.
	Changes []Change
	// Invalid are the problems of the new manifests. When there are any,
	// nothing is compared: a compatibility verdict on an invalid manifest
	// would mean nothing.
	Invalid []validate.Diagnostic
	// OldInvalid are the problems of old manifests, their messages saying
	// which side they are on. Unless Options.SkipInvalidOld is set, the
	// check fails and nothing is compared; with it, their families are
	// left out of the comparison (they compare as added).
	OldInvalid []validate.Diagnostic
	// OldSkipped says that OldInvalid were skipped (Options.SkipInvalidOld).
	OldSkipped bool
	// Unused are the allow rules that covered no change.
	Unused []Allow
}

// Summary counts the result's changes.
func (r *Result) Summary() Summary { return Summarize(r.Changes) }

// Failing reports whether the check fails: the new manifests are invalid,
// an old one does not load (unless skipped) or a breaking change is not
// allowed.
func (r *Result) Failing() bool {
	return len(r.Invalid) > 0 || (len(r.OldInvalid) > 0 && !r.OldSkipped) || r.Summary().Failing()
}

// Check loads the new manifests at opts.Paths and the old ones at
// opts.Against (see LoadRef), compares them and applies the allow rules.
// The error is non-nil only for usage, I/O and git problems, and for a
// family defined twice on one side.
func Check(ctx context.Context, opts Options) (*Result, error) {
	newFiles, invalid, err := opts.Files.Paths(opts.Paths)
	if err != nil {
		return nil, err
	}
	if len(invalid) > 0 {
		return &Result{Invalid: invalid}, nil
	}
	oldFiles, oldInvalid, err := Loader{Files: opts.Files}.LoadRef(ctx, opts.Against, opts.Paths)
	if err != nil {
		return nil, err
	}
	for i := range oldInvalid {
		oldInvalid[i].Message = "the old side (--against " + opts.Against + ") does not load: " + oldInvalid[i].Message
	}
	if len(oldInvalid) > 0 && !opts.SkipInvalidOld {
		return &Result{OldInvalid: oldInvalid}, nil
	}
	changes, err := Compare(oldFiles, newFiles)
	if err != nil {
		return nil, err
	}
	unused := Apply(changes, opts.Allow)
	return &Result{Changes: changes, OldInvalid: oldInvalid, OldSkipped: len(oldInvalid) > 0, Unused: unused}, nil
}
