package serve_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// tritonProtos is the folder of Triton's .proto files that its Python gRPC
// client's modules are generated from (grpc_service.proto and
// model_config.proto of github.com/triton-inference-server/common,
// protobuf/, commit 83adf7c, unmodified, BSD-3-Clause headers kept): the
// client's source tree ships without them, as its build generates them.
const tritonProtos = "testdata/tritonclient/protos"

// tritonGRPCPath returns a PYTHONPATH under which Triton's Python gRPC
// client (tritonclient.grpc, unmodified) imports: the client's package
// (tritonClientDir) with the protobuf modules its build adds beside its
// gRPC code (service_pb2.py, service_pb2_grpc.py, model_config_pb2.py),
// generated from tritonProtos the way its build does (protoc's Python
// output and grpc_tools.protoc's gRPC output, imports rewritten as
// build_wheel.py rewrites them) and cached by the protos' hash in
// wfgen/tritonclient-grpc in the user's cache folder. A source tree that
// already has them is used as it is. It skips, saying why, where the
// client's source, protoc or the Python packages are not there
// (scripts/setup.sh installs them).
func tritonGRPCPath(t *testing.T, py string) string {
	t.Helper()
	lib := tritonClientDir()
	pkg := filepath.Join(lib, "tritonclient")
	if _, err := os.Stat(filepath.Join(pkg, "grpc", "__init__.py")); err != nil {
		t.Skipf("Triton's Python client is not at %s: put the src/python/library folder of github.com/triton-inference-server/client there, or set WFGEN_TRITONCLIENT to it (docs/serving.md)", lib)
	}
	check := exec.Command(py, "-c", "import numpy, rapidjson, packaging, grpc, google.protobuf; print(grpc.__version__, google.protobuf.__version__)")
	versions, err := check.CombinedOutput()
	if err != nil {
		t.Skipf("tritonclient.grpc's dependencies do not import with %s (install Debian's python3-numpy python3-rapidjson python3-packaging python3-grpcio: scripts/setup.sh): %v %s", py, err, versions)
	}
	if _, err := os.Stat(filepath.Join(pkg, "grpc", "service_pb2.py")); err == nil {
		return lib
	}
	stubs := tritonGRPCStubs(t, py, string(versions))
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "tritonclient"), os.DirFS(pkg)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "tritonclient", "grpc"), os.DirFS(stubs)); err != nil {
		t.Fatal(err)
	}
	return root
}

// tritonGRPCStubs returns the folder of the generated modules, generating
// them when the cache does not have them (into a temporary folder renamed
// into place, so that test processes running at once never see half of
// them). They are cached by the protos, protoc's version and the Python
// gRPC and protobuf versions (pyVersions).
func tritonGRPCStubs(t *testing.T, py, pyVersions string) string {
	t.Helper()
	protoc, err := exec.Command("protoc", "--version").Output()
	if err != nil {
		t.Skipf("protoc does not run (Debian's protobuf-compiler: scripts/setup.sh): %v", err)
	}
	protos := []string{"grpc_service.proto", "model_config.proto"}
	h := sha256.New()
	fmt.Fprintf(h, "protoc --python_out; grpc_tools.protoc --grpc_python_out; build_wheel.py's names and imports\n%s%s", protoc, pyVersions)
	for _, p := range protos {
		b, err := os.ReadFile(filepath.Join(tritonProtos, p))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache folder for tritonclient.grpc's generated modules: %v", err)
	}
	parent := filepath.Join(cache, "wfgen", "tritonclient-grpc")
	dir := filepath.Join(parent, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "service_pb2_grpc.py")); err == nil {
		return dir
	}
	if out, err := exec.Command(py, "-c", "import grpc_tools.protoc").CombinedOutput(); err != nil {
		t.Skipf("grpc_tools does not import with %s (Debian's python3-grpc-tools: scripts/setup.sh): %v %s", py, err, out)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(parent, ".generating-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	gen, final := filepath.Join(tmp, "gen"), filepath.Join(tmp, "out")
	for _, d := range []string{gen, final} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Dir = tritonProtos
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("protoc", append([]string{"-I.", "--python_out=" + gen}, protos...)...)
	run(py, "-m", "grpc_tools.protoc", "-I.", "--grpc_python_out="+gen, "grpc_service.proto")
	// build_wheel.py's renames and import rewrites: the modules live in
	// the tritonclient.grpc package, grpc_service's named service_*.
	pb2 := regexp.MustCompile(`(?m)^import ([^ ]*)_pb2 as ([^ ]*)$`)
	grpcPB2 := regexp.MustCompile(`(?m)^import grpc_([^ ]*)_pb2 as ([^ ]*)$`)
	for from, to := range map[string]string{"grpc_service_pb2.py": "service_pb2.py", "grpc_service_pb2_grpc.py": "service_pb2_grpc.py", "model_config_pb2.py": "model_config_pb2.py"} {
		b, err := os.ReadFile(filepath.Join(gen, from))
		if err != nil {
			t.Fatal(err)
		}
		imports := pb2
		if to == "service_pb2_grpc.py" {
			imports = grpcPB2
		}
		b = imports.ReplaceAll(b, []byte("from tritonclient.grpc import ${1}_pb2 as $2"))
		if err := os.WriteFile(filepath.Join(final, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(final, dir); err != nil {
		// Another test process put them there first.
		if _, serr := os.Stat(filepath.Join(dir, "service_pb2_grpc.py")); serr != nil {
			t.Fatal(err)
		}
	}
	return dir
}
