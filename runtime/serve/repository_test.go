package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

type indexEntry struct{ Name, Version, State, Reason string }

func repositoryIndex(t *testing.T, url string) map[string]indexEntry {
	t.Helper()
	code, _, b := post(t, url+"/v2/repository/index", "")
	var entries []indexEntry
	if err := json.Unmarshal(b, &entries); code != 200 || err != nil {
		t.Fatalf("index: %d %s (%v)", code, b, err)
	}
	out := map[string]indexEntry{}
	for _, e := range entries {
		out[e.Name] = e
	}
	return out
}

// With explicit model control the server loads only its startup models;
// the others are unavailable (503, saying how to load them) until POST
// .../load loads and warms them up; POST .../unload ends their sessions,
// refuses new requests and frees them, and a reload answers as before,
// bit for bit, from the variant's next revision (model_version
// default@2). Without it, load and unload are refused.
func TestRepositoryExplicitControl(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{ModelControl: serve.ControlExplicit, StartupModels: []string{"tiny-world"}})
	idx := repositoryIndex(t, s.url)
	if idx["tiny-world"].State != "READY" || idx["tiny-encoder"].State != "UNAVAILABLE" || idx["tiny-encoder"].Version != "default" {
		t.Fatalf("index at start: %+v", idx)
	}
	if code, _, _ := call(t, "GET", s.url+"/v2/health/ready", ""); code != 200 {
		t.Errorf("server ready with a model unloaded: %d", code)
	}
	infer := func() (int, string) {
		code, _, b := post(t, s.url+"/v2/models/tiny-encoder/infer", embedBody, "Content-Type", "application/json")
		return code, string(b)
	}
	if code, b := infer(); code != http.StatusServiceUnavailable || !strings.Contains(b, "not loaded: load it with POST /v2/repository/models/tiny-encoder/load") {
		t.Errorf("a request for an unloaded model: %d %s", code, b)
	}
	if code, _, b := post(t, s.url+"/v2/repository/models/tiny-encoder/load", ""); code != 200 {
		t.Fatalf("load: %d %s", code, b)
	}
	st, first := infer()
	if st != 200 {
		t.Fatalf("after load: %d %s", st, first)
	}
	if code, _, _ := call(t, "GET", s.url+"/v2/models/tiny-encoder/ready", ""); code != 200 {
		t.Errorf("model ready after load: %d", code)
	}

	// A session of the world model, then its unload: the session ends,
	// new requests are refused, the index says why.
	world := remoteClient(t, s, "tiny-world")
	sess, err := world.Stream(context.Background(), "step", map[string]any{"speed": 1.0}, stream.WithPacing(false))
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for _, err := range sess.Chunks(context.Background()) {
			if err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	}()
	enginetest.WaitFor(t, "the session to open", func() bool { return s.srv.Stats().Sessions == 1 })
	if code, _, b := post(t, s.url+"/v2/repository/models/tiny-world/unload", `{"parameters":{"unload_dependents":false}}`); code != 200 {
		t.Fatalf("unload: %d %s", code, b)
	}
	if err := enginetest.Receive(t, "the session to end at the unload", ended); err == nil {
		t.Error("the session ended without an error at the unload")
	}
	if e := repositoryIndex(t, s.url)["tiny-world"]; e.State != "UNAVAILABLE" || !strings.Contains(e.Reason, "unloaded") {
		t.Errorf("index after unload: %+v", e)
	}
	if code, _, _ := call(t, "GET", s.url+"/v2/models/tiny-world/ready", ""); code != http.StatusServiceUnavailable {
		t.Errorf("model ready after unload: %d", code)
	}

	// Unload and reload the encoder: the same bits.
	for _, op := range []string{"unload", "load"} {
		if code, _, b := post(t, s.url+"/v2/repository/models/tiny-encoder/"+op, ""); code != 200 {
			t.Fatalf("%s: %d %s", op, code, b)
		}
	}
	if !strings.Contains(first, `"model_version":"default@1"`) {
		t.Errorf("the first load's answer does not name revision 1: %s", first)
	}
	want := strings.Replace(first, `"model_version":"default@1"`, `"model_version":"default@2"`, 1)
	if st, again := infer(); st != 200 || again != want {
		t.Errorf("after a reload: %d\n%s\nwant\n%s", st, again, want)
	}
	if code, _, b := post(t, s.url+"/v2/repository/models/nope/load", ""); code != 404 {
		t.Errorf("load of an unknown model: %d %s", code, b)
	}

	// The same over gRPC (Triton's RepositoryIndex, RepositoryModelLoad,
	// RepositoryModelUnload).
	g := withGRPC(t, s)
	ctx := context.Background()
	state := func() string {
		t.Helper()
		idx, err := g.oip.RepositoryIndex(ctx, &oippb.RepositoryIndexRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range idx.Models {
			if e.Name == "tiny-world" {
				return e.State
			}
		}
		return "absent"
	}
	if st := state(); st != "UNAVAILABLE" {
		t.Errorf("gRPC index before the load: %s", st)
	}
	if _, err := g.oip.RepositoryModelLoad(ctx, &oippb.RepositoryModelLoadRequest{ModelName: "tiny-world"}); err != nil {
		t.Fatalf("gRPC load: %v", err)
	}
	if st := state(); st != "READY" {
		t.Errorf("gRPC index after the load: %s", st)
	}
	if _, err := g.oip.RepositoryModelUnload(ctx, &oippb.RepositoryModelUnloadRequest{ModelName: "tiny-world"}); err != nil {
		t.Fatalf("gRPC unload: %v", err)
	}
	if st := state(); st != "UNAVAILABLE" {
		t.Errorf("gRPC index after the unload: %s", st)
	}
	if _, err := g.oip.RepositoryModelLoad(ctx, &oippb.RepositoryModelLoadRequest{ModelName: "nope"}); code(err) != codes.NotFound {
		t.Errorf("gRPC load of an unknown model: %v", err)
	}

	plain := withGRPC(t, start(t, serve.Config{}))
	if code, _, b := post(t, plain.url+"/v2/repository/models/tiny-encoder/unload", ""); code != 400 || !strings.Contains(string(b), "model control is off") {
		t.Errorf("unload without model control: %d %s", code, b)
	}
	if _, err := plain.oip.RepositoryModelUnload(ctx, &oippb.RepositoryModelUnloadRequest{ModelName: "tiny-encoder"}); code(err) != codes.InvalidArgument {
		t.Errorf("gRPC unload without model control: %v", err)
	}
	if idx := repositoryIndex(t, plain.url); idx["tiny-encoder"].State != "READY" {
		t.Errorf("index without model control: %+v", idx)
	}
}

