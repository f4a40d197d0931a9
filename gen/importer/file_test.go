package importer

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// writeZip writes files as a zip at path.
func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// echoCode is what torch.jit.save (1.13) writes for cmd/wfgen's Echo
// module.
const echoCode = `class Echo(Module):
  __parameters__ = []
  __buffers__ = []
  training : bool
  _is_full_backward_hook : Optional[bool]
  def forward(self: __torch__.Echo,
    x: Tensor,
    k: int=2) -> Tensor:
    return torch.mul(x, k)
  def label(self: __torch__.Echo,
    names: List[str],
    sep: str=",") -> str:
    return torch.join(sep, names)
`

// TestImportFile imports a TorchScript archive without an engine: the
// skeleton validates and has the kinds and defaults of the signatures.
// Examples need the engine; a signature that cannot be read is an error
// that says where.
func TestImportFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "echo.pt")
	writeZip(t, ckpt, map[string]string{"echo/data.pkl": "\x80\x02c__torch__\nEcho\nq\x00)\x81}", "echo/code/__torch__.py": echoCode, "echo/version": "3"})
	out := filepath.Join(dir, "echo.yaml")
	res, err := ImportFile(ckpt, Options{Methods: []string{"forward", "label"}, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes(out, res.YAML)
	if len(diags) > 0 {
		t.Fatalf("validate: %v\n%s", diags, res.YAML)
	}
	label, _ := f.Spec.Task("label")
	if sep, _ := label.Field("sep"); sep == nil || sep.Default != "," || sep.Kind != spec.KindString {
		t.Errorf("sep: %+v", sep)
	}
	if a := label.Outputs[0]; a.Kind != spec.ArtifactText {
		t.Errorf("label returns text: %+v", a)
	}
	if _, err := ImportFile(ckpt, Options{Methods: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `has no method "nope" (its methods: forward, label); choose with --method`) {
		t.Errorf("unknown method: %v", err)
	}
	ex := Example{File: "x.npy", Tensor: tensor.FromFloat32([]float32{1}, 1)}
	if _, err := ImportFile(ckpt, Options{Examples: map[string]Example{"x": ex}}); !errors.Is(err, ErrNeedsEngine) {
		t.Errorf("examples: %v", err)
	}

	bad := filepath.Join(dir, "bad.pt")
	writeZip(t, bad, map[string]string{"bad/data.pkl": "\x80\x02c__torch__\nEcho\n", "bad/code/__torch__.py": strings.Replace(echoCode, "k: int=2", "k int=2", 1)})
	if _, err := ImportFile(bad, Options{}); err == nil || err.Error() != bad+`: bad/code/__torch__.py:8:7: the signature of forward: expected "," or ")" after argument k, found "int"` {
		t.Errorf("bad signature: %v", err)
	}
	notZip := filepath.Join(dir, "export.py")
	os.WriteFile(notZip, []byte("import torch\n"), 0o644)
	if _, err := ImportFile(notZip, Options{}); err == nil || !strings.HasPrefix(err.Error(), notZip+": not a TorchScript archive") {
		t.Errorf("not an archive: %v", err)
	}
	if _, err := ImportFile(dir, Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
}

// TestImportFilePackage imports an AOTInductor package from the call spec
// in its metadata, without an engine.
func TestImportFilePackage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := `{"version": 1, "inputs": [{"name": "features", "dtype": "float32", "shape": ["batch", 32]}, {"name": "normalize", "keyword": true, "constant": true, "value": true}], "outputs": [{"name": "embedding", "dtype": "float32", "shape": ["batch", 16]}, {"name": "norm", "dtype": "float32", "shape": ["batch"]}], "returns": "dict", "dims": {"batch": {"min": 1, "max": 16}}}`
	q, _ := json.Marshal(spec)
	pkg := filepath.Join(dir, "encoder.pt2")
	writeZip(t, pkg, map[string]string{"version": "1", "data/aotinductor/model/cx_metadata.json": `{"AOTI_DEVICE_KEY": "cpu", "wfgen.call_spec": ` + string(q) + `}`, "data/aotinductor/model/cx.so": ""})
	out := filepath.Join(dir, "encoder.yaml")
	res, err := ImportFile(pkg, Options{Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if _, diags := validate.Bytes(out, res.YAML); len(diags) > 0 {
		t.Fatalf("validate: %v\n%s", diags, res.YAML)
	}
	for _, want := range []string{"format: aotinductor", "dim: batch", "max_batch_size: 16", "shape: [batch, 32]", "artifact_id: norm"} {
		if !strings.Contains(string(res.YAML), want) {
			t.Errorf("skeleton lacks %q:\n%s", want, res.YAML)
		}
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "argument normalize was baked in at export as True") {
		t.Errorf("warnings %q", res.Warnings)
	}
	ex := Example{File: "x.npy", Tensor: tensor.FromFloat32([]float32{1}, 1)}
	if _, err := ImportFile(pkg, Options{Examples: map[string]Example{"features": ex}}); err == nil || !strings.Contains(err.Error(), "import it without --example and --batched") {
		t.Errorf("examples for a package: %v", err)
	}
	none := filepath.Join(dir, "none.pt2")
	writeZip(t, none, map[string]string{"data/aotinductor/model/cx_metadata.json": `{"AOTI_DEVICE_KEY": "cpu"}`})
	if _, err := ImportFile(none, Options{}); !errors.Is(err, engine.ErrNoCallSpec) || !strings.HasPrefix(err.Error(), none+": ") {
		t.Errorf("no call spec: %v", err)
	}
}
