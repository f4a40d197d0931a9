package client_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/infra"
	"github.com/worldfoundry/wfgen/runtime/stream"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// tiny holds the tiny families' checkpoints (examples/tinymodels), built once
// for the package's tests and removed when they are over.
var tiny = enginetest.Checkpoints{Name: "client-test", Build: tinymodels.Build}

func TestMain(m *testing.M) { enginetest.Main(m) }

func loadSpec(t *testing.T, name string) *wfspec.ModelInferenceSpec {
	t.Helper()
	f, diags, err := validate.File(filepath.Join("..", "..", "manifests", name+".yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	return f.Spec
}

func tokens(i int) *tensor.Tensor {
	v := make([]int64, 6)
	for j := range v {
		v[j] = int64(i*7 + j*13)
	}
	return tensor.FromInt64(v, 6)
}

func TestEncoderRunAndBatchMatchDirectCalls(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 37
	items := make([]map[string]any, n)
	want := make([][]float32, n)
	mod, err := c.Module()
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		items[i] = map[string]any{"tokens": tokens(i)}
		out, err := c.Run(ctx, "embed", items[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		emb, err := tensor.AsEmbedding(out["embedding"])
		if err != nil {
			t.Fatal(err)
		}
		if want[i], err = emb.Vector.Float32s(); err != nil {
			t.Fatal(err)
		}
		direct, err := mod.Call(ctx, "forward", map[string]any{"tokens": tokens(i), "normalize": true}, engine.CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := direct.(*tensor.Tensor).Float32s()
		assertClose(t, d, want[i], 0)
	}
	got, err := c.RunBatch(ctx, "embed", items)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("got %d outputs, want %d", len(got), n)
	}
	for i := range got {
		v, err := got[i]["embedding"].(*tensor.Tensor).Float32s()
		if err != nil {
			t.Fatal(err)
		}
		assertClose(t, v, want[i], 1e-5)
	}
}

func assertClose(t *testing.T, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("[%d] = %v, want %v (tolerance %g)", i, got[i], want[i], tol)
		}
	}
}

func TestWorldGenerateAndStream(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	spec := loadSpec(t, "tiny-world")
	c, err := client.New(spec, client.WithCheckpointRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	out, err := c.Run(ctx, "text-to-video", map[string]any{"prompt": "a red fox", "num_frames": int64(5), "height": int64(16), "width": int64(32)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tensor.AsVideo(out["video"], 8)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Frames.Shape; len(got) != 4 || got[0] != 5 || got[1] != 16 || got[2] != 32 || got[3] != 3 {
		t.Fatalf("video shape %v", got)
	}

	s, err := c.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(4), stream.WithControls(stream.Controls{"right": 1}))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	var firstFrames []int64
	for ch, err := range s.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, ch.Video.Frames.Shape[0])
		firstFrames = append(firstFrames, ch.FirstFrame)
	}
	if want := []int64{4, 2, 2, 2}; !slices.Equal(sizes, want) {
		t.Fatalf("chunk sizes %v, want %v (first_chunk_frames 4, steady 2)", sizes, want)
	}
	if want := []int64{0, 4, 6, 8}; !slices.Equal(firstFrames, want) {
		t.Fatalf("first frames %v, want %v", firstFrames, want)
	}
}

func TestStreamStateCarriesAcrossChunks(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	c, err := client.New(loadSpec(t, "tiny-world"), client.WithCheckpointRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// A stateless rerun of chunk 1 (no state) must differ from the stateful
	// chunk 1, because the state moves the time origin by the frames so far.
	s, err := c.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(2))
	if err != nil {
		t.Fatal(err)
	}
	var chunks []*tensor.Video
	for ch, err := range s.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, ch.Video)
	}
	mod, _ := c.Module()
	fresh, err := mod.Call(ctx, "step", map[string]any{"num_frames": int64(2), "controls": []any{0.0, 0.0, 0.0, 0.0}}, engine.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	freshFrames := fresh.(map[string]any)["frames"].(*tensor.Tensor)
	if string(freshFrames.Data) == string(chunks[1].Frames.Data) {
		t.Fatal("chunk 1 equals a stateless first step: state did not carry across chunks")
	}
}

func TestContractMismatchFailsAtLoad(t *testing.T) {
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
	if err == nil || !strings.Contains(err.Error(), "normalize") || !strings.Contains(err.Error(), "does not match method forward") {
		t.Fatalf("want a load error naming field normalize, got %v", err)
	}
}

func TestCorruptedCheckpointRefused(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	spec := loadSpec(t, "tiny-encoder")
	spec.Variants[0].Checkpoints[0].SHA256 = strings.Repeat("0", 64)
	c, err := client.New(spec, client.WithCheckpointRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil)
	if !errors.Is(err, client.ErrCheckpoint) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("want a sha256 refusal, got %v", err)
	}
}

func TestCheckpointRootFromEnvAndClose(t *testing.T) {
	dir := tiny.Dir(t)
	t.Setenv(client.CheckpointRootEnv, dir)
	c, err := client.New(loadSpec(t, "tiny-encoder"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Load(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.Run(context.Background(), "embed", map[string]any{"tokens": tokens(1)}, nil); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("run after close: %v", err)
	}
	if n, err := client.ReleaseCaches(); err != nil || n == 0 {
		t.Fatalf("release caches: released %d, %v", n, err)
	}
}

func TestDropCachesReleasesUnusedModules(t *testing.T) {
	dir := tiny.Dir(t)
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(dir))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := c.Module()
	if err != nil {
		t.Fatal(err)
	}
	if err := infra.DropCaches(); err != nil {
		t.Fatal(err)
	}
	// In use: still open after the drop.
	if _, err := mod.Call(context.Background(), "forward", map[string]any{"tokens": tokens(1)}, engine.CallOptions{}); err != nil {
		t.Fatalf("module in use was released: %v", err)
	}
	c.Close()
	if err := infra.DropCaches(); err != nil {
		t.Fatal(err)
	}
	if _, err := mod.Call(context.Background(), "forward", map[string]any{"tokens": tokens(1)}, engine.CallOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("unused module still open after DropCaches: %v", err)
	}
}