// Triton's own Python HTTP client (tritonclient.http, unmodified) lists the
// repository, loads and unloads a model, and reads its readiness.
func TestTritonClientRepository(t *testing.T) {
	t.Parallel()
	lib := tritonClientDir()
	if _, err := os.Stat(filepath.Join(lib, "tritonclient", "http", "__init__.py")); err != nil {
		t.Skipf("Triton's Python client is not at %s (docs/serving.md)", lib)
	}
	py := "/usr/bin/python3"
	env := append(os.Environ(), "PYTHONPATH="+lib, "PYTHONDONTWRITEBYTECODE=1")
	check := exec.Command(py, "-c", "import numpy, rapidjson, geventhttpclient, tritonclient.http")
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("tritonclient.http does not import with %s: %v %s", py, err, out)
	}
	s := start(t, serve.Config{ModelControl: serve.ControlExplicit, Token: "sesame"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "tritonclient", "repository.py"), strings.TrimPrefix(s.url, "http://"), "sesame")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tritonclient: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Before, Loaded, After map[string]string
		ReadyLoaded           bool `json:"ready_loaded"`
		ReadyAfter            bool `json:"ready_after"`
		Embedding             int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Before["tiny-encoder"] != "UNAVAILABLE" || got.Loaded["tiny-encoder"] != "READY" || got.After["tiny-encoder"] != "UNAVAILABLE" ||
		!got.ReadyLoaded || got.ReadyAfter || got.Embedding != 64 {
		t.Errorf("tritonclient saw %s", out)
	}
}

