//go:build cgo

package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// aotiProgram runs the generated clients of the two AOTInductor example
// families the way a user would: EmbedBatch over the items of a JSON file,
// ClassifyBatch over the pictures of a raw float32 file.
const aotiProgram = `package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"example.com/e2e/models/aotiencoder"
	"example.com/e2e/models/aotimobilenet"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	var features [][]float32
	b, err := os.ReadFile(os.Args[3])
	if err != nil {
		fail(err)
	}
	if err := json.Unmarshal(b, &features); err != nil {
		fail(err)
	}
	enc, err := aotiencoder.New(client.WithCheckpointPath(os.Args[1]))
	if err != nil {
		fail(err)
	}
	defer enc.Close()
	var ps []aotiencoder.EmbedParams
	for _, f := range features {
		p := aotiencoder.DefaultEmbedParams()
		p.Features = tensor.FromFloat32(f, int64(len(f)))
		ps = append(ps, p)
	}
	res, err := enc.EmbedBatch(ctx, ps)
	if err != nil {
		fail(err)
	}
	var out struct {
		Embeddings [][]float32
		Logits     [][]float32
	}
	for _, r := range res {
		v, err := r.Embedding.Vector.Float32s()
		if err != nil {
			fail(err)
		}
		out.Embeddings = append(out.Embeddings, v)
	}

	raw, err := os.ReadFile(os.Args[4])
	if err != nil {
		fail(err)
	}
	pix := make([]float32, len(raw)/4)
	for i := range pix {
		pix[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	mob, err := aotimobilenet.New(client.WithCheckpointPath(os.Args[2]))
	if err != nil {
		fail(err)
	}
	defer mob.Close()
	const size = 3 * 224 * 224
	var qs []aotimobilenet.ClassifyParams
	for i := 0; i+size <= len(pix); i += size {
		q := aotimobilenet.DefaultClassifyParams()
		q.X = tensor.FromFloat32(pix[i:i+size], 3, 224, 224)
		qs = append(qs, q)
	}
	cls, err := mob.ClassifyBatch(ctx, qs)
	if err != nil {
		fail(err)
	}
	for _, r := range cls {
		v, err := r.Logits.Float32s()
		if err != nil {
			fail(err)
		}
		out.Logits = append(out.Logits, v)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
`

// The generated clients of an exported encoder (dynamic batch, 100 items
// through EmbedBatch) and of torchvision's mobilenet_v3_small, in a fresh
// module, give the package's outputs: the encoder's as direct engine calls
// give them, mobilenet's as Python's torch._inductor.aoti_load_package.
func TestAOTIGeneratedClients(t *testing.T) {
	t.Parallel()
	if v := torch.Default().LibtorchVersion(); !v.AtLeast(2, 6) {
		t.Skipf("AOTInductor packages need libtorch ≥ 2.6 (this engine: %s); run make test-libtorch2", v)
	}
	if testing.Short() {
		t.Skip("exports AOTInductor packages and builds a module; skipped with -short")
	}
	ctx := context.Background()
	enc, err := aoti.Cached(ctx, aoti.Encoder)
	must(t, err)
	mob, err := aoti.Cached(ctx, aoti.MobileNet)
	must(t, err)
	encRef, err := aoti.ReadReference(enc.Reference)
	must(t, err)
	mobRef, err := aoti.ReadReference(mob.Reference)
	must(t, err)

	root := repoRoot(t)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "manifests"), 0o755))
	for _, name := range []string{"aoti-encoder.yaml", "aoti-mobilenet.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "aoti", "manifests", name))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "manifests", name), b, 0o644))
	}
	gomod := "module example.com/e2e\n\ngo 1.26\n\nrequire github.com/worldfoundry/wfgen v0.0.0\n\nreplace github.com/worldfoundry/wfgen => " + root + "\n"
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "cmd", "run"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "cmd", "run", "main.go"), []byte(aotiProgram), 0o644))

	// 100 items: row i%3 of the reference features, scaled by 1+i/10.
	x, err := encRef.Inputs["features"].Float32s()
	must(t, err)
	features := make([][]float32, 100)
	for i := range features {
		r := i % 3
		features[i] = make([]float32, 32)
		for j := range features[i] {
			features[i][j] = x[r*32+j] * (1 + float32(i)/10)
		}
	}
	b, err := json.Marshal(features)
	must(t, err)
	featuresFile := filepath.Join(dir, "features.json")
	must(t, os.WriteFile(featuresFile, b, 0o644))
	pictures := filepath.Join(dir, "pictures.bin")
	must(t, os.WriteFile(pictures, mobRef.Inputs["x"].Data, 0o644))

	wfgen := filepath.Join(dir, "wfgen")
	run(t, root, "go", "build", "-o", wfgen, "./cmd/wfgen")
	run(t, dir, wfgen, "generate", "-o", "models", "manifests")
	bin := filepath.Join(dir, "aoti-run")
	run(t, dir, "go", "build", "-o", bin, "./cmd/run")
	out := run(t, dir, bin, enc.Package, mob.Package, featuresFile, pictures)
	var got struct {
		Embeddings [][]float32
		Logits     [][]float32
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got); err != nil {
		t.Fatalf("program output %q: %v", out, err)
	}
	if len(got.Embeddings) != 100 || len(got.Logits) != 2 {
		t.Fatalf("got %d embeddings and %d logit rows, want 100 and 2", len(got.Embeddings), len(got.Logits))
	}

	mod, err := torch.Default().Load(enc.Package, engine.LoadOptions{Device: "cpu"})
	must(t, err)
	defer mod.Close()
	for i, f := range features {
		// The package takes batches of 2 or more: the item twice.
		two := tensor.FromFloat32(append(append([]float32(nil), f...), f...), 2, 32)
		o, err := mod.Call(ctx, "forward", map[string]any{"features": two}, engine.CallOptions{})
		must(t, err)
		e := o.(map[string]any)["embedding"].(*tensor.Tensor)
		want := &tensor.Tensor{DType: e.DType, Shape: []int64{16}, Data: e.Data[:len(e.Data)/2]}
		if d, err := aoti.MaxRelDiff(tensor.FromFloat32(got.Embeddings[i], 16), want); err != nil || d > 1e-6 {
			t.Fatalf("item %d: generated client and direct call differ by %g (%v)", i, d, err)
		}
	}
	want := mobRef.Outputs["output"]
	for i, row := range got.Logits {
		w := &tensor.Tensor{DType: want.DType, Shape: []int64{1000}, Data: want.Data[i*4000 : (i+1)*4000]}
		d, err := aoti.MaxRelDiff(tensor.FromFloat32(row, 1000), w)
		if err != nil || d > 1e-5 {
			t.Fatalf("picture %d: logits differ from Python's by %g (%v)", i, d, err)
		}
		t.Logf("picture %d: logits within %.2g of Python's", i, d)
	}
}
