package pixels

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// debianPython is the interpreter with Debian's python3-torch and
// python3-torchvision (and PIL).
const debianPython = "/usr/bin/python3"

var torchvisionCheck struct {
	once sync.Once
	skip string
}

// requireTorchvision skips the test, saying why, unless /usr/bin/python3
// imports torchvision and PIL.
func requireTorchvision(t *testing.T) {
	t.Helper()
	torchvisionCheck.once.Do(func() {
		out, err := exec.Command(debianPython, "-c", "import torch, torchvision, PIL").CombinedOutput()
		if err != nil {
			torchvisionCheck.skip = fmt.Sprintf("skipping the torchvision cross-check: %s cannot import torch, torchvision and PIL (scripts/setup.sh installs them): %v\n%s", debianPython, err, out)
		}
	})
	if torchvisionCheck.skip != "" {
		t.Skip(torchvisionCheck.skip)
	}
}

// torchvisionProgram converts each job's PNG the way a PyTorch training
// script does: PIL's convert, then torchvision's ToTensor and Normalize
// (floating dtypes) or the 8-bit array as it is (integer dtypes), the
// channel order, range and layout of the spec, and the dtype. It writes the
// tensor's raw little-endian bytes to job["out"] and prints the shapes.
const torchvisionProgram = `
import json, sys
import numpy as np
import torch
from PIL import Image
from torchvision import transforms

jobs = json.load(open(sys.argv[1]))
shapes = []
for job in jobs:
    spec = job["spec"]
    order = spec.get("channels") or "RGB"
    mode = {"RGB": "RGB", "BGR": "RGB", "L": "L", "RGBA": "RGBA"}[order]
    img = Image.open(job["png"]).convert(mode)
    dtype = job["dtype"]
    if dtype in ("float32", "float16", "bfloat16"):
        x = transforms.ToTensor()(img)  # CHW, v / 255 in float32
        if order == "BGR":
            x = x.flip(0)
        lo, hi = spec.get("range") or [0.0, 1.0]
        if (lo, hi) != (0.0, 1.0):
            lo = torch.tensor(lo, dtype=torch.float32)
            x = x * (torch.tensor(hi, dtype=torch.float32) - lo) + lo
        if spec.get("mean"):
            x = transforms.Normalize(spec["mean"], spec["std"])(x)
        if (spec.get("layout") or "HWC") == "HWC":
            x = x.permute(1, 2, 0)
    else:
        a = np.array(img)
        if a.ndim == 2:
            a = a[:, :, None]
        x = torch.from_numpy(a)  # HWC uint8
        if order == "BGR":
            x = x.flip(2)
        if spec.get("layout") == "CHW":
            x = x.permute(2, 0, 1)
    x = x.to(getattr(torch, dtype)).contiguous()
    shapes.append(list(x.shape))
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.view(torch.int16)
    open(job["out"], "wb").write(x.numpy().tobytes())
print(json.dumps(shapes))
`

// testPictures returns pictures of every kind a PNG decodes to (opaque
// RGB, RGBA with transparency, grey, paletted with transparency), 13 wide
// and 7 high so that height and width cannot be swapped unnoticed.
func testPictures() map[string]image.Image {
	r := rand.New(rand.NewPCG(14, 8))
	rect := image.Rect(0, 0, 13, 7)
	rgb, rgba, grey := image.NewRGBA(rect), image.NewNRGBA(rect), image.NewGray(rect)
	pal := make(color.Palette, 16)
	for i := range pal {
		pal[i] = color.NRGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(255 - 17*i)}
	}
	paletted := image.NewPaletted(rect, pal)
	for y := range 7 {
		for x := range 13 {
			rgb.Set(x, y, color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255})
			a := uint8(r.IntN(256))
			if x == 0 {
				a = 0 // fully transparent, colour kept
			}
			rgba.SetNRGBA(x, y, color.NRGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), a})
			grey.SetGray(x, y, color.Gray{uint8(r.IntN(256))})
			paletted.SetColorIndex(x, y, uint8(r.IntN(16)))
		}
	}
	// Corners at the extremes.
	rgb.Set(0, 0, color.RGBA{0, 0, 0, 255})
	rgb.Set(12, 6, color.RGBA{255, 255, 255, 255})
	grey.SetGray(0, 0, color.Gray{0})
	grey.SetGray(12, 6, color.Gray{255})
	return map[string]image.Image{"rgb": rgb, "rgba": rgba, "grey": grey, "paletted": paletted}
}

