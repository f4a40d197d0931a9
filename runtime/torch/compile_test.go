//go:build cgo

package torch

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// captureLog routes slog's default logger into a buffer for the test.
func captureLog(t *testing.T) *enginetest.Buffer {
	t.Helper()
	buf := &enginetest.Buffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return buf
}

const compileSource = `
def forward(self, x: Tensor) -> Tensor:
    return torch.relu(torch.matmul(x, self.weight) + self.bias)

def head(self, x: Tensor, k: int = 2) -> Tensor:
    return self.forward(x)[:, :k]
`

func compileParams() map[string]*tensor.Tensor {
	return map[string]*tensor.Tensor{
		"weight": tensor.FromFloat32(seq(12, -1, 0.2), 4, 3),
		"bias":   tensor.FromFloat32([]float32{0.1, -0.2, 0.3}, 3),
	}
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCompileModule(t *testing.T) {
	logs := captureLog(t)
	cache := filepath.Join(t.TempDir(), "cache")
	path := buildModule(t, ModuleSource{Source: compileSource, Parameters: compileParams()})
	m, err := Default().Load(path, engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x := tensor.FromFloat32(seq(8, -0.5, 0.3), 2, 4)
	want := floats(t, call(t, m, "forward", map[string]any{"x": x}))
	wantHead := floats(t, call(t, m, "head", map[string]any{"x": x}))

	on, off := true, false
	same, err := CompileModule(m, CompileOptions{Enabled: &off, CacheDir: cache})
	if err != nil || same != m {
		t.Fatalf("disabled compile = %v, %v; want the module itself", same, err)
	}
	c, err := CompileModule(m, CompileOptions{Enabled: &on, CacheDir: cache, Label: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c == m || !c.(*Module).Compiled() || m.(*Module).Compiled() {
		t.Fatalf("compiled = %v (Compiled %v), original Compiled %v", c, c.(*Module).Compiled(), m.(*Module).Compiled())
	}
	if !reflect.DeepEqual(c.Methods(), []string{"forward", "head"}) {
		t.Errorf("compiled methods = %v", c.Methods())
	}
	if got := floats(t, call(t, c, "forward", map[string]any{"x": x})); !closeTo(got, want, 1e-6) {
		t.Errorf("compiled forward = %v, want %v", got, want)
	}
	if got := floats(t, call(t, c, "head", map[string]any{"x": x})); !closeTo(got, wantHead, 1e-6) {
		t.Errorf("compiled head = %v, want %v", got, wantHead)
	}
	again, err := CompileModule(c, CompileOptions{Enabled: &on, CacheDir: cache})
	if err != nil || again != c {
		t.Errorf("compiling a compiled module = %v, %v; want it unchanged", again, err)
	}
	entries := files(t, cache)
	if len(entries) != 1 || !strings.HasSuffix(entries[0], ".pt") {
		t.Fatalf("cache = %v, want one entry", entries)
	}
	if strings.Contains(logs.String(), "cache hit") {
		t.Errorf("first compile logged a cache hit: %s", logs)
	}

	// A fresh load compiles from the cache.
	m2, err := Default().Load(path, engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	c2, err := CompileModule(m2, CompileOptions{Enabled: &on, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !strings.Contains(logs.String(), "torch compile cache hit") || !c2.(*Module).Compiled() {
		t.Errorf("second compile: Compiled %v, log:\n%s", c2.(*Module).Compiled(), logs)
	}
	if got := floats(t, call(t, c2, "forward", map[string]any{"x": x})); !closeTo(got, want, 1e-6) {
		t.Errorf("cached forward = %v, want %v", got, want)
	}
	// Options, dtype and backend are part of the key.
	m3, err := Default().Load(path, engine.LoadOptions{DType: tensor.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	c3, err := CompileModule(m3, CompileOptions{Enabled: &on, CacheDir: cache, Backend: "eager"})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	c4, err := CompileModule(m2, CompileOptions{Enabled: &on, CacheDir: cache, Mode: "max-autotune", Options: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if n := len(files(t, cache)); n != 3 {
		t.Errorf("cache has %d entries after three distinct compiles, want 3: %v", n, files(t, cache))
	}
}

func TestCompileFailures(t *testing.T) {
	logs := captureLog(t)
	cache := t.TempDir()
	on, strict := true, true
	noForward := loadModule(t, ModuleSource{Source: "def other(self, x: Tensor) -> Tensor:\n    return x\n"}, engine.LoadOptions{})
	got, err := CompileModule(noForward, CompileOptions{Enabled: &on, CacheDir: cache, Label: "nofwd"})
	if err != nil || got != engine.Module(noForward) {
		t.Errorf("non-strict failure = %v, %v; want the module itself", got, err)
	}
	if !strings.Contains(logs.String(), "torch compile failed") || !strings.Contains(logs.String(), "label=nofwd") {
		t.Errorf("no warning logged: %s", logs)
	}
	if _, err := CompileModule(noForward, CompileOptions{Enabled: &on, Strict: &strict, CacheDir: cache}); err == nil ||
		!strings.Contains(err.Error(), "freezing needs a forward method") {
		t.Errorf("strict failure error = %v", err)
	}
	m, _ := linearModule(t, engine.LoadOptions{})
	if got, err := CompileModule(m, CompileOptions{Enabled: &on, Backend: "tensorrt", CacheDir: cache}); err != nil || got != engine.Module(m) {
		t.Errorf("unsupported backend, non-strict = %v, %v", got, err)
	}
	if _, err := CompileModule(m, CompileOptions{Enabled: &on, Backend: "tensorrt", Strict: &strict}); err == nil ||
		!strings.Contains(err.Error(), `backend "tensorrt" is not supported`) {
		t.Errorf("unsupported backend, strict: error = %v", err)
	}
	if _, err := CompileModule(m, CompileOptions{Enabled: &on, Mode: "fastest", Strict: &strict}); err == nil ||
		!strings.Contains(err.Error(), `mode "fastest"`) {
		t.Errorf("unknown mode, strict: error = %v", err)
	}
	if _, err := CompileModule(enginetest.NewModule(), CompileOptions{Enabled: &on}); err == nil {
		t.Error("compiling a foreign module succeeded")
	}
	if n := len(files(t, cache)); n != 0 {
		t.Errorf("failed compiles wrote %d cache entries", n)
	}
}

func TestCompileFromEnvironment(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	t.Setenv(EnvCompile, "")
	if got, err := CompileModule(m, CompileOptions{}); err != nil || got != engine.Module(m) {
		t.Errorf("compile is opt-in: got %v, %v", got, err)
	}
	t.Setenv(EnvCompile, "1")
	t.Setenv(EnvCompileCacheDir, "off")
	c, err := CompileModule(m, CompileOptions{})
	if err != nil || !c.(*Module).Compiled() {
		t.Fatalf("WORLDFOUNDRY_TORCH_COMPILE=1: %v, %v", c, err)
	}
	c.Close()
	t.Setenv(EnvCompileStrict, "maybe")
	if _, err := CompileModule(m, CompileOptions{}); err == nil || !strings.Contains(err.Error(), EnvCompileStrict) {
		t.Errorf("bad strict variable: error = %v", err)
	}
}

func TestCompileCacheRecovers(t *testing.T) {
	logs := captureLog(t)
	cache := t.TempDir()
	on := true
	path := buildModule(t, ModuleSource{Source: compileSource, Parameters: compileParams()})
	m, err := Default().Load(path, engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := CompileModule(m, CompileOptions{Enabled: &on, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	entries := files(t, cache)
	if len(entries) != 1 {
		t.Fatalf("cache = %v", entries)
	}
	entry := filepath.Join(cache, entries[0])
	if err := os.WriteFile(entry, []byte("corrupt"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = CompileModule(m, CompileOptions{Enabled: &on, CacheDir: cache})
	if err != nil || !c.(*Module).Compiled() {
		t.Fatalf("compile over a corrupt entry: %v, %v", c, err)
	}
	c.Close()
	if !strings.Contains(logs.String(), "cache entry unusable") {
		t.Errorf("corrupt entry not reported: %s", logs)
	}
	if b, _ := os.ReadFile(entry); string(b) == "corrupt" {
		t.Error("corrupt entry was not rewritten")
	}
	// A module file changed since load is compiled without the cache.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	c, err = CompileModule(m, CompileOptions{Enabled: &on, CacheDir: cache})
	if err != nil || !c.(*Module).Compiled() {
		t.Fatalf("compile of a changed file: %v, %v", c, err)
	}
	c.Close()
	if !strings.Contains(logs.String(), "changed since it was loaded") {
		t.Errorf("changed file not reported: %s", logs)
	}
}
