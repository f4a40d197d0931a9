package tree

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Record is a file in the output folder that lists every file the
// generator wrote there and the source (the input) each came from. It is
// what makes cleaning safe: a file is stale only when the record says an
// earlier run wrote it for one of this run's inputs (Covers) and this run
// does not produce it, and it is removed only when it still carries the
// generator's header (Options.Owned). Files of other inputs, of other
// output folders and of other tools are never touched, and a folder
// without a record is not cleaned at all when it holds generated files
// the record would have to vouch for (*UnrecordedError).
//
// Every Write rewrites the record (only when its bytes change): entries of
// sources this run does not cover are kept while their files exist, the
// entries of this run's files name their new sources, and stale entries
// stay until Clean removes their files. Check compares it like any other
// output file.
//
// The record is text: a comment header, then one line per file, sorted,
// each a Go-quoted output path and a Go-quoted source. Lines that git
// merge conflict markers leave behind are ignored, so a record merged
// with conflicts keeps the entries of both sides.
type Record struct {
	// Name is the record's file name in the output folder.
	Name string
	// Tool names the command that writes the record, for its header
	// ("wfgen generate").
	Tool string
	// Sources maps every path of the files to the source it came from,
	// as the record keeps it (wfgen: the manifest's slash-separated path
	// relative to the output folder). Required for every file.
	Sources map[string]string
	// Covers reports whether a recorded source belongs to this run's
	// inputs. Required.
	Covers func(source string) bool
}

// recordMagic starts the first line of every record.
const recordMagic = "# Files "

// UnrecordedError is a Clean refused because the output folder has no
// record and holds generated files (Options.Owned) that this run does not
// produce: without a record nothing tells whether an earlier run wrote
// them for these inputs, for other inputs, or into another folder.
type UnrecordedError struct {
	// Dir is the output folder.
	Dir string
	// Record is the record's file name.
	Record string
	// Files are the generated files the run would have had to judge.
	Files []string
}

// Error says what was refused, why, and what to do.
func (e *UnrecordedError) Error() string {
	shown := e.Files
	more := ""
	if len(shown) > 10 {
		shown, more = shown[:10], fmt.Sprintf(" and %d more", len(e.Files)-10)
	}
	return fmt.Sprintf("--clean refused: %s has no record of what earlier runs wrote (%s), so it cannot tell whether these generated files are stale: %s%s. "+
		"Run once without --clean to start the record, and remove any of these that are stale by hand",
		e.Dir, path.Join(e.Dir, e.Record), strings.Join(shown, ", "), more)
}

// readRecord reads the record in root; exists is false when there is none.
func readRecord(root *os.Root, dir string, rec *Record) (entries map[string]string, exists bool, err error) {
	if !fs.ValidPath(rec.Name) || strings.Contains(rec.Name, "/") {
		return nil, false, fmt.Errorf("tree: record name %q is not a file name", rec.Name)
	}
	b, err := ReadRegular(root, rec.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, false, nil
	}
	shown := path.Join(dir, rec.Name)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", shown, err)
	}
	if !bytes.HasPrefix(b, []byte(recordMagic)) {
		return nil, false, fmt.Errorf("%s exists and was not written by %s; move it away or choose another output folder", shown, rec.Tool)
	}
	entries = map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") || conflictMarker(line) {
			continue
		}
		p, src, err := parseEntry(line)
		if err != nil {
			return nil, false, fmt.Errorf("%s:%d: %v; fix the line or delete the record (then --clean refuses until a run without it rewrites the record)", shown, i+1, err)
		}
		entries[p] = src
	}
	return entries, true, nil
}

func conflictMarker(line string) bool {
	for _, m := range []string{"<<<<<<<", "|||||||", "=======", ">>>>>>>"} {
		if strings.HasPrefix(line, m) {
			return true
		}
	}
	return false
}

// parseEntry reads `"path" "source"`.
func parseEntry(line string) (p, src string, err error) {
	q, err := strconv.QuotedPrefix(line)
	if err != nil {
		return "", "", errors.New(`want a quoted output path and a quoted source, like "pkg/pkg.go" "../manifests/pkg.yaml"`)
	}
	p, _ = strconv.Unquote(q)
	rest := strings.TrimPrefix(line[len(q):], " ")
	q2, err := strconv.QuotedPrefix(rest)
	if err != nil || len(q2) != len(rest) {
		return "", "", errors.New(`want a quoted output path and a quoted source, like "pkg/pkg.go" "../manifests/pkg.yaml"`)
	}
	src, _ = strconv.Unquote(q2)
	if !fs.ValidPath(p) || p == "." {
		return "", "", fmt.Errorf("output path %q is not a relative path inside the folder", p)
	}
	return p, src, nil
}

// formatRecord renders entries.
func formatRecord(rec *Record, entries map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s%s wrote in this folder, and the input each came from (relative to this folder).\n", recordMagic, rec.Tool)
	fmt.Fprintf(&b, "# %s --clean removes only files listed here. Written by %s; do not edit.\n", rec.Tool, rec.Tool)
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		b.WriteString(strconv.Quote(p))
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(entries[p]))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// recordPlan is what a run does with a record: the files it finds stale
// and the record it leaves behind (with and without the stale entries).
type recordPlan struct {
	stale    []string          // sorted
	staleSrc map[string]string // the stale files' sources
	keep     map[string]string // entries besides this run's files and the stale ones
	rec      *Record
}

// planRecord reads the record and works out the stale files. When the
// folder has no record and clean is set, it refuses if generated files
// this run does not produce are present.
func planRecord(root *os.Root, dir string, files pathSet, opts Options, clean bool) (*recordPlan, error) {
	rec := opts.Record
	if rec.Covers == nil {
		return nil, errors.New("tree: Record.Covers is required")
	}
	if _, ok := files[rec.Name]; ok {
		return nil, fmt.Errorf("tree: an output file has the record's name %q", rec.Name)
	}
	for p := range files {
		if _, ok := rec.Sources[p]; !ok {
			return nil, fmt.Errorf("tree: no source recorded for %s", p)
		}
	}
	entries, exists, err := readRecord(root, dir, rec)
	if err != nil {
		return nil, err
	}
	if !exists && clean {
		unrecorded, err := stale(root, files, opts)
		if err != nil {
			return nil, err
		}
		if len(unrecorded) > 0 {
			return nil, &UnrecordedError{Dir: dir, Record: rec.Name, Files: unrecorded}
		}
	}
	plan := &recordPlan{staleSrc: map[string]string{}, keep: map[string]string{}, rec: rec}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		src := entries[p]
		if _, ok := files[p]; ok {
			continue // this run's entry replaces it
		}
		b, err := ReadRegular(root, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone: forget it
		}
		if err != nil {
			return nil, err
		}
		if opts.Owned != nil && !opts.Owned(b) {
			continue // no longer generated (someone took it over): forget it
		}
		if rec.Covers(src) {
			plan.stale = append(plan.stale, p)
			plan.staleSrc[p] = src
		} else {
			plan.keep[p] = src
		}
	}
	return plan, nil
}

// content returns the record after the run; removed are the stale files
// the run deleted.
func (plan *recordPlan) content(files pathSet, removed []string) []byte {
	entries := make(map[string]string, len(plan.keep)+len(files)+len(plan.stale))
	for p, s := range plan.keep {
		entries[p] = s
	}
	for p, s := range plan.staleSrc {
		entries[p] = s
	}
	for _, p := range removed {
		delete(entries, p)
	}
	for p := range files {
		entries[p] = plan.rec.Sources[p]
	}
	return formatRecord(plan.rec, entries)
}