// TestTensorMatchesTorchvision checks, bit for bit, that the tensor Tensor
// makes of a decoded PNG is the one PIL and torchvision make of the same
// file, for pictures of every PNG colour type and a range of specs.
func TestTensorMatchesTorchvision(t *testing.T) {
	requireTorchvision(t)
	dir := t.TempDir()
	specs := []struct {
		name  string
		dtype tensor.DType
		spec  spec.ImageSpec
	}{
		{"uint8 HWC RGB (defaults)", "", spec.ImageSpec{}},
		{"float32 CHW RGB ImageNet", tensor.Float32, spec.ImageSpec{Layout: "CHW", Channels: "RGB", Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}}},
		{"float32 CHW L range [-1,1] normalised", "", spec.ImageSpec{Layout: "CHW", Channels: "L", Range: []float64{-1, 1}, Mean: []float64{0.1307}, Std: []float64{0.3081}}},
		{"uint8 CHW L", tensor.Uint8, spec.ImageSpec{Layout: "CHW", Channels: "L"}},
		{"uint8 HWC BGR", tensor.Uint8, spec.ImageSpec{Channels: "BGR"}},
		{"float32 HWC BGR range [0,255]", tensor.Float32, spec.ImageSpec{Channels: "BGR", Range: []float64{0, 255}, Mean: []float64{103.53, 116.28, 123.675}, Std: []float64{57.375, 57.12, 58.395}}},
		{"float16 CHW RGBA", tensor.Float16, spec.ImageSpec{Layout: "CHW", Channels: "RGBA", Range: []float64{-0.5, 0.5}}},
		{"bfloat16 HWC RGB normalised", tensor.BFloat16, spec.ImageSpec{Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.5, 0.5, 0.5}}},
		{"int64 CHW RGB", tensor.Int64, spec.ImageSpec{Layout: "CHW"}},
		{"float32 HWC L [0,1]", tensor.Float32, spec.ImageSpec{Channels: "L"}},
	}
	type job struct {
		PNG   string         `json:"png"`
		Spec  spec.ImageSpec `json:"spec"`
		DType tensor.DType   `json:"dtype"`
		Out   string         `json:"out"`
		name  string
		got   *tensor.Tensor
	}
	var jobs []*job
	pics := testPictures()
	for _, pn := range slices.Sorted(maps.Keys(pics)) {
		path := filepath.Join(dir, pn+".png")
		var buf bytes.Buffer
		if err := png.Encode(&buf, pics[pn]); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		decoded, err := png.Decode(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range specs {
			f := &spec.InferenceFieldSpec{FieldID: "pixels", Kind: spec.KindImage, DType: s.dtype, Image: &s.spec}
			got, err := Tensor(decoded, f)
			if err != nil {
				t.Fatalf("%s, %s: %v", pn, s.name, err)
			}
			jobs = append(jobs, &job{PNG: path, Spec: s.spec, DType: got.DType, Out: filepath.Join(dir, fmt.Sprintf("%s-%d.bin", pn, i)), name: pn + ", " + s.name, got: got})
		}
	}
	jf := filepath.Join(dir, "jobs.json")
	b, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(debianPython, "-c", torchvisionProgram, jf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var shapes [][]int64
	if err := json.Unmarshal(out, &shapes); err != nil {
		t.Fatalf("python printed %q: %v", out, err)
	}
	for i, j := range jobs {
		want, err := os.ReadFile(j.Out)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(j.got.Shape, shapes[i]) {
			t.Errorf("%s: shape %v, torchvision %v", j.name, j.got.Shape, shapes[i])
			continue
		}
		if !bytes.Equal(j.got.Data, want) {
			n := 0
			for k := range want {
				if k < len(j.got.Data) && j.got.Data[k] != want[k] {
					n++
				}
			}
			t.Errorf("%s: %d of %d bytes differ from torchvision's tensor", j.name, n, len(want))
		}
	}
}
