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
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/params"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
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
	t.Parallel()
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
	mod, err := torch.Default().Load(ckpt, engine.LoadOptions{Device: "cpu"})
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
	outs, err := c.Run(ctx, "forward", map[string]any{"prompt": "ab", "x": tensor.FromFloat32([]float32{1, 2}, 2)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := outs["y"].(*tensor.Tensor).Float32s()
	// y = x*1.5 + len("ab") + steps(3)
	if err != nil || !slices.Equal(y, []float32{6.5, 8}) {
		t.Errorf("y = %v %v, want [6.5 8]", y, err)
	}
	outs, err = c.Run(ctx, "encode", map[string]any{"tokens": []any{"a", "b", "c", "d"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := outs["output"].(*tensor.Tensor).Float32s()
	if err != nil || !slices.Equal(w, []float32{3, 2}) {
		t.Errorf("encode = %v %v, want [3 2]", w, err)
	}
}

func TestImportUnknownMethodAndBadFile(t *testing.T) {
	t.Parallel()
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

// encoderSource is a batched token encoder: int64 ids [N, L] in, a dict of
// per-item float32 embeddings [N, 4] and the whole batch's float32 total
// (not per item) out.
const encoderSource = `
def forward(self, tokens: Tensor, normalize: bool = True) -> Dict[str, Tensor]:
    e = torch.embedding(self.table, tokens).mean(dim=1)
    if normalize:
        e = e / e.norm(2, [1], True).clamp_min(1e-6)
    return {"embedding": e, "total": e.sum().reshape([1])}
`

// TestImportExamples imports a module with an example token batch read
// from a .npy file: the field gets int64 [N, 5], the task batching with
// dim N, and the outputs the dtype and shape the module returned on the
// example — the per-item one with N, the other none and a warning. The
// skeleton validates, and the runtime client runs it with the checks the
// declared contract implies.
func TestImportExamples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "enc.pt")
	table := make([]float32, 40)
	for i := range table {
		table[i] = float32(i%7) - 3
	}
	if err := torch.BuildModule(torch.ModuleSource{Source: encoderSource, Parameters: map[string]*tensor.Tensor{"table": tensor.FromFloat32(table, 10, 4)}}, ckpt); err != nil {
		t.Fatal(err)
	}
	npy := filepath.Join(dir, "tokens.npy")
	if err := artifactio.WriteNPY(npy, tensor.FromInt64([]int64{1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0, 9, 8, 7, 6}, 3, 5)); err != nil {
		t.Fatal(err)
	}
	name, ex, err := ReadExample("tokens=" + npy)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "enc.yaml")
	res, err := Import(torch.Default(), ckpt, Options{Output: out, Examples: map[string]Example{name: ex}, Batched: true})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes(out, res.YAML)
	if len(diags) > 0 {
		t.Fatalf("validate: %v\n%s", diags, res.YAML)
	}
	task := &f.Spec.Tasks[0]
	tok, _ := task.Field("tokens")
	emb, _ := task.Artifact("embedding")
	total, _ := task.Artifact("total")
	if tok.DType != tensor.Int64 || tok.Shape.String() != "[N,5]" ||
		emb.DType != tensor.Float32 || emb.Shape.String() != "[N,4]" ||
		total.DType != tensor.Float32 || total.Shape != nil ||
		task.Batching == nil || task.Batching.Dim != "N" || task.Batching.MaxBatchSize != 3 {
		t.Fatalf("tokens %s%s, embedding %s%s, total %s%s, batching %+v\n%s", tok.DType, tok.Shape, emb.DType, emb.Shape, total.DType, total.Shape, task.Batching, res.YAML)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "artifact total: forward returned float32[1] for a batch of 3") {
		t.Errorf("warnings: %v", res.Warnings)
	}

	// The runtime takes the skeleton: one item is int64 [5], and a float
	// item is refused before libtorch sees it.
	if err := WriteFile(out, res.YAML); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(f.Spec, client.WithManifestDir(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	outs, err := c.Run(context.Background(), "forward", map[string]any{"tokens": tensor.FromInt64([]int64{1, 2, 3, 4, 5}, 5)}, nil)
	if err != nil {
		t.Fatalf("run the imported task: %v", err)
	}
	if e := outs["embedding"].(*tensor.Tensor); e.DType != tensor.Float32 || !slices.Equal(e.Shape, []int64{4}) {
		t.Errorf("embedding %s%v, want float32[4] (one item)", e.DType, e.Shape)
	}
	check := params.MustCompile(task).Check()
	params.Tensor(&check, 0, tensor.FromFloat32(make([]float32, 5), 5))
	if err := check.Err(); err == nil || !strings.Contains(err.Error(), "tokens: want int64[5] (each item of [N,5]), got float32[5]") {
		t.Errorf("a float item: %v", err)
	}

	// An example the module cannot run on leaves the outputs to TODOs.
	bad := Example{File: "floats.npy", Tensor: tensor.FromFloat32(make([]float32, 10), 2, 5)}
	res, err = Import(torch.Default(), ckpt, Options{Examples: map[string]Example{"tokens": bad}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "running forward on the examples failed, so its outputs have no dtype or shape") {
		t.Errorf("warnings: %v", res.Warnings)
	}
	if !strings.Contains(string(res.YAML), "dtype: float32\n") || strings.Count(string(res.YAML), "Add the ones the model returns") != 2 {
		t.Errorf("skeleton after a failed run:\n%s", res.YAML)
	}
}
