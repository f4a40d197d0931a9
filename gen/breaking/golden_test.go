package breaking

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
)

var update = flag.Bool("update", false, "rewrite the golden want.* files of testdata/golden")

// A golden case is a folder under testdata/golden with old/ and new/
// manifests, an optional "allow" file (one --allow rule a line) and the
// expected output in each format: want.txt (the text output, then the
// verdict and the unused allow rules), want.json and want.github.

type goldenResult struct {
	changes []Change
	unused  []Allow
}

func runGolden(t *testing.T, dir string) goldenResult {
	t.Helper()
	oldFiles := loadValid(t, filepath.Join(dir, "old"))
	newFiles := loadValid(t, filepath.Join(dir, "new"))
	changes, err := Compare(oldFiles, newFiles)
	if err != nil {
		t.Fatal(err)
	}
	var allows []Allow
	if data, err := os.ReadFile(filepath.Join(dir, "allow")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				a, err := ParseAllow(line)
				if err != nil {
					t.Fatal(err)
				}
				allows = append(allows, a)
			}
		}
	}
	return goldenResult{changes: changes, unused: Apply(changes, allows)}
}

func loadValid(t *testing.T, dir string) []*ir.Family {
	t.Helper()
	files, diags, err := validate.Paths([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) > 0 {
		t.Fatalf("golden input is invalid:\n%v", diags)
	}
	return files
}

func goldenOutputs(t *testing.T, r goldenResult) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, format := range manifest.OutputFormats {
		var b bytes.Buffer
		if err := Write(&b, format, r.changes); err != nil {
			t.Fatal(err)
		}
		if format == "text" {
			verdict := "pass"
			if Summarize(r.changes).Failing() {
				verdict = "fail"
			}
			fmt.Fprintf(&b, "-- %s: %s\n", verdict, Summarize(r.changes))
			for _, a := range r.unused {
				fmt.Fprintf(&b, "-- unused --allow %s\n", a.Text)
			}
		}
		ext := map[string]string{"text": "txt", "json": "json", "github": "github"}[format]
		out["want."+ext] = filepath.ToSlash(b.String())
	}
	return out
}

func goldenCases(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	return dirs
}

func TestGolden(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := goldenOutputs(t, runGolden(t, dir))
			for name, g := range got {
				path := filepath.Join(dir, name)
				if *update {
					if err := os.WriteFile(path, []byte(g), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./gen/breaking -run TestGolden -update)", err)
				}
				if diff := cmp.Diff(string(want), g); diff != "" {
					t.Errorf("%s differs (-want +got):\n%s", path, diff)
				}
			}
		})
	}
}

// TestGoldenClasses checks what the golden cases are for: the no-change
// case finds nothing, every rule is found by some case, and each case's
// changes are of the class it is named after.
func TestGoldenClasses(t *testing.T) {
	found := map[string]bool{}
	for _, dir := range goldenCases(t) {
		name := filepath.Base(dir)
		r := runGolden(t, dir)
		for _, c := range r.changes {
			found[c.Rule] = true
		}
		classes := map[Class]int{}
		for _, c := range r.changes {
			classes[c.Class]++
		}
		switch name {
		case "no-change":
			if len(r.changes) != 0 {
				t.Errorf("no-change: found %d changes:\n%v", len(r.changes), r.changes)
			}
		case "additive", "behavioural":
			want := map[string]Class{"additive": Additive, "behavioural": Behavioural}[name]
			if classes[want] == 0 {
				t.Errorf("%s: no %s change", name, want)
			}
			if classes[Breaking] > 0 && name == "behavioural" {
				t.Errorf("behavioural: breaking changes found: %v", r.changes)
			}
		case "removed", "required", "narrowed", "changed":
			if !Summarize(r.changes).Failing() {
				t.Errorf("%s: the check passes", name)
			}
		case "deprecated":
			s := Summarize(r.changes)
			if s.Breaking == 0 || s.Failing() {
				t.Errorf("%s: want breaking changes, all allowed; got %s", name, s)
			}
		case "allow":
			// The rules cover all but one change, and one rule covers nothing.
			s := Summarize(r.changes)
			if s.Allowed == 0 || s.Breaking-s.Allowed != 1 || len(r.unused) != 1 {
				t.Errorf("allow: got %s, unused %v", s, r.unused)
			}
		}
	}
	for _, rule := range RuleNames() {
		if !found[rule] {
			t.Errorf("no golden case finds rule %s", rule)
		}
	}
}

// TestGoldenLocations checks that every change that names a node present
// in its file points at the line holding that node's key or value.
func TestGoldenLocations(t *testing.T) {
	for _, dir := range goldenCases(t) {
		for _, c := range runGolden(t, dir).changes {
			data, err := os.ReadFile(c.File)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(data), "\n")
			if c.Line < 1 || c.Line > len(lines) {
				t.Errorf("%s: line out of range", c)
				continue
			}
			segs := manifest.SplitPointer(c.Path)
			if len(segs) == 0 {
				continue
			}
			f, _ := manifest.Parse(c.File, data)
			last := segs[len(segs)-1]
			text := lines[c.Line-1]
			if !f.Has(c.Path) {
				// A removed node: the line of its nearest surviving parent.
				continue
			}
			if _, err := fmt.Sscan(last, new(int)); err == nil {
				continue // a list item: its first key, checked by the golden text
			}
			if !strings.Contains(text, last) && !isValueLine(f, c.Path, text) {
				t.Errorf("%s points at line %q, which holds neither %q nor its value", c, text, last)
			}
		}
	}
}

// isValueLine reports whether line holds the scalar value at pointer.
func isValueLine(f *manifest.File, pointer, line string) bool {
	v := f.Value
	for _, s := range manifest.SplitPointer(pointer) {
		switch x := v.(type) {
		case map[string]any:
			v = x[s]
		case []any:
			var i int
			fmt.Sscan(s, &i)
			v = x[i]
		}
	}
	b, _ := json.Marshal(v)
	return strings.Contains(line, strings.Trim(string(b), `"`))
}

func TestNoChangeWithItself(t *testing.T) {
	files := loadValid(t, filepath.Join("..", "..", "manifests"))
	changes, err := Compare(files, files)
	if err != nil || len(changes) != 0 {
		t.Fatalf("manifests/ against itself: %v %v", changes, err)
	}
	var b bytes.Buffer
	for _, f := range manifest.OutputFormats {
		if err := Write(&b, f, nil); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() != 0 {
		t.Errorf("Write of no change printed %q", b.String())
	}
}

func TestDuplicateFamily(t *testing.T) {
	files := loadValid(t, filepath.Join("testdata", "golden", "removed", "old"))
	dup := slices.Concat(files, files[:1])
	_, err := Compare(dup, files)
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v, want a duplicate family error", err)
	}
}
