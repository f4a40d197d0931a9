//go:build cgo

package importer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A checkpoint that calls torchvision::nms imports, without the engine,
// into a skeleton whose op_libraries names Debian's torchvision library:
// it validates, loads and gives PyTorch's output bit for bit, with no edit.
func TestImportCustomOps(t *testing.T) {
	ops := enginetest.TorchvisionOps(t)
	dir := t.TempDir()
	if err := enginetest.NMS(dir); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "nms.yaml")
	res, err := ImportFile(filepath.Join(dir, "nms.pt"), Options{Output: manifest})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
	if err := WriteFile(manifest, res.YAML); err != nil {
		t.Fatal(err)
	}
	fam, diags, err := validate.File(manifest)
	if err != nil || len(diags) > 0 {
		t.Fatalf("the skeleton does not validate: %v %v\n%s", err, diags, res.YAML)
	}
	if libs := fam.Spec.OpLibraries; len(libs) != 1 || libs[0] != ops {
		t.Fatalf("op_libraries %q, want [%s]\n%s", libs, ops, res.YAML)
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
	out, err := c.Run(context.Background(), "", map[string]any{"boxes": read("boxes.npy"), "scores": read("scores.npy")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := out["output"].(*tensor.Tensor)
	if !ok {
		t.Fatalf("outputs %v", out)
	}
	var b bytes.Buffer
	if err := artifactio.EncodeNPY(&b, got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "out.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("output differs from PyTorch's:\n got %x\nwant %x", b.Bytes(), want)
	}
}
