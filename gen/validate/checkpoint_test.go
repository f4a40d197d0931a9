package validate

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeZip writes a zip of files at path.
func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
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
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// detectorArchive is what torch.jit.save (1.13) writes for a module with
// these methods: the code is what the contract check reads.
func detectorArchive(t *testing.T, path string) {
	writeZip(t, path, map[string]string{
		"det/data.pkl": "\x80\x02c__torch__\nDet\nq\x00)\x81}",
		"det/code/__torch__.py": `class Det(Module):
  __parameters__ = []
  __buffers__ = []
  training : bool
  def forward(self: __torch__.Det,
    image: Tensor,
    threshold: float=0.5) -> Dict[str, Tensor]:
    _0 = {"boxes": image, "scores": torch.sum(image)}
    return _0
  def describe(self: __torch__.Det,
    verbose: bool=False) -> str:
    return "det"
`,
		"det/version": "3",
	})
}

// TestCheckpointContract validates manifests whose checkpoint is at hand:
// every task is checked against the checkpoint's signatures, as a load
// would, and each problem is reported at the field, artifact, key or task
// it concerns; a checkpoint not at hand is not checked.
func TestCheckpointContract(t *testing.T) {
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", "")
	dir := t.TempDir()
	detectorArchive(t, filepath.Join(dir, "checkpoints", "det.pt"))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `schema_version: 1
model_family_id: det
variants:
  - variant_id: default
    checkpoints: [{role: model, uri: checkpoints/det.pt}]
tasks:
  - task_id: default
    inputs:
      - {field_id: image, kind: image, required: true}
      - {field_id: threshold, kind: float, default: 0.3}
    outputs:
      - {artifact_id: boxes, kind: tensor, required: true}
      - {artifact_id: scores, kind: tensor}
  - task_id: describe
    method: describe
    outputs: [{artifact_id: text, kind: text}]
`)
	if f, diags, err := File(good); err != nil || len(diags) > 0 || f == nil {
		t.Fatalf("a manifest matching its checkpoint: %v %v", diags, err)
	}

	bad := write("bad.yaml", `schema_version: 1
model_family_id: det
variants:
  - variant_id: default
    call_kwargs: {nms: true}
    checkpoints: [{role: model, uri: checkpoints/det.pt}]
tasks:
  - task_id: default
    inputs:
      - {field_id: image, kind: image, required: true}
      - {field_id: threshold, kind: int, default: 1}
      - {field_id: size, kind: int, default: 1}
    outputs:
      - {artifact_id: boxes, kind: tensor, required: true}
      - {artifact_id: labels, kind: tensor, required: true}
  - task_id: caption
    method: caption
    outputs: [{artifact_id: text, kind: text}]
`)
	f, diags, err := File(bad)
	if err != nil || f != nil {
		t.Fatalf("a manifest that does not match its checkpoint passed: %v", err)
	}
	want := []string{
		bad + `:5:19: task "default" does not match method forward of checkpoint checkpoints/det.pt: call_kwargs "nms": expected an argument of forward, found no such argument (arguments: image: Tensor, threshold: float)`,
		bad + `:12:9: task "default" does not match method forward of checkpoint checkpoints/det.pt: field "size": expected an argument size: int of forward, found no such argument (arguments: image: Tensor, threshold: float)`,
		bad + `:15:9: task "default" does not match method forward of checkpoint checkpoints/det.pt: artifact "labels": expected a key "labels" in the dict forward returns (the artifact is required), found only the keys "boxes", "scores" (every key the method's TorchScript code can return)`,
		bad + `:17:13: task "caption" does not match method caption of checkpoint checkpoints/det.pt: method: expected a method named "caption", found methods describe, forward`,
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Not at hand: a remote URI, a file not there. Nothing to check.
	for _, uri := range []string{"hf://org/det.pt", "checkpoints/absent.pt"} {
		p := write("absent.yaml", strings.Replace(string(mustRead(t, bad)), "checkpoints/det.pt", uri, 1))
		if _, diags, err := File(p); err != nil || len(diags) > 0 {
			t.Errorf("uri %s: %v %v", uri, diags, err)
		}
	}
	// Found under the checkpoint root too, as the client finds it.
	root := t.TempDir()
	detectorArchive(t, filepath.Join(root, "elsewhere", "det.pt"))
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", root)
	p := write("root.yaml", strings.Replace(string(mustRead(t, bad)), "checkpoints/det.pt", "elsewhere/det.pt", 1))
	if _, diags, _ := File(p); len(diags) != len(want) {
		t.Errorf("a checkpoint under the root: %d diagnostics, want %d: %v", len(diags), len(want), diags)
	}
	// A checkpoint that is not an archive, or not of the declared format.
	write(filepath.Join("checkpoints", "junk.pt"), "not a zip")
	p = write("junk.yaml", strings.Replace(string(mustRead(t, good)), "checkpoints/det.pt", "checkpoints/junk.pt", 1))
	if _, diags, _ := File(p); len(diags) != 1 || !strings.Contains(diags[0].String(), `junk.yaml:5:38: variant "default" checkpoint `) || !strings.Contains(diags[0].Message, "not a TorchScript archive") {
		t.Errorf("a checkpoint that is not an archive: %v", diags)
	}
	write(filepath.Join("checkpoints", "det.bin"), string(mustRead(t, filepath.Join(dir, "checkpoints", "det.pt"))))
	p = write("format.yaml", strings.Replace(string(mustRead(t, good)), "uri: checkpoints/det.pt}", "uri: checkpoints/det.bin, format: aotinductor}", 1))
	if _, diags, _ := File(p); len(diags) != 1 || !strings.Contains(diags[0].Message, "is a TorchScript archive, but format aotinductor was declared for it") {
		t.Errorf("a checkpoint of another format: %v", diags)
	}
}

// An AOTInductor package is checked against the call spec it records.
func TestCheckpointContractPackage(t *testing.T) {
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", "")
	dir := t.TempDir()
	spec := `{\"version\": 1, \"inputs\": [{\"name\": \"features\", \"dtype\": \"float32\", \"shape\": [\"batch\", 32]}], \"outputs\": [{\"name\": \"embedding\", \"dtype\": \"float32\", \"shape\": [\"batch\", 16]}], \"returns\": \"dict\", \"dims\": {\"batch\": {\"min\": 1, \"max\": 16}}}`
	writeZip(t, filepath.Join(dir, "encoder.pt2"), map[string]string{
		"version": "1", "data/aotinductor/model/x.so": "", "data/aotinductor/model/x_metadata.json": `{"wfgen.call_spec": "` + spec + `"}`,
	})
	manifest := func(dtype string) string {
		p := filepath.Join(dir, "encoder.yaml")
		if err := os.WriteFile(p, []byte(`schema_version: 1
model_family_id: encoder
variants:
  - variant_id: default
    checkpoints: [{role: model, uri: encoder.pt2}]
tasks:
  - task_id: default
    batching: {max_batch_size: 16, dim: N}
    inputs:
      - {field_id: features, kind: tensor, required: true, dtype: `+dtype+`, shape: [N, 32]}
    outputs:
      - {artifact_id: embedding, kind: embedding, required: true, dtype: float32, shape: [N, 16]}
`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, diags, err := File(manifest("float32")); err != nil || len(diags) > 0 {
		t.Fatalf("a manifest matching its package: %v %v", diags, err)
	}
	_, diags, _ := File(manifest("float16"))
	if len(diags) != 1 || diags[0].Line != 10 || !strings.Contains(diags[0].Message, `field "features": expected dtype float32`) {
		t.Errorf("a field whose dtype is not the package's: %v", diags)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
