package emit_test

import (
	"bytes"
	"flag"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/docs"
	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/validate"
)

var update = flag.Bool("update", false, "rewrite the golden cases in golden/ from the current generator")

// goldenRoot is the golden/ folder of the repository.
var goldenRoot = filepath.Join("..", "..", "golden")

// A golden case is a folder golden/<case>/ holding input/ (the manifests)
// and either output/ (the expected generated Go tree) and docs/ (the
// expected Markdown pages), or error.txt (the expected diagnostics, as
// "wfgen generate" prints them). The generator runs inside the case folder
// on the path "input", so headers and diagnostics name "input/...".
func TestGolden(t *testing.T) {
	entries, err := os.ReadDir(goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		dir := filepath.Join(abs, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			t.Chdir(dir)
			files, diags, err := emit.Paths([]string{"input"})
			if err != nil {
				t.Fatal(err)
			}
			pages, pageDiags, err := docs.Paths([]string{"input"})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(diags, pageDiags); d != "" {
				t.Errorf("generate and docs disagree on diagnostics (-generate +docs):\n%s", d)
			}
			if len(diags) > 0 {
				if files != nil || pages != nil {
					t.Errorf("diagnostics came with output files")
				}
				var b bytes.Buffer
				if err := validate.WriteDiagnostics(&b, "text", diags); err != nil {
					t.Fatal(err)
				}
				checkText(t, "error.txt", b.String())
				for _, d := range []string{"output", "docs"} {
					if _, err := os.Stat(d); err == nil {
						t.Errorf("failing case has a %s/ folder", d)
					}
				}
				return
			}
			if _, err := os.Stat("error.txt"); err == nil {
				t.Errorf("case has error.txt but generation succeeded")
			}
			for p, b := range files {
				if f, err := format.Source(b); err != nil || !bytes.Equal(f, b) {
					t.Errorf("%s is not gofmt'd (err %v)", p, err)
				}
			}
			checkTree(t, "output", files, emit.IsGenerated)
			checkTree(t, "docs", pages, docs.IsGenerated)
		})
	}
	if n < 5 {
		t.Fatalf("only %d golden cases found in %s", n, goldenRoot)
	}
}

func checkText(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./gen/emit -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, d)
	}
}

// checkTree compares the generated files with the files under dir that
// carry the generator's header (hand-written tests beside them are kept
// and ignored). With -update it rewrites dir.
func checkTree(t *testing.T, dir string, files tree.Files, owned func([]byte) bool) {
	t.Helper()
	if *update {
		if _, err := tree.Write(dir, files, tree.Options{Owned: owned, Clean: true}); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := map[string]string{}
	for p, b := range files {
		got[p] = string(b)
	}
	want := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if owned(b) {
			rel, _ := filepath.Rel(dir, p)
			want[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v (run go test ./gen/emit -update to create it)", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s/ differs from the generator's output (-want +got); run go test ./gen/emit -update if the change is intended:\n%s", dir, d)
	}
}

// TestDeterministic generates every golden case twice and requires
// identical bytes.
func TestDeterministic(t *testing.T) {
	abs, err := filepath.Abs(goldenRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(abs)
	matches, _ := filepath.Glob("*/input")
	var inputs []string
	for _, m := range matches {
		if !strings.HasPrefix(m, "err-") {
			inputs = append(inputs, m)
		}
	}
	first, diags, err := emit.Paths(inputs)
	if err != nil || len(diags) > 0 {
		t.Fatalf("generate: %v %v", err, diags)
	}
	for i := 0; i < 3; i++ {
		again, _, err := emit.Paths(inputs)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(first, again); d != "" {
			t.Fatalf("run %d differs:\n%s", i+2, d)
		}
	}
}
