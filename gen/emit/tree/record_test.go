package tree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorded returns options with a record whose sources are given as
// "path=source" pairs and which covers the sources with one of prefixes.
func recorded(clean bool, prefixes []string, pairs ...string) Options {
	o := opts
	o.Clean = clean
	src := map[string]string{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		src[k] = v
	}
	o.Record = &Record{Name: ".rec", Tool: "test", Sources: src, Covers: func(s string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(s, p) {
				return true
			}
		}
		return false
	}}
	return o
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Two inputs share an output folder: a clean for one input removes only
// what was recorded for that input and is no longer produced, never the
// other input's files, and never a file that lost its header.
func TestRecordCleansOnlyRecordedFilesOfTheInputs(t *testing.T) {
	dir := t.TempDir()
	a := Files{"a/a.go": []byte(hdr + "package a\n"), "a2/a2.go": []byte(hdr + "package a2\n"), "a3/a3.go": []byte(hdr + "package a3\n")}
	if _, err := Write(dir, a, recorded(false, []string{"in-a/"}, "a/a.go=in-a/a.yaml", "a2/a2.go=in-a/a2.yaml", "a3/a3.go=in-a/a3.yaml")); err != nil {
		t.Fatal(err)
	}
	b := Files{"b/b.go": []byte(hdr + "package b\n")}
	if _, err := Write(dir, b, recorded(true, []string{"in-b/"}, "b/b.go=in-b/b.yaml")); err != nil {
		t.Fatal(err)
	}
	want := `# Files test wrote in this folder, and the input each came from (relative to this folder).
# test --clean removes only files listed here. Written by test; do not edit.
"a/a.go" "in-a/a.yaml"
"a2/a2.go" "in-a/a2.yaml"
"a3/a3.go" "in-a/a3.yaml"
"b/b.go" "in-b/b.yaml"
`
	if d := cmp.Diff(want, read(t, filepath.Join(dir, ".rec"))); d != "" {
		t.Fatalf("record (-want +got):\n%s", d)
	}
	// A hand-written file with the header, never recorded.
	write(t, filepath.Join(dir, "hand/hand.go"), hdr+"package hand\n")
	// a3.go was taken over: its header is gone.
	write(t, filepath.Join(dir, "a3/a3.go"), "package a3 // mine now\n")

	// in-a now produces only a/a.go: a2 is stale (reported, kept without
	// Clean), b and hand are not in question.
	only := Files{"a/a.go": a["a/a.go"]}
	o := recorded(false, []string{"in-a/"}, "a/a.go=in-a/a.yaml")
	rep, err := Check(dir, only, o)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a2/a2.go"}, rep.Stale); d != "" || rep.Current() {
		t.Errorf("Check stale (-want +got):\n%s", d)
	}
	if !strings.Contains(rep.Diff, `-"a3/a3.go" "in-a/a3.yaml"`) {
		t.Errorf("Check does not show the record losing a3:\n%s", rep.Diff)
	}
	if rep, err = Write(dir, only, o); err != nil || len(rep.Removed) != 0 || !exists(filepath.Join(dir, "a2/a2.go")) {
		t.Fatalf("Write without Clean: %+v, %v", rep, err)
	}
	o.Clean = true
	rep, err = Write(dir, only, o)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a2/a2.go"}, rep.Removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	for _, keep := range []string{"a/a.go", "a3/a3.go", "b/b.go", "hand/hand.go"} {
		if !exists(filepath.Join(dir, keep)) {
			t.Errorf("%s was removed", keep)
		}
	}
	if exists(filepath.Join(dir, "a2")) {
		t.Error("the emptied folder a2 was kept")
	}
	want = `# Files test wrote in this folder, and the input each came from (relative to this folder).
# test --clean removes only files listed here. Written by test; do not edit.
"a/a.go" "in-a/a.yaml"
"b/b.go" "in-b/b.yaml"
`
	if d := cmp.Diff(want, read(t, filepath.Join(dir, ".rec"))); d != "" {
		t.Errorf("record after clean (-want +got):\n%s", d)
	}
	if rep, err := Check(dir, only, o); err != nil || !rep.Current() {
		t.Errorf("Check after clean: %+v, %v", rep, err)
	}
}

