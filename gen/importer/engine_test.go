//go:build cgo

package importer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// kindsSource has every argument kind the issue lists, with defaults, and
// two return shapes. It compiles under Module::define.
const kindsSource = `
def forward(self, prompt: str, x: Tensor, steps: int = 3, scale: float = 1.5, flag: bool = True,
            sizes: List[int] = [2, 3], mask: Optional[Tensor] = None) -> Dict[str, Tensor]:
    y = x * scale + float(len(prompt))
    if flag:
        y = y + float(steps)
    if mask is not None:
        y = y * mask
    return {"y": y, "sizes": torch.tensor(sizes)}

def encode(self, tokens: List[str], weights: List[float] = [0.5, 0.25], keep: List[bool] = [True]) -> Tensor:
    w = torch.tensor(weights)
    return w * float(len(tokens)) + float(len(keep))
`

func TestImportBuiltModule(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "checkpoints", "kinds.pt")
	if err := os.MkdirAll(filepath.Dir(ckpt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := torch.BuildModule(torch.ModuleSource{Source: kindsSource}, ckpt); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kinds.yaml")
	res, err := Import(torch.Default(), ckpt, Options{Methods: []string{"forward", "encode"}, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	// The skeleton passes wfgen validate, and is written as it is.
	f, diags := validate.Bytes(out, res.YAML)
	if len(diags) > 0 {
		t.Fatalf("validate %s: %v\n%s", out, diags, res.YAML)
	}
	if err := WriteFile(out, res.YAML); err != nil {
		t.Fatal(err)
	}
	if written, err := os.ReadFile(out); err != nil || string(written) != string(res.YAML) {
		t.Fatalf("written file differs: %v", err)
	}
	spec := f.Spec
	fwd, _ := spec.Task("forward")
	var got []string
	for _, in := range fwd.Inputs {
		got = append(got, in.FieldID+":"+string(in.Kind))
	}
	want := []string{"prompt:string", "x:tensor", "steps:int", "scale:float", "flag:bool", "sizes:int_list", "mask:tensor"}
	if !slices.Equal(got, want) {
		t.Errorf("forward fields %v, want %v", got, want)
	}
	if len(fwd.Outputs) != 2 || fwd.Outputs[0].ArtifactID != "y" || fwd.Outputs[1].ArtifactID != "sizes" || !fwd.Outputs[0].Required {
		t.Errorf("forward artifacts from the dict's keys: %+v", fwd.Outputs)
	}
	if d, _ := fwd.Field("sizes"); d == nil || !slices.Equal(d.Default.([]int64), []int64{2, 3}) {
		t.Errorf("sizes default: %+v", d)
	}
	if m, _ := fwd.Field("mask"); m == nil || m.Required || m.Default != nil {
		t.Errorf("Optional[Tensor] = None is not an optional field: %+v", m)
	}

	// The contract check passes for every task against the same module.
	mod, err := torch.Default().Load(ckpt, runtime.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	for i := range spec.Tasks {
		task := &spec.Tasks[i]
		schema, err := mod.Schema(task.MethodName())
		if err != nil {
			t.Fatal(err)
		}
		if err := contract.Check(task, mod.Methods(), schema); err != nil {
			t.Errorf("contract: %v", err)
		}
	}

	// The runtime client finds the checkpoint through the relative uri,
	// verifies its sha256 and size, and runs both tasks.
	c, err := client.New(spec, client.WithManifestDir(f.File.Dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	outs, err := c.Run(ctx, "forward", map[string]any{"prompt": "ab", "x": runtime.FromFloat32([]float32{1, 2}, 2)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := outs["y"].(*runtime.Tensor).Float32s()
	// y = x*1.5 + len("ab") + steps(3)
	if err != nil || !slices.Equal(y, []float32{6.5, 8}) {
		t.Errorf("y = %v %v, want [6.5 8]", y, err)
	}
	outs, err = c.Run(ctx, "encode", map[string]any{"tokens": []any{"a", "b", "c", "d"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := outs["output"].(*runtime.Tensor).Float32s()
	if err != nil || !slices.Equal(w, []float32{3, 2}) {
		t.Errorf("encode = %v %v, want [3 2]", w, err)
	}
}

func TestImportUnknownMethodAndBadFile(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "m.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: kindsSource}, ckpt); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(torch.Default(), ckpt, Options{Methods: []string{"step"}}); err == nil || !strings.Contains(err.Error(), "encode, forward") {
		t.Errorf("unknown method: %v", err)
	}
	bad := filepath.Join(dir, "bad.pt")
	if err := os.WriteFile(bad, []byte("not a TorchScript archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(torch.Default(), bad, Options{}); err == nil || !strings.Contains(err.Error(), "bad.pt") {
		t.Errorf("bad file: %v", err)
	}
}
