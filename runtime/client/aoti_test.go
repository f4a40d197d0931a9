//go:build cgo

package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// aotiFixture skips on an engine before libtorch 2.6 and returns the
// exported model.
func aotiFixture(t *testing.T, model string) aoti.Fixture {
	t.Helper()
	if v := torch.Default().LibtorchVersion(); !v.AtLeast(2, 6) {
		t.Skipf("AOTInductor packages need libtorch ≥ 2.6 (this engine: %s); run make test-libtorch2", v)
	}
	if testing.Short() {
		t.Skip("exports an AOTInductor package; skipped with -short")
	}
	f, err := aoti.Cached(context.Background(), model)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func aotiSpec(t *testing.T, name string) *wfspec.ModelInferenceSpec {
	t.Helper()
	f, diags, err := validate.File(filepath.Join("..", "..", "examples", "aoti", "manifests", name+".yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	return f.Spec
}

// rows returns n items of the encoder's features: item i is row i%3 of the
// reference input, scaled by 1+i/10.
func rows(ref *aoti.Reference, n int) []*tensor.Tensor {
	x, _ := ref.Inputs["features"].Float32s()
	d := int(ref.Inputs["features"].Shape[1])
	out := make([]*tensor.Tensor, n)
	for i := range out {
		r := i % int(ref.Inputs["features"].Shape[0])
		v := make([]float32, d)
		for j := range v {
			v[j] = x[r*d+j] * (1 + float32(i)/10)
		}
		out[i] = tensor.FromFloat32(v, 1, int64(d))
	}
	return out
}

// EmbedBatch over 100 items runs in batches the package was exported for
// (2 to 16 items; the manifest's 32 and pad size 32 give way), pads the
// last batch of 4 to the pad size 8, and gives each item what a direct
// call of the package gives it.
func TestAOTIEncoderBatchSplitsAndPadsWithinTheExportedRange(t *testing.T) {
	t.Parallel()
	f := aotiFixture(t, aoti.Encoder)
	ref, err := aoti.ReadReference(f.Reference)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(aotiSpec(t, "aoti-encoder"), client.WithCheckpointPath(f.Package), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	in := rows(ref, 100)
	items := make([]map[string]any, len(in))
	for i, x := range in {
		items[i] = map[string]any{"features": &tensor.Tensor{DType: x.DType, Shape: x.Shape[1:], Data: x.Data}}
	}
	var last batch.Stats
	res, err := c.RunBatch(ctx, "embed", items, batch.WithStats(func(s batch.Stats) { last = s }))
	if err != nil {
		t.Fatal(err)
	}
	if last.Calls != 7 || last.Batches != 7 || last.Padded != 4 || last.Done != 100 {
		t.Errorf("stats %+v: want 7 calls (6 of 16, the last 4 padded to 8), 4 padding items", last)
	}
	mod, err := c.Module()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range in {
		// A direct call needs a batch of at least 2: the item twice.
		two := &tensor.Tensor{DType: x.DType, Shape: []int64{2, x.Shape[1]}, Data: append(append([]byte(nil), x.Data...), x.Data...)}
		out, err := mod.Call(ctx, "forward", map[string]any{"features": two}, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := out.(map[string]any)["embedding"].(*tensor.Tensor)
		want = &tensor.Tensor{DType: want.DType, Shape: want.Shape[1:], Data: want.Data[:len(want.Data)/2]}
		got := res[i]["embedding"].(*tensor.Tensor)
		if d, err := aoti.MaxRelDiff(got, want); err != nil || d > 1e-6 {
			t.Fatalf("item %d: embedding differs from a direct call by %g (%v): %v vs %v", i, d, err, got.Shape, want.Shape)
		}
		if n, ok := res[i]["norm"].(*tensor.Tensor); !ok || len(n.Shape) != 0 {
			t.Fatalf("item %d: norm %v", i, res[i]["norm"])
		}
	}

	// A single call runs as a batch of one, padded to the package's 2.
	one, err := c.Run(ctx, "embed", items[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := aoti.MaxRelDiff(one["embedding"].(*tensor.Tensor), res[0]["embedding"].(*tensor.Tensor)); err != nil || d > 1e-6 {
		t.Fatalf("Run differs from RunBatch by %g (%v)", d, err)
	}
}

// A manifest that disagrees with the package fails the load, every problem
// named: a field for an argument the export baked in, a misnamed artifact,
// a dtype the package was not exported with.
func TestAOTIManifestDisagreeingWithThePackageFailsAtLoad(t *testing.T) {
	t.Parallel()
	f := aotiFixture(t, aoti.Encoder)
	spec := aotiSpec(t, "aoti-encoder")
	task := &spec.Tasks[0]
	task.Inputs = append(task.Inputs, wfspec.InferenceFieldSpec{FieldID: "normalize", Kind: wfspec.KindBool, Target: wfspec.TargetCallKwargs, Default: true})
	task.Inputs[0].DType = tensor.Float16
	task.Outputs[0].ArtifactID = "embeddings"
	c, err := client.New(spec, client.WithCheckpointPath(f.Package), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Load()
	if !errors.Is(err, contract.ErrMismatch) {
		t.Fatalf("load: %v, want a contract mismatch", err)
	}
	for _, want := range []string{
		`aoti-encoder/default: checkpoint ` + f.Package + `: task "embed" does not match method forward of the checkpoint (3 problems)`,
		`field "features": expected dtype float32 (input features: float32[batch,32]), found dtype float16`,
		`field "normalize": expected a tensor input of the package, found argument normalize baked in at export as the constant bool true`,
		`artifact "embeddings": expected a key "embeddings" in the dict the package returns (the artifact is required), found only the keys "embedding", "norm"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("load error\n%v\nlacks %q", err, want)
		}
	}

	// The manifest declaring the other format.
	spec = aotiSpec(t, "aoti-encoder")
	spec.Variants[0].Checkpoints[0].Format = wfspec.FormatTorchScript
	c2, err := client.New(spec, client.WithCheckpointPath(f.Package), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, _, err := c2.Load(); err == nil || !strings.Contains(err.Error(), "is an AOTInductor package, but format torchscript was declared for it") {
		t.Fatalf("format torchscript: %v", err)
	}
}

// mobilenet_v3_small through the client gives Python's logits for each
// picture of the reference batch.
func TestAOTIMobileNetThroughTheClient(t *testing.T) {
	t.Parallel()
	f := aotiFixture(t, aoti.MobileNet)
	ref, err := aoti.ReadReference(f.Reference)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(aotiSpec(t, "aoti-mobilenet"), client.WithCheckpointPath(f.Package), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x, want := ref.Inputs["x"], ref.Outputs["output"]
	n := int(x.Shape[0])
	items := make([]map[string]any, n)
	for i := range items {
		size := len(x.Data) / n
		items[i] = map[string]any{"x": &tensor.Tensor{DType: x.DType, Shape: x.Shape[1:], Data: x.Data[i*size : (i+1)*size]}}
	}
	res, err := c.RunBatch(context.Background(), "classify", items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		size := len(want.Data) / n
		row := &tensor.Tensor{DType: want.DType, Shape: want.Shape[1:], Data: want.Data[i*size : (i+1)*size]}
		if d, err := aoti.MaxRelDiff(res[i]["logits"].(*tensor.Tensor), row); err != nil || d > 1e-5 {
			t.Fatalf("picture %d: logits differ from Python's by %g (%v)", i, d, err)
		}
	}
	if dev, dt, err := c.Load(); err != nil || dev != "cpu" || dt != "" {
		t.Fatalf("Load: %q %q %v (a package keeps its dtype)", dev, dt, err)
	}
}
