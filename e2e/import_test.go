//go:build cgo

package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/gen/importer"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestGoToolImportInFreshModule is issue 32's done-when for wfgen import
// without libtorch: in a fresh module that requires wfgen through a
// replace and lists it as a tool, "go tool wfgen import" built with
// CGO_ENABLED=0 (so it cannot link libtorch) writes, to standard output and
// with -o, the skeletons and warnings the engine-backed import writes for
// the same checkpoints; --example, which runs the model, says how to build
// a wfgen with the engine in that module.
func TestGoToolImportInFreshModule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds wfgen in a fresh module; skipped with -short")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	gomod := "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0\n\nreplace github.com/worldfoundry/wfgen => " + root + "\n\ntool github.com/worldfoundry/wfgen/cmd/wfgen\n"
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	world := filepath.Join(dir, "checkpoints", "tiny-world.pt")
	encoder := filepath.Join(dir, "checkpoints", "tiny-encoder.pt")
	must(t, tinymodels.BuildWorld(world))
	must(t, tinymodels.BuildEncoder(encoder))

	noCgo := []string{"CGO_ENABLED=0", "GOWORK=off"}
	if os.Getenv("GOPROXY") == "off" {
		// Offline (the libtorch 2.x lane): the module cache holds what
		// the module needs, verified when it was downloaded; the checksum
		// database cannot be reached to verify the test dependencies of
		// dependencies tidy wants too.
		noCgo = append(noCgo, "GOSUMDB=off")
	}
	// What go get -tool would have written (the module proxy does not
	// serve this checkout): tidy completes the requirements, offline when
	// the module cache has them.
	if out, err := runEnv(dir, noCgo, "go", "mod", "tidy"); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	goTool := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "wfgen", "import"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), noCgo...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	warnings := func(res *importer.Result) string {
		var b strings.Builder
		for _, w := range res.Warnings {
			b.WriteString("wfgen import: warning: " + w + "\n")
		}
		return b.String()
	}
	for _, c := range []struct {
		ckpt    string
		methods []string
	}{
		{world, []string{"forward", "step", "render"}},
		{encoder, nil},
	} {
		var flags []string
		for _, m := range c.methods {
			flags = append(flags, "--method", m)
		}
		want, err := importer.Import(torch.Default(), c.ckpt, importer.Options{Methods: c.methods})
		must(t, err)
		out, errs, code := goTool(append(flags, c.ckpt)...)
		if code != 0 || out != string(want.YAML) || errs != warnings(want) {
			t.Errorf("go tool wfgen import %s: exit %d\n%s%s\nthe engine-backed import:\n%s%s", c.ckpt, code, out, errs, want.YAML, warnings(want))
		}
		manifest := filepath.Join("manifests", strings.TrimSuffix(filepath.Base(c.ckpt), ".pt")+".yaml")
		want, err = importer.Import(torch.Default(), c.ckpt, importer.Options{Methods: c.methods, Output: filepath.Join(dir, manifest)})
		must(t, err)
		if out, errs, code := goTool(append(flags, "-o", manifest, c.ckpt)...); code != 0 || out != "" || !strings.Contains(errs, "wfgen import: wrote "+manifest+"; fill in its TODOs") {
			t.Errorf("go tool wfgen import -o %s: exit %d\n%s%s", manifest, code, out, errs)
		}
		got, err := os.ReadFile(filepath.Join(dir, manifest))
		must(t, err)
		if string(got) != string(want.YAML) {
			t.Errorf("%s:\n%s\nthe engine-backed import:\n%s", manifest, got, want.YAML)
		}
	}

	// The tool cannot run examples; it says how to build one that can, in
	// this module (honouring the replace).
	npy := filepath.Join(dir, "tokens.npy")
	must(t, artifactio.WriteNPY(npy, tensor.FromInt64([]int64{1, 2, 3, 4, 5, 6}, 2, 3)))
	const advice = "go build -tags torch -o wfgen-torch github.com/worldfoundry/wfgen/cmd/wfgen"
	_, errs, code := goTool("--example", "tokens="+npy, encoder)
	if code != 2 || !strings.Contains(errs, "\n    "+advice+"\n") {
		t.Fatalf("--example: exit %d\n%s", code, errs)
	}
	// The advice works here: the build takes the replaced wfgen, and the
	// binary runs the example.
	if out, err := runEnv(dir, []string{"CGO_ENABLED=1", "GOWORK=off"}, "sh", "-c", advice); err != nil {
		t.Fatalf("%s: %v\n%s", advice, err, out)
	}
	want, err := importer.Import(torch.Default(), encoder, importer.Options{Examples: map[string]importer.Example{"tokens": {File: npy, Tensor: tensor.FromInt64([]int64{1, 2, 3, 4, 5, 6}, 2, 3)}}, Batched: true})
	must(t, err)
	if out, err := runEnv(dir, nil, "./wfgen-torch", "import", "--example", "tokens="+npy, "--batched", encoder); err != nil || !strings.HasPrefix(out, string(want.YAML)) {
		t.Errorf("./wfgen-torch import --example: %v\n%s\nthe engine-backed import:\n%s", err, out, want.YAML)
	}
}
