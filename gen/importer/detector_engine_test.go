//go:build cgo

package importer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// detectorScript scripts torchvision's ssdlite320_mobilenet_v3_large with
// random weights (nothing is downloaded), saves it, two images of other
// sizes and PyTorch's detections for them (one thread).
const detectorScript = `
import os, sys
import numpy as np
import torch, torchvision

out = sys.argv[1]
torch.set_num_threads(1)
torch.manual_seed(0)
m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
s = torch.jit.script(m)
s.save(os.path.join(out, "ssdlite.pt"))
images = [torch.rand(3, 96, 128), torch.rand(3, 80, 80)]
for i, x in enumerate(images):
    np.save(os.path.join(out, "image%d.npy" % i), x.numpy())
with torch.no_grad():
    losses, detections = s(images)
assert len(losses) == 0
for i, d in enumerate(detections):
    for k, v in d.items():
        np.save(os.path.join(out, "%s%d.npy" % (k, i)), v.numpy())
`

// The detector's result types, as wfgen generates them from the skeleton.
type (
	detectorParams struct {
		Images []*tensor.Tensor `json:"images"`
	}
	detectorLosses     struct{ BboxRegression, Classification *tensor.Tensor }
	detectorDetections struct{ Boxes, Scores, Labels *tensor.Tensor }
	detectorResult     struct {
		Output0 *detectorLosses
		Output1 []detectorDetections
	}
)

// A scripted torchvision detector, whose forward returns
// Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]], imports (pure Go)
// into a skeleton with a record (the losses, keys optional: empty in
// evaluation) and a record_list (boxes, scores, labels, required) that
// validates against its checkpoint, loads with torchvision's op library
// and gives, typed, PyTorch's detections bit for bit, with no edit.
func TestImportDetector(t *testing.T) {
	enginetest.TorchvisionOps(t)
	t.Setenv("WORLDFOUNDRY_TORCH_THREADS", "1")
	dir := t.TempDir()
	exportPython(t, dir, detectorScript)
	manifest := filepath.Join(dir, "ssdlite.yaml")
	res, err := ImportFile(filepath.Join(dir, "ssdlite.pt"), Options{Output: manifest})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(manifest, res.YAML); err != nil {
		t.Fatal(err)
	}
	fam, diags, err := validate.File(manifest) // against the checkpoint, which is at hand
	if err != nil || len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v %v\n%s", err, diags, res.YAML)
	}
	c, err := client.New(fam.Spec, client.WithManifestDir(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func(name string) *tensor.Tensor {
		x, err := artifactio.ReadNPY(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	task := client.NewTask[detectorParams, detectorResult](fam.Spec, 0, func() detectorParams { return detectorParams{} })
	r, err := task.Run(context.Background(), c, &detectorParams{Images: []*tensor.Tensor{read("image0.npy"), read("image1.npy")}})
	if err != nil {
		t.Fatalf("%v\n%s", err, res.YAML)
	}
	if r.Output0 == nil || r.Output0.BboxRegression != nil || r.Output0.Classification != nil {
		t.Errorf("losses %+v, want an empty record", r.Output0)
	}
	if len(r.Output1) != 2 {
		t.Fatalf("%d detections, want one per image", len(r.Output1))
	}
	for i, d := range r.Output1 {
		for key, got := range map[string]*tensor.Tensor{"boxes": d.Boxes, "scores": d.Scores, "labels": d.Labels} {
			var b bytes.Buffer
			if got == nil || artifactio.EncodeNPY(&b, got) != nil {
				t.Fatalf("image %d %s: %v", i, key, got)
			}
			want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s%d.npy", key, i)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("image %d %s (%s%v) differs from PyTorch's", i, key, got.DType, got.Shape)
			}
		}
		if d.Boxes.Shape[0] == 0 || d.Boxes.Shape[0] != d.Scores.Shape[0] {
			t.Errorf("image %d: boxes %v, scores %v", i, d.Boxes.Shape, d.Scores.Shape)
		}
	}
}
