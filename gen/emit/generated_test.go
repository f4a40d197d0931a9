package emit_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/emit"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
)

// repoRoot is the module root, two folders up from gen/emit.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGeneratedIsCurrent fails when generated/ is stale versus manifests/:
// it runs what "make generate" runs (wfgen generate -o generated manifests/)
// in check mode.
func TestGeneratedIsCurrent(t *testing.T) {
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "manifests")); err != nil {
		t.Skip("no manifests/ folder")
	}
	t.Chdir(root)
	files, diags, err := emit.Paths([]string{"manifests/"})
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifests/ does not generate: %v %v", err, diags)
	}
	rep, err := tree.Check("generated", files, emit.TreeOptions(false))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Current() {
		t.Errorf("generated/ is stale versus manifests/; run make generate.\nmissing: %v\nstale: %v\n%s", rep.Created, rep.Stale, rep.Diff)
	}
}

// generatedPackages returns, for each package folder under generated/, the
// manifest path its header names.
func generatedPackages(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	matches, err := filepath.Glob(filepath.Join(root, "generated", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if !emit.IsGenerated(b) {
			continue
		}
		line, _, _ := bytes.Cut(b, []byte("\n"))
		manifest := strings.TrimSuffix(strings.TrimPrefix(string(line), emit.HeaderPrefix), emit.HeaderSuffix)
		out[filepath.Base(filepath.Dir(m))] = manifest
	}
	return out
}

// TestGeneratedPackagesCompileVetAndMatchManifests builds and vets every
// package under generated/, then compiles and runs a test program that
// imports all of them and compares each Spec() (and the registered spec)
// with the manifest it came from, using go-cmp.
func TestGeneratedPackagesCompileVetAndMatchManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test binary; skipped with -short")
	}
	root := repoRoot(t)
	pkgs := generatedPackages(t, root)
	if len(pkgs) == 0 {
		t.Skip("no generated packages")
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)

	// The program lives in testdata (ignored by ./... patterns) inside the
	// module, so it can import the generated packages without a go.mod.
	if err := os.MkdirAll(filepath.Join(root, "gen", "emit", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "gen", "emit", "testdata"), "specs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var src strings.Builder
	src.WriteString("package specs\n\nimport (\n\t\"testing\"\n\n\t\"github.com/google/go-cmp/cmp\"\n\n")
	src.WriteString("\t\"github.com/worldfoundry/wfgen/gen/validate\"\n\t\"github.com/worldfoundry/wfgen/runtime\"\n")
	for i, n := range names {
		fmt.Fprintf(&src, "\tp%d %q\n", i, "github.com/worldfoundry/wfgen/generated/"+n)
	}
	src.WriteString(")\n\nfunc TestSpecs(t *testing.T) {\n\tcases := []struct {\n\t\tmanifest string\n\t\tspec     func() *runtime.ModelInferenceSpec\n\t}{\n")
	for i, n := range names {
		fmt.Fprintf(&src, "\t\t{%q, p%d.Spec},\n", filepath.Join(root, filepath.FromSlash(pkgs[n])), i)
	}
	src.WriteString(`	}
	for _, c := range cases {
		f, diags, err := validate.File(c.manifest)
		if err != nil || len(diags) > 0 {
			t.Fatalf("%s: %v %v", c.manifest, err, diags)
		}
		if d := cmp.Diff(f.Spec, c.spec()); d != "" {
			t.Errorf("%s: Spec() differs (-manifest +Spec):\n%s", c.manifest, d)
		}
		if d := cmp.Diff(f.Spec, runtime.GetModelInferenceSpec(f.Spec.ModelFamilyID)); d != "" {
			t.Errorf("%s: registered spec differs (-manifest +registered):\n%s", c.manifest, d)
		}
	}
	if n := len(runtime.ListModelInferenceSpecs()); n != len(cases) {
		t.Errorf("%d families registered, want %d", n, len(cases))
	}
}
`)
	if err := os.WriteFile(filepath.Join(dir, "specs_test.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, dir)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("vet", "./generated/...")
	run("test", "-count=1", "./"+filepath.ToSlash(rel))
}
