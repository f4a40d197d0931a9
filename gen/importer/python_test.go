//go:build cgo

package importer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// debianPython is Debian's interpreter, the one python3-torch is installed
// for (the python3 first on PATH may be another).
const debianPython = "/usr/bin/python3"

// exportScript scripts a module with str, int, float, bool, Tensor and list
// arguments with defaults, saves it to argv[1], and prints what it returns
// for the inputs the test uses, as JSON.
const exportScript = `
import json, sys
from typing import Dict, List
import torch

class Kinds(torch.nn.Module):
    def forward(self, prompt: str, x: torch.Tensor, steps: int = 2, scale: float = 0.5, flag: bool = True,
                sizes: List[int] = (2, 3), weights: List[float] = (1.0, 2.0),
                tags: List[str] = ("a", "b")) -> Dict[str, torch.Tensor]:
        y = x * scale * float(steps) + float(len(prompt)) + float(len(tags))
        if flag:
            y = y + torch.tensor(weights).sum()
        return {"video": y, "sizes": torch.tensor(sizes)}

m = torch.jit.script(Kinds())
m.save(sys.argv[1])
out = m(prompt="abc", x=torch.tensor([1.0, 2.0, 3.0]), steps=4)
print(json.dumps({"video": out["video"].tolist(), "sizes": out["sizes"].tolist()}))
`

// pythonOutputs is what the module returned in Python.
type pythonOutputs struct {
	Video []float32 `json:"video"`
	Sizes []int64   `json:"sizes"`
}

// exportWithPython runs exportScript, or skips the test when Debian's
// python3 cannot import torch.
func exportWithPython(t *testing.T, path string) pythonOutputs {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import torch (install python3-torch): %v\n%s", debianPython, err, out)
	}
	// TorchScript compiles from the source file, so the script must be one.
	script := filepath.Join(t.TempDir(), "export_kinds.py")
	if err := os.WriteFile(script, []byte(exportScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(debianPython, script, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("export with %s: %v\n%s", debianPython, err, stderr.String())
	}
	var want pythonOutputs
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("python output %q: %v", out, err)
	}
	return want
}

