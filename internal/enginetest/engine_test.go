package enginetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestSchemasOnly(t *testing.T) {
	t.Parallel()
	e := &Engine{Schemas: []engine.MethodSchema{{Name: "forward"}, {Name: "describe"}}}
	m, err := e.Load("m.pt", engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Methods(); !slices.Equal(got, []string{"describe", "forward"}) {
		t.Errorf("Methods = %v, want them sorted", got)
	}
	if s, err := m.Schema("forward"); err != nil || s.Name != "forward" {
		t.Errorf("Schema(forward) = %+v, %v", s, err)
	}
	if _, err := m.Schema("nope"); err == nil {
		t.Error("Schema of a missing method succeeded")
	}
	if _, err := m.Call(context.Background(), "forward", nil, engine.CallOptions{}); !errors.Is(err, ErrNotCallable) {
		t.Errorf("Call = %v, want ErrNotCallable", err)
	}
	if m.Device() != "cpu" || e.Name() != "fake" || e.Version() != "0.1" {
		t.Errorf("device %q, engine %s %s", m.Device(), e.Name(), e.Version())
	}
	m.Close()
	m.Close()
	if e.Closed() != 1 {
		t.Errorf("closed %d modules, want 1", e.Closed())
	}
	if _, err := m.Call(context.Background(), "forward", nil, engine.CallOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Call after Close = %v", err)
	}
	if l := e.Loads(); len(l) != 1 || l[0].Path != "m.pt" {
		t.Errorf("loads %+v", l)
	}
	e.LoadErr = errors.New("bad")
	if _, err := e.Load("m.pt", engine.LoadOptions{}); err != e.LoadErr {
		t.Errorf("Load with LoadErr = %v", err)
	}
}

func TestOnCallAndRecords(t *testing.T) {
	t.Parallel()
	e := &Engine{}
	e.SetOnCall(func(ctx context.Context, c Call, next func(context.Context, map[string]any) (any, error)) (any, error) {
		return int64(len(c.Kwargs)), nil
	})
	m, _ := e.Load("m.pt", engine.LoadOptions{Device: "cuda:1"})
	kw := map[string]any{"tokens": tensor.FromInt64([]int64{1, 2}, 1, 2), "normalize": true}
	if out, err := m.Call(context.Background(), "forward", kw, engine.CallOptions{}); err != nil || out != int64(2) {
		t.Errorf("Call = %v, %v", out, err)
	}
	if got := e.TakeCalls(); !slices.Equal(got, []string{"forward normalize=true tokens=int64[1 2]"}) {
		t.Errorf("calls %q", got)
	}
	if len(e.Calls()) != 0 || m.Device() != "cuda:1" {
		t.Errorf("calls after TakeCalls %v, device %q", e.Calls(), m.Device())
	}
}

func TestGate(t *testing.T) {
	t.Parallel()
	g := NewGate()
	e := &Engine{OnCall: g.Hold}
	m, _ := e.Load("m.pt", engine.LoadOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := m.Call(context.Background(), "forward", nil, engine.CallOptions{})
		done <- err
	}()
	if c := g.Entered(t); c.Method != "forward" {
		t.Errorf("entered %+v", c)
	}
	select {
	case err := <-done:
		t.Fatalf("the call passed the closed gate: %v", err)
	default:
	}
	g.Open()
	g.Open()
	if err := Receive(t, "the call", done); !errors.Is(err, ErrNotCallable) {
		t.Errorf("after the gate: %v", err)
	}
}

func TestCUDA(t *testing.T) {
	t.Parallel()
	e := &Engine{GPUs: []engine.DeviceInfo{GPU(0, 8, 0, 40)}, Current: 0, SyncErr: errors.New("lost")}
	c, err := engine.AsCUDA(e)
	if err != nil || c.CUDADeviceCount() != 1 {
		t.Fatalf("AsCUDA = %v, %v", c, err)
	}
	if d, err := c.CUDADevice(0); err != nil || d.Major != 8 || d.FreeBytes != 40<<30 {
		t.Errorf("device 0 = %+v, %v", d, err)
	}
	if _, err := c.CUDADevice(1); err == nil {
		t.Error("device 1 of 1 found")
	}
	if e.Synchronize("cuda:0") == nil || e.EmptyCache() == nil || !slices.Equal(e.Syncs(), []string{"cuda:0", "empty-cache"}) {
		t.Errorf("syncs %v", e.Syncs())
	}
}

var tiny = Checkpoints{Name: "enginetest", Build: func(dir string) error {
	return writeFile(dir, "a/b.pt", "checkpoint")
}}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	if tiny.Dir(t) != dir {
		t.Error("built twice")
	}
	cp := tiny.Copy(t)
	if cp == dir || readFile(t, cp, "a/b.pt") != "checkpoint" {
		t.Errorf("copy %s of %s", cp, dir)
	}
	p := Fresh(t, "m.pt", func(path string) error { return writeFileAt(path, "fresh") })
	if readFile(t, p, "") != "fresh" {
		t.Errorf("fresh %s", p)
	}
}

func TestMain(m *testing.M) { Main(m) }

func writeFile(dir, name, text string) error { return writeFileAt(filepath.Join(dir, name), text) }

func writeFileAt(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
