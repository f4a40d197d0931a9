package client_test

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/infra"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A task whose inputs have no tensor to stack must not be batched: the
// world model's generate takes a prompt and ints, so five items would be
// one call whose frames get cut into five "items".
func TestRunBatchRefusesTaskWithoutTensorInput(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	spec := loadSpec(t, "tiny-world")
	task, err := spec.Task("generate")
	if err != nil {
		t.Fatal(err)
	}
	task.Batching = &wfspec.BatchingSpec{MaxBatchSize: 8}
	c, err := client.New(spec, client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	items := make([]map[string]any, 5)
	for i := range items {
		items[i] = map[string]any{"prompt": "a red fox", "num_frames": int64(5)}
	}
	calls := 0
	out, err := c.RunBatch(context.Background(), "generate", items, batch.WithStats(func(s batch.Stats) { calls = s.Calls }))
	if err == nil {
		t.Fatalf("RunBatch returned %d outputs and no error for a task without tensor inputs", len(out))
	}
	if out != nil || calls != 0 {
		t.Errorf("outputs %v, %d forward calls; want nothing run", out, calls)
	}
	for _, want := range []string{"tiny-world/default generate", "batching", "tensor, image or video"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// Run-time batch options follow the manifest's rules: a pad size above the
// task's max batch size is refused before anything runs (or loads: the
// checkpoint root here is empty).
func TestRunBatchChecksRunTimeOptions(t *testing.T) {
	t.Parallel()
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(t.TempDir()), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	items := make([]map[string]any, 5)
	for i := range items {
		items[i] = map[string]any{"tokens": tokens(i)}
	}
	var st batch.Stats
	out, err := c.RunBatch(context.Background(), "embed", items, batch.WithPadSizes(1, 16), batch.WithStats(func(s batch.Stats) { st = s }))
	if err == nil {
		t.Fatalf("WithPadSizes(1, 16) on a task with max_batch_size 8 ran (%d outputs, %d padding items sent)", len(out), st.Padded)
	}
	if want := "tiny-encoder/default embed: batch: max batch size 8, pad sizes [1 16]: pad_to_batch_sizes entry 16 exceeds max_batch_size 8"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if st.Calls != 0 {
		t.Errorf("%d forward calls, want none", st.Calls)
	}
}

// flipTensorBytes copies src to a new file with n bytes of the first tensor
// record inverted: the archive still loads (tensor data carries no
// checksum libtorch checks), but the weights are wrong.
func flipTensorBytes(t *testing.T, src string, n int) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(strings.NewReader(string(data)), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if !strings.Contains(f.Name, "/data/") || f.Method != zip.Store || f.UncompressedSize64 < uint64(n) {
			continue
		}
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			data[off+int64(i)] ^= 0xff
		}
		dst := filepath.Join(t.TempDir(), "flipped.pt")
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	t.Fatalf("%s has no stored tensor record of %d bytes", src, n)
	return ""
}

// A checkpoint passed by path is verified against the manifest's sha256
// and size like one found through the manifest; skipping the check is an
// explicit option.
func TestCheckpointPathIsVerified(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	good := filepath.Join(dir, tinymodels.Files["tiny-encoder"])
	sum, err := client.FileSHA256(good)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(good)
	if err != nil {
		t.Fatal(err)
	}
	spec := loadSpec(t, "tiny-encoder")
	spec.Variants[0].Checkpoints[0].SHA256 = sum
	spec.Variants[0].Checkpoints[0].SizeBytes = st.Size()
	flipped := flipTensorBytes(t, good, 64)

	c, err := client.New(spec, client.WithCheckpointPath(flipped), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil)
	if err == nil {
		t.Fatal("a checkpoint with 64 flipped bytes ran")
	}
	if !errors.Is(err, client.ErrCheckpoint) {
		t.Errorf("error %v does not match client.ErrCheckpoint", err)
	}
	for _, want := range []string{flipped, "sha256", sum, "WithoutCheckpointVerification"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	// The right file by path passes.
	ok, err := client.New(spec, client.WithCheckpointPath(good), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if _, err := ok.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil); err != nil {
		t.Fatalf("the manifest's own checkpoint by path: %v", err)
	}
}

// A malformed WORLDFOUNDRY_* variable fails the load, naming the variable,
// as infra.Run does; once it is fixed the next load succeeds.
func TestMalformedPolicyVariableFailsLoad(t *testing.T) {
	dir := tiny.Dir(t)
	if _, err := infra.Uninstall(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(infra.EnvMatmulPrecision, "fastest")
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Load()
	if err == nil || !strings.Contains(err.Error(), infra.EnvMatmulPrecision) || !strings.Contains(err.Error(), "fastest") {
		t.Fatalf("load with %s=fastest: %v; want an error naming the variable", infra.EnvMatmulPrecision, err)
	}
	if _, err := c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil); err == nil || !strings.Contains(err.Error(), infra.EnvMatmulPrecision) {
		t.Fatalf("run with %s=fastest: %v; want the same error", infra.EnvMatmulPrecision, err)
	}
	t.Setenv(infra.EnvMatmulPrecision, "high")
	if _, _, err := c.Load(); err != nil {
		t.Fatalf("load after fixing the variable: %v", err)
	}
	if st := infra.CurrentState(); !st.Installed || st.MatmulPrecision != infra.PrecisionHigh {
		t.Fatalf("policy state after the load: %+v", st)
	}
}

// Errors say each thing once: the family/variant prefix and the task do
// not repeat.
func TestLoadErrorSaysEachThingOnce(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	spec := loadSpec(t, "tiny-encoder")
	spec.Tasks[0].Inputs[1].Kind = wfspec.KindString // normalize: bool in the checkpoint
	c, err := client.New(spec, client.WithCheckpointRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if n := strings.Count(msg, "tiny-encoder/default"); n != 1 {
		t.Errorf("%q names the family/variant %d times", msg, n)
	}
	if n := strings.Count(msg, "embed"); n != 1 {
		t.Errorf("%q names the task %d times", msg, n)
	}
	if n := strings.Count(msg, "does not match"); n != 1 {
		t.Errorf("%q says \"does not match\" %d times", msg, n)
	}
}

// oneTaskSpec is a family with one variant whose model checkpoint is path
// and one task running forward(x: Tensor) with the given outputs.
func oneTaskSpec(path string, outputs ...wfspec.InferenceArtifactSpec) *wfspec.ModelInferenceSpec {
	return &wfspec.ModelInferenceSpec{
		ModelFamilyID:    "probe",
		DefaultVariantID: "default",
		DefaultTaskID:    "run",
		Variants: []wfspec.InferenceVariantSpec{{VariantID: "default",
			Checkpoints: []wfspec.InferenceCheckpointRef{{Role: "model", URI: path, Required: true}}}},
		Tasks: []wfspec.InferenceTaskProfile{{TaskID: "run",
			Inputs:  []wfspec.InferenceFieldSpec{{FieldID: "x", Kind: wfspec.KindTensor, Target: wfspec.TargetCallKwargs, Required: true}},
			Outputs: outputs}},
	}
}

func defineModule(t *testing.T, source string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.pt")
	if err := torch.DefineModule(source, nil, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// What a method returns is checked at load where the module tells: the
// keys of a dict built from literals in its TorchScript code, and the
// return type in its schema.
func TestReturnedArtifactsCheckedAtLoad(t *testing.T) {
	t.Parallel()
	x := tensor.FromFloat32([]float32{1, 2, 3}, 3)
	for _, tc := range []struct {
		name, source string
		outputs      []wfspec.InferenceArtifactSpec
		want         []string // in the load error; none: the load succeeds
		callWant     string   // in the first call's error, when the load succeeds
	}{
		{
			name: "missing required key",
			source: `
def forward(self, x: Tensor) -> Dict[str, Tensor]:
    out = {"frames": x * 2.0}
    if bool(x.sum() > 100.0):
        out["mask"] = x
    return out
`,
			outputs: []wfspec.InferenceArtifactSpec{{ArtifactID: "video", Kind: wfspec.ArtifactTensor, Required: true}, {ArtifactID: "mask", Kind: wfspec.ArtifactTensor}},
			want:    []string{`artifact "video"`, `"frames"`, `"mask"`},
		},
		{
			name: "str for an embedding",
			source: `
def forward(self, x: Tensor) -> str:
    return "an embedding"
`,
			outputs: []wfspec.InferenceArtifactSpec{{ArtifactID: "embedding", Kind: wfspec.ArtifactEmbedding, Required: true}},
			want:    []string{`artifact "embedding"`, "str"},
		},
		{
			name: "keys built at run time",
			source: `
def forward(self, x: Tensor, names: List[str] = ["frames"]) -> Dict[str, Tensor]:
    out: Dict[str, Tensor] = {}
    for n in names:
        out[n] = x
    return out
`,
			outputs:  []wfspec.InferenceArtifactSpec{{ArtifactID: "video", Kind: wfspec.ArtifactTensor, Required: true}},
			callWant: `did not return required artifact(s) [video] (returned keys: [frames])`,
		},
		{
			name: "all keys present",
			source: `
def forward(self, x: Tensor) -> Dict[str, Tensor]:
    return {"video": x, "mask": x}
`,
			outputs: []wfspec.InferenceArtifactSpec{{ArtifactID: "video", Kind: wfspec.ArtifactTensor, Required: true}, {ArtifactID: "mask", Kind: wfspec.ArtifactTensor}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(oneTaskSpec(defineModule(t, tc.source), tc.outputs...), client.WithDevice("cpu"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _, err = c.Load()
			if len(tc.want) > 0 {
				if err == nil {
					t.Fatal("the load succeeded")
				}
				t.Logf("load error: %v", err)
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("load error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			_, err = c.Run(context.Background(), "run", map[string]any{"x": x}, nil)
			switch {
			case tc.callWant == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tc.callWant != "" && (err == nil || !strings.Contains(err.Error(), tc.callWant)):
				t.Fatalf("run: %v, want an error containing %q", err, tc.callWant)
			}
		})
	}
}

// A per-item failure inside TorchScript keeps the interpreter's last line
// in the message; the traceback stays reachable with errors.As.
func TestPerItemScriptErrorIsShort(t *testing.T) {
	t.Parallel()
	path := defineModule(t, `
def forward(self, x: Tensor) -> Tensor:
    y = self.check(x)
    return y * 2.0

def check(self, x: Tensor) -> Tensor:
    assert bool(x.abs().max() < 100.0), "value out of range"
    return x
`)
	spec := oneTaskSpec(path, wfspec.InferenceArtifactSpec{ArtifactID: "y", Kind: wfspec.ArtifactTensor, Required: true})
	spec.Tasks[0].Batching = &wfspec.BatchingSpec{MaxBatchSize: 4}
	c, err := client.New(spec, client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	items := make([]map[string]any, 6)
	for i := range items {
		v := float32(i)
		if i == 3 {
			v = 1000
		}
		items[i] = map[string]any{"x": tensor.FromFloat32([]float32{v, v, v}, 3)}
	}
	out, err := c.RunBatch(context.Background(), "run", items, batch.WithPerItemErrors())
	var ie batch.ItemErrors
	if !errors.As(err, &ie) || len(ie) != 1 || ie[0].Index != 3 || len(out) != 6 {
		t.Fatalf("outputs %d, error %v; want item 3 alone to fail", len(out), err)
	}
	msg := err.Error()
	if strings.Contains(msg, "Traceback") || strings.Count(msg, "\n") > 0 {
		t.Errorf("the item error embeds the traceback:\n%s", msg)
	}
	if want := "AssertionError: value out of range"; !strings.Contains(msg, want) {
		t.Errorf("error %q does not contain %q", msg, want)
	}
	var se *engine.ScriptError
	if !errors.As(err, &se) || !strings.Contains(se.Traceback, "Traceback of TorchScript") ||
		!strings.Contains(se.Traceback, `assert bool(x.abs().max() < 100.0), "value out of range"`) {
		t.Errorf("errors.As finds %+v; want the whole traceback", se)
	}
}

// WithoutCheckpointVerification loads a file that differs from what the
// manifest declares, by path or found through the manifest.
func TestWithoutCheckpointVerification(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	spec := loadSpec(t, "tiny-encoder")
	spec.Variants[0].Checkpoints[0].SHA256 = strings.Repeat("0", 64)
	spec.Variants[0].Checkpoints[0].SizeBytes = 5
	for _, opts := range [][]client.Option{
		{client.WithCheckpointRoot(dir)},
		{client.WithCheckpointPath(filepath.Join(dir, tinymodels.Files["tiny-encoder"]))},
	} {
		c, err := client.New(spec, append(opts, client.WithDevice("cpu"))...)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Load()
		if !errors.Is(err, client.ErrCheckpoint) || !strings.Contains(err.Error(), "manifest says 5") {
			t.Errorf("load: %v; want a size mismatch", err)
		}
		c.Close()
		c, err = client.New(spec, append(opts, client.WithDevice("cpu"), client.WithoutCheckpointVerification())...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil); err != nil {
			t.Errorf("run without verification: %v", err)
		}
		c.Close()
	}
}