// Without a record, Clean is refused (before anything is written) when
// generated files are present that the run does not produce; a folder
// without such files is cleaned of nothing and gets its record.
func TestCleanWithoutRecord(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "other/other.go"), hdr+"package other\n")
	files := Files{"a/a.go": []byte(hdr + "package a\n")}
	o := recorded(true, []string{""}, "a/a.go=x.yaml")
	_, err := Write(dir, files, o)
	var ue *UnrecordedError
	if !errors.As(err, &ue) || !cmp.Equal(ue.Files, []string{"other/other.go"}) || !strings.Contains(err.Error(), "Run once without --clean") {
		t.Fatalf("Write: %v, want an UnrecordedError naming other/other.go", err)
	}
	if exists(filepath.Join(dir, "a")) || exists(filepath.Join(dir, ".rec")) || !exists(filepath.Join(dir, "other/other.go")) {
		t.Fatal("a refused Write changed the folder")
	}
	// Without Clean the record starts; the unrecorded file stays unjudged.
	o.Clean = false
	if rep, err := Write(dir, files, o); err != nil || len(rep.Stale) != 0 {
		t.Fatalf("Write without Clean: %+v, %v", rep, err)
	}
	o.Clean = true
	if rep, err := Write(dir, files, o); err != nil || len(rep.Removed) != 0 || !exists(filepath.Join(dir, "other/other.go")) {
		t.Fatalf("Write with a record: %+v, %v", rep, err)
	}

	empty := t.TempDir()
	if _, err := Write(empty, files, o); err != nil || !exists(filepath.Join(empty, ".rec")) {
		t.Fatalf("Write to a fresh folder: %v", err)
	}
	// Check of a folder without a record reports the record missing.
	if err := os.Remove(filepath.Join(empty, ".rec")); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(empty, files, o)
	if err != nil || rep.Current() || !cmp.Equal(rep.Created, []string{".rec"}) {
		t.Errorf("Check without a record: %+v, %v", rep, err)
	}
	rep, err = Check(filepath.Join(empty, "nope"), files, o)
	if err != nil || !cmp.Equal(rep.Created, []string{".rec", "a/a.go"}) {
		t.Errorf("Check of a missing folder: %+v, %v", rep, err)
	}
}

// A record merged with git conflict markers keeps both sides' entries; a
// damaged or foreign record is an error that names its line.
func TestRecordParsing(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a/a.go"), hdr+"package a\n")
	write(t, filepath.Join(dir, "b/b.go"), hdr+"package b\n")
	write(t, filepath.Join(dir, ".rec"), `# Files test wrote in this folder
<<<<<<< HEAD
"a/a.go" "in/a.yaml"
=======
"b/b.go" "in/b.yaml"
>>>>>>> branch
`)
	rep, err := Check(dir, Files{}, recorded(false, []string{"in/"}))
	if err != nil || !cmp.Equal(rep.Stale, []string{"a/a.go", "b/b.go"}) {
		t.Errorf("merged record: %+v, %v", rep, err)
	}
	for content, want := range map[string]string{
		"# Files test\n\"a/a.go\"\n":                ".rec:2: want a quoted output path",
		"# Files test\n\"../x.go\" \"in/x.yaml\"\n": `output path "../x.go" is not a relative path`,
		"package main\n":                            ".rec exists and was not written by test",
	} {
		write(t, filepath.Join(dir, ".rec"), content)
		if _, err := Write(dir, Files{}, recorded(true, []string{"in/"})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("record %q: %v, want %q", content, err, want)
		}
	}
}
