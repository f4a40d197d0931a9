package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// tiny holds the demo families' checkpoints, the attention and
// size-sensitive encoders' and the session-batched world's,
// built once for the package's tests and removed when they are over.
var tiny = enginetest.Checkpoints{Name: "serve-test", Build: func(dir string) error {
	if err := tinymodels.Build(dir); err != nil {
		return err
	}
	if err := tinymodels.BuildAttention(filepath.Join(dir, "checkpoints", "attention.pt")); err != nil {
		return err
	}
	if err := tinymodels.BuildSteps(filepath.Join(dir, "checkpoints", "steps-world.pt")); err != nil {
		return err
	}
	return tinymodels.BuildSizeSensitive(filepath.Join(dir, "checkpoints", "size-sensitive.pt"))
}}

func TestMain(m *testing.M) { enginetest.Main(m) }

// loadSpec loads a manifest of manifests/, or of testdata/ (the attention
// and size-sensitive encoders, the session-batched world).
func loadSpec(t testing.TB, name string) *spec.ModelInferenceSpec {
	t.Helper()
	path := filepath.Join("..", "..", "manifests", name+".yaml")
	if name == "size-sensitive" || name == "attention" || name == "steps-world" {
		path = filepath.Join("testdata", name+".yaml")
	}
	f, diags, err := validate.File(path)
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	return f.Spec
}

// clientOptions are the options every test client (in-process or served)
// is created with.
func clientOptions(t testing.TB) []client.Option {
	return []client.Option{client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu")}
}

// inProcess returns an in-process client of a family.
func inProcess(t testing.TB, name string) *client.Client {
	t.Helper()
	c, err := client.New(loadSpec(t, name), clientOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// logSink collects access log records.
type logSink struct {
	mu      sync.Mutex
	records []map[string]any
}

func (l *logSink) Write(b []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err == nil {
		l.mu.Lock()
		l.records = append(l.records, m)
		l.mu.Unlock()
	}
	return len(b), nil
}

func (l *logSink) all() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.records...)
}

// started is a server of the demo families on loopback.
type started struct {
	srv  *serve.Server
	http *http.Server
	logs *logSink
	url  string
}

// start serves the demo families with cfg on a loopback port.
func start(t testing.TB, cfg serve.Config) *started {
	t.Helper()
	return startFamilies(t, cfg, loadSpec(t, "tiny-encoder"), loadSpec(t, "tiny-world"))
}

// startFamilies serves specs with cfg on a loopback port.
func startFamilies(t testing.TB, cfg serve.Config, specs ...*spec.ModelInferenceSpec) *started {
	t.Helper()
	var fams []serve.Family
	for _, sp := range specs {
		fams = append(fams, serve.Family{Spec: sp, Options: clientOptions(t)})
	}
	return serveFamilies(t, cfg, fams...)
}

// plain is the family of manifests/ named name, served on libtorch.
func plain(t testing.TB, name string) serve.Family {
	return serve.Family{Spec: loadSpec(t, name), Options: clientOptions(t)}
}

// onEngine is the family of manifests/ named name served on eng (the fake
// engine, usually over libtorch), from a copy of the checkpoints: clients
// cache modules by path, so eng's modules are this test's alone.
func onEngine(t testing.TB, name string, eng *enginetest.Engine) serve.Family {
	t.Helper()
	return serve.Family{Spec: loadSpec(t, name),
		Options: []client.Option{client.WithCheckpointRoot(tiny.Copy(t)), client.WithDevice("cpu"), client.WithEngine(eng)}}
}

// gated returns a fake engine over libtorch whose calls wait at a gate
// until the test opens it. The test must open it before its servers close
// (defer gate.Open()): closing waits for the calls in the engine. A server
// of a gated family whose manifest asks for a warm-up (the tiny encoder)
// needs Config.NoWarmup: Load would wait at the gate.
func gated(t testing.TB) (*enginetest.Engine, *enginetest.Gate) {
	t.Helper()
	g := enginetest.NewGate()
	e := enginetest.OverDefault(t)
	e.OnCall = g.Hold
	return e, g
}

// serveFamilies serves fams with cfg on a loopback port.
func serveFamilies(t testing.TB, cfg serve.Config, fams ...serve.Family) *started {
	t.Helper()
	logs := &logSink{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	srv, err := serve.New(cfg, fams...)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &started{srv: srv, http: hs, logs: logs, url: "http://" + ln.Addr().String()}
}

// inflight is a handler that counts the requests h is handling: zero once
// every handler has returned, and so every access log record is written.
type inflight struct {
	h http.Handler
	n atomic.Int64
}

func (f *inflight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.n.Add(1)
	defer f.n.Add(-1)
	f.h.ServeHTTP(w, r)
}

// patientClient is http.DefaultClient with a bound that only a hang
// reaches (a server that never answers fails the test, not go test).
var patientClient = &http.Client{Timeout: enginetest.Patience}

// call sends a request and returns the status, the headers and the body.
func call(t testing.TB, method, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := patientClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// errorBody decodes a protocol error body, failing when it is not one.
func errorBody(t testing.TB, b []byte) string {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil || len(e) != 1 {
		t.Fatalf("not an error body {\"error\": ...}: %s", b)
	}
	s, ok := e["error"].(string)
	if !ok || s == "" {
		t.Fatalf("not an error body: %s", b)
	}
	return s
}

func tensorsEqual(a, b *tensor.Tensor) bool {
	return a != nil && b != nil && a.DType == b.DType && slicesEqual(a.Shape, b.Shape) && bytes.Equal(a.Data, b.Data)
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// maxDiff returns the largest difference between two float32 tensors of
// one shape.
func maxDiff(t testing.TB, a, b *tensor.Tensor) float64 {
	t.Helper()
	av, err := a.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	bv, err := b.Float32s()
	if err != nil || !slicesEqual(a.Shape, b.Shape) {
		t.Fatalf("tensors %v and %v: %v", a.Shape, b.Shape, err)
	}
	d := 0.0
	for i := range av {
		d = max(d, math.Abs(float64(av[i]-bv[i])))
	}
	return d
}

// tokens returns the i-th test token sequence, of length n.
func tokens(i, n int) *tensor.Tensor {
	v := make([]int64, n)
	for j := range v {
		v[j] = int64(i*7 + j*13)
	}
	return tensor.FromInt64(v, int64(n))
}
