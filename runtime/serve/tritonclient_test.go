package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/imagemodel"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// tritonClientDir returns the folder holding Triton's Python client
// package (tritonclient/, the src/python/library folder of
// github.com/triton-inference-server/client): $WFGEN_TRITONCLIENT, else
// wfgen/tritonclient in the user's cache folder.
func tritonClientDir() string {
	if d := os.Getenv("WFGEN_TRITONCLIENT"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wfgen", "tritonclient")
}

// TestTritonClientBinary drives wfserve with a third-party OIP client,
// Triton's Python HTTP client (tritonclient.http, unmodified, from its
// source tree), in its binary tensor data mode: a float32 image, a BYTES
// prompt, integer and BOOL scalars sent binary; outputs asked for binary
// one by one and all at once, and as JSON; a refused request. Its outputs
// equal the in-process client's bit for bit. It skips, saying why, where
// the client's source or its Python dependencies (Debian's python3-numpy,
// python3-rapidjson, python3-geventhttpclient: scripts/setup.sh) are not
// there.
func TestTritonClientBinary(t *testing.T) {
	t.Parallel()
	lib := tritonClientDir()
	if _, err := os.Stat(filepath.Join(lib, "tritonclient", "http", "__init__.py")); err != nil {
		t.Skipf("Triton's Python client is not at %s: put the src/python/library folder of github.com/triton-inference-server/client there, or set WFGEN_TRITONCLIENT to it (docs/serving.md)", lib)
	}
	py := "/usr/bin/python3"
	env := append(os.Environ(), "PYTHONPATH="+lib, "PYTHONDONTWRITEBYTECODE=1")
	check := exec.Command(py, "-c", "import numpy, rapidjson, geventhttpclient, tritonclient.http")
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("tritonclient.http does not import with %s (install Debian's python3-numpy python3-rapidjson python3-geventhttpclient: scripts/setup.sh): %v %s", py, err, out)
	}

	ctx := context.Background()
	s := startWithImage(t, serve.Config{})
	dir := t.TempDir()
	image := imagemodel.Image(4)
	if err := os.WriteFile(filepath.Join(dir, "image.bin"), image.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, py, filepath.Join("testdata", "tritonclient", "binary.py"), strings.TrimPrefix(s.url, "http://"), dir)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tritonclient: %v\n%s", err, stderr.Bytes())
	}
	var summary struct {
		Ready         bool     `json:"ready"`
		Extensions    []string `json:"extensions"`
		LogitsBinary  int      `json:"logits_binary"`
		VideoShape    []int64  `json:"video_shape"`
		VideoDtype    string   `json:"video_dtype"`
		EmbeddingJSON bool     `json:"embedding_json"`
		Error         *string  `json:"error"`
	}
	if err := json.Unmarshal(out, &summary); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("tritonclient: %s", out)
	if !summary.Ready || !slices.Contains(summary.Extensions, oip.BinaryExtension) || summary.LogitsBinary != 40 || !summary.EmbeddingJSON {
		t.Errorf("summary %+v", summary)
	}
	if summary.Error == nil || !strings.Contains(*summary.Error, "num_frames: must be 4k+1") {
		t.Errorf("refused request: %v", summary.Error)
	}

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	img, err := client.New(imageSpec(t), clientOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	want, err := img.Run(ctx, "classify", map[string]any{"image": image}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want["logits"].(*tensor.Tensor).Data, read("logits.bin")) {
		t.Error("logits differ from in-process")
	}
	want, err = inProcess(t, "tiny-world").Run(ctx, "generate", map[string]any{"prompt": "a harbour at dusk", "seed": int64(3), "num_frames": int64(17)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := want["video"].(*tensor.Tensor); !bytes.Equal(v.Data, read("video.bin")) || !slices.Equal(v.Shape, summary.VideoShape) || summary.VideoDtype != "uint8" {
		t.Errorf("video differs from in-process: %v %s", summary.VideoShape, summary.VideoDtype)
	}
	want, err = inProcess(t, "tiny-encoder").Run(ctx, "embed", map[string]any{"tokens": tensor.FromInt64([]int64{5, 6, 7, 8}, 4), "normalize": false}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want["embedding"].(*tensor.Tensor).Data, read("embedding.bin")) {
		t.Error("embedding differs from in-process")
	}
}
