//go:build cgo

package importer

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// BenchmarkDetectorCopies is issue 42's "structured outputs add no copy
// beyond the one out of libtorch", on torchvision's ssdlite detector
// (TestImportDetector's, imported with no edit): the engine's call alone
// (its output: a tuple of a dict and a list of dicts of tensors, copied
// once out of libtorch), then the generated-style typed call through the
// in-process client (the same call, mapped onto a *Losses and a
// []Detections). Each reports B/op and out-B/op, the bytes of the output
// tensors: the typed call's B/op exceeds the engine's by the structs and
// the validation, not by another out-B/op.
func BenchmarkDetectorCopies(b *testing.B) {
	ops := enginetest.TorchvisionOps(b)
	b.Setenv("WORLDFOUNDRY_TORCH_THREADS", "1")
	dir := b.TempDir()
	exportPython(b, dir, detectorScript)
	ckpt := filepath.Join(dir, "ssdlite.pt")
	manifest := filepath.Join(dir, "ssdlite.yaml")
	res, err := ImportFile(ckpt, Options{Output: manifest})
	if err != nil {
		b.Fatal(err)
	}
	if err := WriteFile(manifest, res.YAML); err != nil {
		b.Fatal(err)
	}
	fam, diags, err := validate.File(manifest)
	if err != nil || len(diags) > 0 {
		b.Fatalf("the skeleton does not validate: %v %v", err, diags)
	}
	var images []*tensor.Tensor
	for _, name := range []string{"image0.npy", "image1.npy"} {
		x, err := artifactio.ReadNPY(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		images = append(images, x)
	}
	ctx := context.Background()

	b.Run("engine", func(b *testing.B) {
		mod, err := torch.Default().Load(ckpt, engine.LoadOptions{Device: "cpu", OpLibraries: []string{ops}})
		if err != nil {
			b.Fatal(err)
		}
		defer mod.Close()
		list := []any{images[0], images[1]}
		out, err := mod.Call(ctx, "forward", map[string]any{"images": list}, engine.CallOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			out, err = mod.Call(ctx, "forward", map[string]any{"images": list}, engine.CallOptions{})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(tensorBytes(out)), "out-B/op")
	})
	b.Run("typed", func(b *testing.B) {
		c, err := client.New(fam.Spec, client.WithManifestDir(dir), client.WithDevice("cpu"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		task := client.NewTask[detectorParams, detectorResult](fam.Spec, 0, func() detectorParams { return detectorParams{} })
		p := &detectorParams{Images: images}
		r, err := task.Run(ctx, c, p) // loads the model: not in the loop
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			got, err := task.Run(ctx, c, p)
			if err != nil {
				b.Fatal(err)
			}
			r = got
		}
		n := 0
		for _, d := range r.Output1 {
			n += tensorBytes(d.Boxes) + tensorBytes(d.Scores) + tensorBytes(d.Labels)
		}
		b.ReportMetric(float64(n), "out-B/op")
	})
}

// tensorBytes is the bytes of the tensors in an engine value.
func tensorBytes(v any) int {
	switch v := v.(type) {
	case *tensor.Tensor:
		if v == nil {
			return 0
		}
		return len(v.Data)
	case []any:
		n := 0
		for _, e := range v {
			n += tensorBytes(e)
		}
		return n
	case map[string]any:
		n := 0
		for _, e := range v {
			n += tensorBytes(e)
		}
		return n
	}
	return 0
}
