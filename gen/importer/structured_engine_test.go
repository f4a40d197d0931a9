//go:build cgo

package importer

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// structuredScript traces a transformer-like module that returns a tuple
// (last hidden state, pooled) and scripts one that returns List[Tensor],
// saves both and PyTorch's outputs on one input (one thread).
const structuredScript = `
import os, sys
import numpy as np
import torch

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
    def forward(self, x):
        h = torch.tanh(self.proj(x))
        return h, h.mean(dim=1)

class Pyramid(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [x, torch.nn.functional.avg_pool2d(x, 2), torch.nn.functional.avg_pool2d(x, 4)]

out = sys.argv[1]
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(2, 5, 8)
enc = torch.jit.trace(Encoder().eval(), x)
enc.save(os.path.join(out, "encoder.pt"))
np.save(os.path.join(out, "x.npy"), x.numpy())
h, p = enc(x)
np.save(os.path.join(out, "h.npy"), h.detach().numpy())
np.save(os.path.join(out, "p.npy"), p.detach().numpy())
img = torch.randn(1, 3, 8, 8)
pyr = torch.jit.script(Pyramid())
pyr.save(os.path.join(out, "pyramid.pt"))
np.save(os.path.join(out, "img.npy"), img.numpy())
for i, t in enumerate(pyr(img)):
    np.save(os.path.join(out, "level%d.npy" % i), t.numpy())
`

// A traced module returning a tuple and a scripted one returning
// List[Tensor] import (pure Go) into skeletons that validate against their
// checkpoints, load and give PyTorch's outputs bit for bit, with no edit.
func TestImportStructuredReturns(t *testing.T) {
	dir := t.TempDir()
	exportPython(t, dir, structuredScript)
	npy := func(name string) *tensor.Tensor {
		x, err := artifactio.ReadNPY(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	run := func(ckpt string, inputs map[string]any) map[string]any {
		t.Helper()
		manifest := filepath.Join(dir, ckpt+".yaml")
		res, err := ImportFile(filepath.Join(dir, ckpt+".pt"), Options{Output: manifest})
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(manifest, res.YAML); err != nil {
			t.Fatal(err)
		}
		fam, diags, err := validate.File(manifest) // against the checkpoint, which is at hand
		if err != nil || len(diags) > 0 {
			t.Fatalf("%s: the skeleton does not validate: %v %v\n%s", ckpt, err, diags, res.YAML)
		}
		c, err := client.New(fam.Spec, client.WithManifestDir(dir), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out, err := c.Run(context.Background(), "", inputs, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", ckpt, err, res.YAML)
		}
		return out
	}
	same := func(what string, got any, file string) {
		t.Helper()
		g, ok := got.(*tensor.Tensor)
		var b bytes.Buffer
		if !ok || artifactio.EncodeNPY(&b, g) != nil {
			t.Fatalf("%s: %v", what, got)
		}
		want, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s differs from PyTorch's", what)
		}
	}
	out := run("encoder", map[string]any{"x": npy("x.npy")})
	same("encoder element 0", out["output_0"], "h.npy")
	same("encoder element 1", out["output_1"], "p.npy")

	out = run("pyramid", map[string]any{"x": npy("img.npy")})
	levels, ok := out["output"].([]any)
	if !ok || len(levels) != 3 {
		t.Fatalf("pyramid: %v", out)
	}
	for i, l := range levels {
		same("pyramid level", l, "level"+string(rune('0'+i))+".npy")
	}
}

// exportPython runs script with Debian's Python (which has torch) on dir,
// or skips the test.
func exportPython(t testing.TB, dir, script string) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import torch and numpy (install python3-torch): %v\n%s", debianPython, err, out)
	}
	path := filepath.Join(dir, "export.py") // TorchScript compiles from a source file
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(debianPython, path, dir).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
}
