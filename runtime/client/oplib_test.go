package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/artifactio"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// nmsCkpt holds enginetest.NMS's module, which calls torchvision::nms,
// with an input and PyTorch's output for it; built once per test binary.
var nmsCkpt = enginetest.Checkpoints{Name: "client-nms", Build: enginetest.NMS}

// nmsManifest is the manifest of the nms module; opLibraries is the
// family's op_libraries line ("" for none).
func nmsManifest(opLibraries string) string {
	return `schema_version: 1
model_family_id: nms
` + opLibraries + `
variants:
  - variant_id: default
    checkpoints:
      - role: model
        uri: nms.pt
tasks:
  - task_id: default
    inputs:
      - {field_id: boxes, kind: tensor, required: true, dtype: float32, shape: [B, 4]}
      - {field_id: scores, kind: tensor, required: true, dtype: float32, shape: [B]}
      - {field_id: iou, kind: float, default: 0.5}
    outputs:
      - {artifact_id: kept, kind: tensor, required: true, dtype: float32, shape: ["*", 4]}
`
}

// opLibResult is what the child of TestOpLibraries reports.
type opLibResult struct {
	Error     string `json:"error,omitempty"`
	Op        string `json:"op,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

// opLibChild runs in the child process of TestOpLibraries: it loads the
// manifest $WFGEN_TEST_OPLIB_MANIFEST through a client (its folder is the
// manifest folder), runs its task on the nms.py input in the folder
// $WFGEN_TEST_OPLIB_DATA, writes the output to $WFGEN_TEST_OPLIB_OUT and
// prints an opLibResult.
func opLibChild() {
	res := opLibResult{}
	if err := runNMS(os.Getenv("WFGEN_TEST_OPLIB_MANIFEST"), os.Getenv("WFGEN_TEST_OPLIB_DATA"), os.Getenv("WFGEN_TEST_OPLIB_OUT")); err != nil {
		res.Error = err.Error()
		var uo *engine.UnknownOpError
		if errors.As(err, &uo) {
			res.Op, res.Namespace, res.Name, res.Traceback = uo.Op(), uo.Namespace, uo.Name, uo.Traceback
		}
	}
	b, _ := json.Marshal(res)
	fmt.Printf("\nRESULT %s\n", b)
}

func runNMS(manifest, data, out string) error {
	fam, diags, err := validate.File(manifest)
	if err != nil || len(diags) > 0 {
		return fmt.Errorf("manifest: %v %v", err, diags)
	}
	c, err := client.New(fam.Spec, client.WithManifestDir(filepath.Dir(manifest)), client.WithDevice("cpu"))
	if err != nil {
		return err
	}
	defer c.Close()
	boxes, err := artifactio.ReadNPY(filepath.Join(data, "boxes.npy"))
	if err != nil {
		return err
	}
	scores, err := artifactio.ReadNPY(filepath.Join(data, "scores.npy"))
	if err != nil {
		return err
	}
	res, err := c.Run(context.Background(), "", map[string]any{"boxes": boxes, "scores": scores}, nil)
	if err != nil {
		return err
	}
	return artifactio.WriteNPY(out, res["kept"].(*tensor.Tensor))
}

// TestOpLibraries loads a checkpoint that calls torchvision::nms, each
// case in a process of its own (an op library, once loaded, stays): with
// no op library the load fails with an *engine.UnknownOpError naming the
// op, its namespace and the fix on one line, the TorchScript traceback
// behind Traceback; with Debian's torchvision op library named by the
// manifest's op_libraries (a path relative to the manifest's folder) or by
// WORLDFOUNDRY_TORCH_OP_LIBRARIES, it loads and gives PyTorch's output
// bit for bit.
func TestOpLibraries(t *testing.T) {
	if os.Getenv("WFGEN_TEST_OPLIB_MANIFEST") != "" {
		opLibChild()
		return
	}
	torchvisionOps := enginetest.TorchvisionOps(t)
	data := nmsCkpt.Dir(t)
	want, err := os.ReadFile(filepath.Join(data, "out.npy"))
	if err != nil {
		t.Fatal(err)
	}
	child := func(t *testing.T, manifest string, env ...string) (opLibResult, []byte) {
		t.Helper()
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(data, "nms.pt"), filepath.Join(dir, "nms.pt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "ops"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(torchvisionOps, filepath.Join(dir, "ops", "torchvision_ops.so")); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "nms.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.npy")
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpLibraries$", "-test.count=1")
		cmd.Env = append(os.Environ(), "WFGEN_TEST_OPLIB_MANIFEST="+path, "WFGEN_TEST_OPLIB_DATA="+data, "WFGEN_TEST_OPLIB_OUT="+out,
			engine.EnvOpLibraries+"=", "WORLDFOUNDRY_TORCH_THREADS=1")
		cmd.Env = append(cmd.Env, env...)
		stdout, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, stdout)
		}
		_, line, ok := bytes.Cut(stdout, []byte("\nRESULT "))
		if !ok {
			t.Fatalf("child printed no result:\n%s", stdout)
		}
		line, _, _ = bytes.Cut(line, []byte("\n"))
		var res opLibResult
		if err := json.Unmarshal(line, &res); err != nil {
			t.Fatalf("child result %q: %v", line, err)
		}
		got, _ := os.ReadFile(out)
		return res, got
	}

	t.Run("none", func(t *testing.T) {
		res, _ := child(t, nmsManifest(""))
		if res.Op != "torchvision::nms" || res.Namespace != "torchvision" || res.Name != "nms" {
			t.Fatalf("want an *engine.UnknownOpError for torchvision::nms, got %+v", res)
		}
		for _, want := range []string{"torchvision::nms", `namespace "torchvision"`, "op_libraries", engine.EnvOpLibraries, torchvisionOps} {
			if !strings.Contains(res.Error, want) {
				t.Errorf("the error does not name %q:\n%s", want, res.Error)
			}
		}
		if strings.Contains(res.Error, "\n") {
			t.Errorf("the error is more than one line:\n%s", res.Error)
		}
		if !strings.Contains(res.Traceback, "ops.torchvision.nms(boxes, scores, iou)") {
			t.Errorf("the traceback does not show the code calling the op:\n%s", res.Traceback)
		}
	})
	t.Run("manifest", func(t *testing.T) {
		res, got := child(t, nmsManifest("op_libraries: [ops/torchvision_ops.so]"))
		if res.Error != "" {
			t.Fatal(res.Error)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("output differs from PyTorch's:\n got %x\nwant %x", got, want)
		}
	})
	t.Run("env", func(t *testing.T) {
		res, got := child(t, nmsManifest(""), engine.EnvOpLibraries+"=/nonexistent-first-entry-is-not-read:"+torchvisionOps)
		if want := "/nonexistent-first-entry-is-not-read"; !strings.Contains(res.Error, want) || !strings.Contains(res.Error, engine.EnvOpLibraries) {
			t.Fatalf("want an error naming %s and %s, got %+v", want, engine.EnvOpLibraries, res)
		}
		res, got = child(t, nmsManifest(""), engine.EnvOpLibraries+"="+torchvisionOps)
		if res.Error != "" {
			t.Fatal(res.Error)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("output differs from PyTorch's:\n got %x\nwant %x", got, want)
		}
	})
}

// A variant's op_libraries replace the family's, an empty list included,
// and a relative entry is found as a checkpoint uri is: the manifest's
// folder, then the checkpoint root; one found in neither fails the load
// with client.ErrOpLibrary naming where it was looked for, before the
// checkpoint is loaded.
func TestOpLibrariesResolved(t *testing.T) {
	t.Parallel()
	root := tiny.Copy(t)
	manifestDir := t.TempDir()
	fam, diags := validate.Bytes("tiny.yaml", []byte(`schema_version: 1
model_family_id: tiny-ops
default_task_id: embed
op_libraries: [ops/missing.so]
variants:
  - variant_id: default
    checkpoints: [{role: model, uri: `+tinymodels.Files["tiny-encoder"]+`}]
  - variant_id: none
    op_libraries: []
    checkpoints: [{role: model, uri: `+tinymodels.Files["tiny-encoder"]+`}]
tasks:
  - task_id: embed
    inputs: [{field_id: tokens, kind: tensor, required: true}]
    outputs: [{artifact_id: embedding, kind: embedding}]
`))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	load := func(variant string) error {
		c, err := client.New(fam.Spec, client.WithVariant(variant), client.WithManifestDir(manifestDir), client.WithCheckpointRoot(root), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _, err = c.Load()
		return err
	}
	err := load("default")
	if !errors.Is(err, client.ErrOpLibrary) {
		t.Fatalf("want client.ErrOpLibrary, got %v", err)
	}
	for _, want := range []string{filepath.Join(manifestDir, "ops", "missing.so"), filepath.Join(root, "ops", "missing.so")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if err := load("none"); err != nil {
		t.Errorf("variant with op_libraries: []: %v", err)
	}
}