// Triton's own Python gRPC client (tritonclient.grpc, unmodified, its
// protobuf modules generated from Triton's .proto files: tritonGRPCPath)
// lists the repository, reads a model's readiness, loads it, runs it with
// Triton's priority and timeout parameters — the in-process client's
// embedding bit for bit —, unloads it, and is
// told NOT_FOUND for an unknown model.
func TestTritonGRPCClientRepository(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	path := tritonGRPCPath(t, py)
	s := withGRPC(t, start(t, serve.Config{ModelControl: serve.ControlExplicit, Token: "sesame"}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "tritonclient", "repository_grpc.py"), s.addr, "sesame")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tritonclient.grpc: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Before, Loaded, After map[string]string
		ReadyBefore           bool      `json:"ready_before"`
		ReadyLoaded           bool      `json:"ready_loaded"`
		ReadyAfter            bool      `json:"ready_after"`
		Embedding             []float64 `json:"embedding"`
		ModelVersion          string    `json:"model_version"`
		UnknownLoad           *string   `json:"unknown_load"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Before["tiny-encoder"] != "UNAVAILABLE" || got.Loaded["tiny-encoder"] != "READY" || got.After["tiny-encoder"] != "UNAVAILABLE" ||
		got.ReadyBefore || !got.ReadyLoaded || got.ReadyAfter || got.ModelVersion != "default@1" {
		t.Errorf("tritonclient.grpc saw %s", out)
	}
	if got.UnknownLoad == nil || *got.UnknownLoad != "StatusCode.NOT_FOUND" {
		t.Errorf("load of an unknown model: %v", got.UnknownLoad)
	}
	want := inProcessEmbedding(t, 1, 2, 3, 4)
	if len(got.Embedding) != len(want) {
		t.Fatalf("embedding of %d values, want %d", len(got.Embedding), len(want))
	}
	for i, v := range got.Embedding {
		if math.Float32bits(float32(v)) != math.Float32bits(want[i]) || float64(float32(v)) != v {
			t.Fatalf("embedding[%d] = %v, in-process %v", i, v, want[i])
		}
	}
}

// An unload waits for the call in the engine, and the requests queued for
// the engine slot are then refused 503 — none loads the model again
// behind the unload's back.
func TestUnloadWaitsForCallsAndRefusesTheQueue(t *testing.T) {
	t.Parallel()
	world, gate := gated(t)
	defer gate.Open()
	s := withGRPC(t, serveFamilies(t, serve.Config{ModelControl: serve.ControlExplicit, StartupModels: []string{"tiny-world"}, MaxConcurrent: 1, NoWarmup: true},
		onEngine(t, "tiny-world", world), plain(t, "tiny-encoder")))
	worldBody := `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["a red fox"]},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[1]},{"name":"height","datatype":"INT64","shape":[1],"data":[16]},{"name":"width","datatype":"INT64","shape":[1],"data":[16]}]}`
	answers := make(chan int, 2)
	send := func() {
		go func() {
			code, _, _ := post(t, s.url+"/v2/models/tiny-world/infer", worldBody, "Content-Type", "application/json")
			answers <- code
		}()
	}
	send()
	gate.Entered(t) // the first call holds the one engine slot
	send()
	enginetest.WaitFor(t, "the second request to queue", func() bool { return s.srv.Stats().SlotWaiters == 1 })
	loads := len(world.Loads())
	unloaded := make(chan int, 1)
	go func() {
		code, _, _ := post(t, s.url+"/v2/repository/models/tiny-world/unload", "")
		unloaded <- code
	}()
	enginetest.WaitFor(t, "the unload to wait for the call in the engine", func() bool { return s.srv.Stats().DrainingRevisions == 1 })
	gate.Open()
	if code := enginetest.Receive(t, "the unload", unloaded); code != 200 {
		t.Fatalf("unload: %d", code)
	}
	got := []int{enginetest.Receive(t, "an answer", answers), enginetest.Receive(t, "an answer", answers)}
	if !(got[0] == 200 && got[1] == 503 || got[0] == 503 && got[1] == 200) {
		t.Errorf("answers %v: want the call in the engine 200, the queued one 503", got)
	}
	if n := len(world.Loads()); n != loads {
		t.Errorf("%d loads after the unload: the model was loaded again", n-loads)
	}
}
