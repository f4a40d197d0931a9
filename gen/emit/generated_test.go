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

// aggregateOrigin is what the header of generated/all (the package that
// imports every family package; cmd/wfgen tests it) names: wfgen.yaml,
// whose generate.registry asks for it.
const aggregateOrigin = "wfgen.yaml"

// generatedPackages returns, for each family package folder under
// generated/, the manifest path its header names.
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
		if manifest == aggregateOrigin {
			continue
		}
		out[filepath.Base(filepath.Dir(m))] = manifest
	}
	return out
}

// TestGeneratedPackagesCompileVetAndMatchManifests builds and vets every
// package under generated/, then compiles and runs a test program that
// imports all of them and compares each Spec() (and the registered spec)
// with the manifest it came from, using go-cmp, and one that imports only
// generated/all and finds every family in the registry.
func TestGeneratedPackagesCompileVetAndMatchManifests(t *testing.T) {
	t.Parallel()
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
	src.WriteString("\t\"github.com/worldfoundry/wfgen/gen/validate\"\n\t\"github.com/worldfoundry/wfgen/runtime/spec\"\n")
	for i, n := range names {
		fmt.Fprintf(&src, "\tp%d %q\n", i, "github.com/worldfoundry/wfgen/generated/"+n)
	}
	src.WriteString(")\n\nfunc TestSpecs(t *testing.T) {\n\tcases := []struct {\n\t\tmanifest string\n\t\tspec     func() *spec.ModelInferenceSpec\n\t}{\n")
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
		if d := cmp.Diff(f.Spec, spec.GetModelInferenceSpec(f.Spec.ModelFamilyID)); d != "" {
			t.Errorf("%s: registered spec differs (-manifest +registered):\n%s", c.manifest, d)
		}
	}
	if n := len(spec.ListModelInferenceSpecs()); n != len(cases) {
		t.Errorf("%d families registered, want %d", n, len(cases))
	}
}
`)
	if err := os.WriteFile(filepath.Join(dir, "specs_test.go"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second program imports only generated/all: the registry then holds
	// exactly the families of the manifests.
	var all strings.Builder
	all.WriteString("package all\n\nimport (\n\t\"slices\"\n\t\"testing\"\n\n")
	all.WriteString("\t\"github.com/worldfoundry/wfgen/gen/validate\"\n\t_ \"github.com/worldfoundry/wfgen/generated/all\"\n\t\"github.com/worldfoundry/wfgen/runtime/spec\"\n)\n\n")
	all.WriteString("func TestAllRegistersEveryFamily(t *testing.T) {\n\tvar want []string\n\tfor _, m := range []string{\n")
	for _, n := range names {
		fmt.Fprintf(&all, "\t\t%q,\n", filepath.Join(root, filepath.FromSlash(pkgs[n])))
	}
	all.WriteString(`	} {
		f, diags, err := validate.File(m)
		if err != nil || len(diags) > 0 {
			t.Fatalf("%s: %v %v", m, err, diags)
		}
		want = append(want, f.Spec.ModelFamilyID)
	}
	slices.Sort(want)
	var got []string
	for _, s := range spec.ListModelInferenceSpecs() {
		got = append(got, s.ModelFamilyID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("importing generated/all registers %v, want the manifests' families %v", got, want)
	}
}
`)
	if err := os.MkdirAll(filepath.Join(dir, "all"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "all", "all_test.go"), []byte(all.String()), 0o644); err != nil {
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
	run("test", "-count=1", "./"+filepath.ToSlash(rel)+"/...")
}