// TestImportPythonExport is issue 8's done-when: a module scripted and
// saved by Python imports into a manifest that validates and runs its
// method through the runtime client with Python's results; generated into
// a typed package, it compiles and runs too (skipped with -short).
func TestImportPythonExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "py_kinds.pt")
	want := exportWithPython(t, ckpt)

	manifestPath := filepath.Join(dir, "manifests", "py-kinds.yaml")
	if err := os.MkdirAll(filepath.Dir(manifestPath), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Import(torch.Default(), ckpt, Options{Output: manifestPath})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	if err := WriteFile(manifestPath, res.YAML); err != nil {
		t.Fatal(err)
	}
	f, diags, err := validate.File(manifestPath)
	if err != nil || len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v %v\n%s", diags, err, res.YAML)
	}
	spec := f.Spec
	task, _ := spec.Task("")
	var kinds []string
	for _, in := range task.Inputs {
		kinds = append(kinds, in.FieldID+":"+string(in.Kind))
	}
	if want := []string{"prompt:string", "x:tensor", "steps:int", "scale:float", "flag:bool", "sizes:int_list", "weights:float_list", "tags:string_list"}; !slices.Equal(kinds, want) {
		t.Errorf("fields %v, want %v", kinds, want)
	}
	if w, _ := task.Field("weights"); w == nil || !slices.Equal(w.Default.([]float64), []float64{1, 2}) {
		t.Errorf("weights default: %+v", w)
	}

	// Run through the runtime client, with the checkpoint path given.
	c, err := client.New(spec, client.WithCheckpointPath(ckpt), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Run(context.Background(), "forward", map[string]any{"prompt": "abc", "x": tensor.FromFloat32([]float32{1, 2, 3}, 3), "steps": int64(4)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, "runtime client", out, want)

	if testing.Short() {
		t.Log("-short: not generating and compiling the typed package")
		return
	}
	generateAndRun(t, manifestPath, spec, ckpt, want)
}

func checkOutputs(t *testing.T, who string, out map[string]any, want pythonOutputs) {
	t.Helper()
	video, _ := out["video"].(*tensor.Tensor)
	sizes, _ := out["sizes"].(*tensor.Tensor)
	if video == nil || sizes == nil {
		t.Fatalf("%s: outputs %v", who, out)
	}
	v, err1 := video.Float32s()
	s, err2 := sizes.Int64s()
	if err1 != nil || err2 != nil || !slices.Equal(v, want.Video) || !slices.Equal(s, want.Sizes) {
		t.Errorf("%s: video %v sizes %v (%v %v); Python gave %v %v", who, v, s, err1, err2, want.Video, want.Sizes)
	}
}

// generateAndRun generates the typed package with "wfgen generate" into a
// temporary module, compiles a program that fills the typed params and
// runs them through runtime/client and through the generated typed client,
// and checks both outputs.
func generateAndRun(t *testing.T, manifestPath string, spec *spec.ModelInferenceSpec, ckpt string, want pythonOutputs) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	// goRun runs the go command in dir; env is added to the environment.
	goRun := func(dir string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOPROXY=off", "GOWORK=off"), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %v in %s: %v\n%s", args, dir, err, stderr.String())
		}
		return string(out)
	}
	goRun(root, nil, "run", "./cmd/wfgen", "generate", "-o", filepath.Join(mod, "gen"), manifestPath)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := naming.Package(spec.ModelFamilyID)
	files := map[string]string{
		"go.mod": "module example.com/imported\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0-00010101000000-000000000000\n\n" +
			"replace github.com/worldfoundry/wfgen => " + root + "\n",
		"go.sum":  string(sum),
		"main.go": strings.ReplaceAll(typedMain, "PKG", pkg),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets the go command complete the temporary module's go.mod
	// (from the replaced wfgen's requirements, offline); it only touches
	// that module.
	out := goRun(mod, []string{"GOFLAGS=-mod=mod"}, "run", ".", ckpt)
	var got struct {
		Runtime  map[string][]float64 `json:"runtime"`
		Typed    map[string][]float64 `json:"typed"`
		TypedErr string               `json:"typed_error"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("program output %q: %v", out, err)
	}
	check := func(who string, m map[string][]float64) {
		var v []float32
		var s []int64
		for _, x := range m["video"] {
			v = append(v, float32(x))
		}
		for _, x := range m["sizes"] {
			s = append(s, int64(x))
		}
		if !slices.Equal(v, want.Video) || !slices.Equal(s, want.Sizes) {
			t.Errorf("%s: video %v sizes %v; Python gave %v %v", who, v, s, want.Video, want.Sizes)
		}
	}
	check("generated params through the runtime client", got.Runtime)
	if got.TypedErr != "" {
		t.Fatalf("generated typed client: %s", got.TypedErr)
	}
	check("generated typed client", got.Typed)
}

// typedMain fills the generated params of task forward, validates them,
// runs them through runtime/client and through the generated client's
// Forward method, and prints both outputs as JSON.
const typedMain = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"example.com/imported/gen/PKG"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

func values(out map[string]any) map[string][]float64 {
	m := map[string][]float64{}
	for k, v := range out {
		t, ok := v.(*tensor.Tensor)
		if !ok {
			continue
		}
		if f, err := t.Float32s(); err == nil {
			for _, x := range f {
				m[k] = append(m[k], float64(x))
			}
		} else if i, err := t.Int64s(); err == nil {
			for _, x := range i {
				m[k] = append(m[k], float64(x))
			}
		}
	}
	return m
}

func main() {
	ctx := context.Background()
	p := PKG.DefaultForwardParams()
	p.Prompt = "abc"
	p.X = tensor.FromFloat32([]float32{1, 2, 3}, 3)
	p.Steps = 4
	if err := p.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := client.New(PKG.Spec(), client.WithCheckpointPath(os.Args[1]), client.WithDevice("cpu"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := c.Run(ctx, string(PKG.TaskForward), p.CallKwargs(), p.LoadKwargs())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res := map[string]any{"runtime": values(out)}
	tc, err := PKG.New(client.WithCheckpointPath(os.Args[1]), client.WithDevice("cpu"))
	if err == nil {
		var r *PKG.ForwardResult
		if r, err = tc.Forward(ctx, p); err == nil {
			res["typed"] = values(map[string]any{"video": r.Video, "sizes": r.Sizes})
		}
	}
	if err != nil {
		res["typed_error"] = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
}
`
