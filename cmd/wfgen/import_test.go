package main

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// echoArchive writes, as a zip at path, what torch.jit.save (1.13) writes
// for TestImportTorchBuild's Echo module.
func echoArchive(t *testing.T, path string) {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range map[string]string{
		"echo/data.pkl": "\x80\x02c__torch__\nEcho\nq\x00)\x81}",
		"echo/code/__torch__.py": `class Echo(Module):
  __parameters__ = []
  __buffers__ = []
  training : bool
  def forward(self: __torch__.Echo,
    x: Tensor,
    k: int=2) -> Tensor:
    return torch.mul(x, k)
  def label(self: __torch__.Echo,
    names: List[str],
    sep: str=",") -> str:
    return torch.join(sep, names)
`} {
		w, _ := zw.Create(name)
		w.Write([]byte(data))
	}
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportWithoutEngine checks the default build: it imports from the
// checkpoint's code, and only --example asks for a build with the engine,
// saying how to make one in the user's module and how to import without.
func TestImportWithoutEngine(t *testing.T) {
	if importEngine != nil {
		t.Skip("built with -tags torch")
	}
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "echo.pt")
	echoArchive(t, ckpt)
	manifest := filepath.Join(dir, "echo.yaml")
	code, out, errs := wfgenRun("import", "--method", "forward", "--method", "label", "-o", manifest, ckpt)
	if code != 0 || out != "" || !strings.Contains(errs, "wrote "+manifest+"; fill in its TODOs, then run: ") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"uri: echo.pt", "task_id: label", "kind: text", "kind: string_list", "default: ','"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("manifest lacks %q:\n%s", want, data)
		}
	}
	if code, vout, verrs := wfgenRun("validate", manifest); code != 0 {
		t.Errorf("validate: exit %d\n%s%s", code, vout, verrs)
	}
	// In a new module, -o manifests/x.yaml makes the folder; the URI is
	// relative to it.
	nested := filepath.Join(dir, "manifests", "echo.yaml")
	if code, out, errs := wfgenRun("import", "-o", nested, ckpt); code != 0 || out != "" {
		t.Errorf("import -o into a missing folder: exit %d\n%s%s", code, out, errs)
	} else if data, err := os.ReadFile(nested); err != nil || !strings.Contains(string(data), "uri: ../echo.pt") {
		t.Errorf("%s: %v\n%s", nested, err, data)
	}

	ex := filepath.Join(dir, "x.npy")
	if err := artifactio.WriteNPY(ex, tensor.FromFloat32([]float32{1, 2}, 2)); err != nil {
		t.Fatal(err)
	}
	code, out, errs = wfgenRun("import", "--family", "echo", "--example", "x="+ex, "--batched", ckpt)
	if code != 2 || out != "" {
		t.Errorf("--example: exit %d, stdout %q", code, out)
	}
	for _, want := range []string{
		"--example runs the model on the examples to learn its outputs' dtypes and\nshapes, which needs the libtorch engine",
		"\n    " + selfCommand() + " import --family echo -- " + ckpt + "\n",
		"go build honours its\nreplace directives",
		"\n    go build -tags torch -o wfgen-torch github.com/worldfoundry/wfgen/cmd/wfgen\n",
		"\n    ./wfgen-torch import --family echo --example x=" + ex + " --batched " + ckpt + "\n",
		"apt-get install libtorch-dev", "CGO_ENABLED=1",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("message lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "@latest") {
		t.Errorf("advice that ignores replace directives:\n%s", errs)
	}
	for _, args := range [][]string{{"import"}, {"import", "a.pt", "b.pt"}, {"import", "--bogus", "a.pt"}, {"import", "missing.pt"}} {
		if code, _, _ := wfgenRun(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// Bad examples are usage errors, found before the engine is needed.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "--batched", "a.pt"}, "--batched says the examples are batches; give them with --example ARG=FILE.npy"},
		{[]string{"import", "--example", "x=missing.npy", "a.pt"}, "wfgen import: --example x: open missing.npy: no such file or directory"},
		{[]string{"import", "--example", "x", "a.pt"}, `--example "x": want NAME=FILE.npy`},
	} {
		code, _, errs := wfgenRun(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := wfgenRun("import", "--method", "nope", ckpt); code != 1 || !strings.Contains(errs, "(its methods: forward, label)") {
		t.Errorf("unknown method: exit %d %s", code, errs)
	}
}

// TestDefaultBuildLinksNoTorch checks the layering rule: the default wfgen
// does not depend on runtime/torch and builds with CGO_ENABLED=0.
func TestDefaultBuildLinksNoTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds wfgen")
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "runtime/torch") {
		t.Error("the default wfgen depends on runtime/torch")
	}
	build := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "wfgen"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

// TestImportTorchBuild builds wfgen with -tags torch, imports a module
// scripted with Debian's python3-torch and validates the result; with
// --example the engine runs it.
func TestImportTorchBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds wfgen with libtorch")
	}
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import torch (install python3-torch): %v\n%s", python, err, out)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wfgen")
	if out, err := exec.Command("go", "build", "-tags", "torch", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags torch: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "export.py")
	ckpt := filepath.Join(dir, "ckpt", "Echo Model.pt")
	if err := os.MkdirAll(filepath.Dir(ckpt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(`import sys, torch
from typing import List
class Echo(torch.nn.Module):
    def forward(self, x: torch.Tensor, k: int = 2) -> torch.Tensor:
        return x * k
    @torch.jit.export
    def label(self, names: List[str], sep: str = ",") -> str:
        return sep.join(names)
torch.jit.script(Echo()).save(sys.argv[1])
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, script, ckpt).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	wfgen := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}

	manifest := filepath.Join(dir, "manifests", "echo.yaml")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	code, out, errs := wfgen("import", "--method", "forward", "--method", "label", "--family", "echo", "-o", manifest, ckpt)
	if code != 0 || out != "" || !strings.Contains(errs, "wrote "+manifest) {
		t.Fatalf("import -o: exit %d\n%s%s", code, out, errs)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"uri: ../ckpt/Echo Model.pt", "task_id: label", "kind: text", "kind: string_list", "default: ','"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("manifest lacks %q:\n%s", want, data)
		}
	}
	if code, vout, verrs := wfgenRun("validate", manifest); code != 0 {
		t.Errorf("validate: exit %d\n%s%s", code, vout, verrs)
	}
	// Standard output, and the same bytes on a second run (but the uri).
	_, out1, _ := wfgen("import", "--family", "echo", ckpt)
	_, out2, _ := wfgen("import", "--family", "echo", ckpt)
	if out1 == "" || out1 != out2 || !strings.Contains(out1, "uri: "+filepath.ToSlash(ckpt)) {
		t.Errorf("stdout import not deterministic or wrong uri:\n%s", out1)
	}

	// An example batch gives the field and the output dtype and shape, and
	// makes the task batchable.
	ex := filepath.Join(dir, "x.npy")
	if err := artifactio.WriteNPY(ex, tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)); err != nil {
		t.Fatal(err)
	}
	batched := filepath.Join(dir, "manifests", "echo-batched.yaml")
	if code, out, errs := wfgen("import", "--family", "echo", "--example", "x="+ex, "--batched", "-o", batched, ckpt); code != 0 {
		t.Fatalf("import --example --batched: exit %d\n%s%s", code, out, errs)
	}
	data, err = os.ReadFile(batched)
	if err != nil {
		t.Fatal(err)
	}
	if got := regexp.MustCompile(`(?m)^\s*(dtype|shape|dim|max_batch_size): .*$`).FindAllString(string(data), -1); len(got) != 6 ||
		strings.Join(strings.Fields(strings.Join(got, " ")), " ") != "max_batch_size: 2 dim: N dtype: float32 shape: [N, 3] dtype: float32 shape: [N, 3]" {
		t.Errorf("batched import: %q\n%s", got, data)
	}
	if code, vout, verrs := wfgenRun("validate", batched); code != 0 {
		t.Errorf("validate: exit %d\n%s%s", code, vout, verrs)
	}
	if code, _, errs := wfgen("import", "--example", "k="+ex, ckpt); code != 1 || !strings.Contains(errs, "argument k of forward is int; examples are for Tensor and List[Tensor] arguments") {
		t.Errorf("example for an int: exit %d %s", code, errs)
	}

	if code, _, errs := wfgen("import", "--method", "nope", ckpt); code != 1 || !strings.Contains(errs, "forward, label") {
		t.Errorf("unknown method: exit %d %s", code, errs)
	}
	if code, _, _ := wfgen("import", filepath.Join(dir, "missing.pt")); code != 2 {
		t.Errorf("missing checkpoint: exit %d", code)
	}
	// A missing folder is made (the first import of a new module); one
	// that cannot be (a file is in the way) is an error.
	if code, _, _ := wfgen("import", "-o", filepath.Join(ckpt, "under-a-file.yaml"), ckpt); code != 2 {
		t.Errorf("unwritable output: exit %d", code)
	}
	if code, _, errs := wfgen("import", script); code != 1 || !strings.Contains(errs, "export.py") {
		t.Errorf("not a TorchScript file: exit %d %s", code, errs)
	}
}
