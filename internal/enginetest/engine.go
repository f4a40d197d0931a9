// Package enginetest holds what the repository's tests share about engines:
// one fake engine.Engine (Engine, and the Module it loads), a once-per-test-
// binary checkpoint folder (Checkpoints, with Main removing it) and an
// event-driven wait (WaitFor).
//
// The fake engine serves two kinds of tests. Without Inner it loads modules
// that have only schemas (Schemas), for code that inspects a module (the
// contract check, the importer) or an engine (device selection with fake
// GPUs, process groups); their calls run OnCall or fail. With Inner (usually
// the libtorch engine) it loads real modules and wraps them: every call is
// recorded (Calls, TakeCalls) and may be held or changed by OnCall before
// the real module runs it — how a test waits for a call to be in the engine
// instead of sleeping.
//
// The package imports only the runtime's ground floor (engine, spec,
// tensor), so any package's tests may use it, the libtorch engine's
// included; building checkpoints from TorchScript source (examples/
// tinymodels) is the caller's Build function.
package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Engine is a fake engine.Engine. Its zero value is an engine named "fake"
// (version "0.1") with no CUDA device that loads modules without methods.
// Set the fields before the first Load; the methods are safe for concurrent
// use.
//
// Besides engine.Engine it is an engine.CUDAEngine answering from GPUs and
// Current (a CPU machine when GPUs is empty, as libtorch's CPU build is), an
// engine.CacheReleaser and an engine.Synchronizer (both recorded, failing
// with SyncErr). It is no other optional capability (no Compiler, no
// process groups).
type Engine struct {
	// Label and Release are what Name and Version report ("fake" and "0.1"
	// when empty).
	Label, Release string
	// Reads, when not nil, is what Formats reports; else Inner's formats,
	// or every format without Inner (its modules have only Schemas).
	Reads []spec.CheckpointFormat

	// Inner, when set, loads the checkpoints: Load returns its module
	// wrapped, so that calls are recorded and pass OnCall before the inner
	// module runs them.
	Inner engine.Engine

	// Schemas are the methods of a module loaded without Inner.
	Schemas []engine.MethodSchema
	// SchemaErr, when set, is the error of every Schema call.
	SchemaErr error
	// LoadErr, when set, fails every Load.
	LoadErr error

	// OnCall, when set, runs every module call: next runs it as it would
	// run without OnCall (the inner module, or an error without Inner).
	// OnCall may block (holding a call in the engine), change the
	// arguments before calling next, or answer without calling it. Set it
	// before the first Load, or change it with SetOnCall.
	OnCall func(ctx context.Context, c Call, next func(context.Context, map[string]any) (any, error)) (any, error)

	// GPUs are the CUDA devices the engine reports, Current the index of
	// the process's current one and CurrentErr its error.
	GPUs       []engine.DeviceInfo
	Current    int
	CurrentErr error
	// SyncErr is the error of Synchronize and EmptyCache.
	SyncErr error

	mu     sync.Mutex
	loads  []Load
	calls  []Call
	syncs  []string
	closed int
}

// Load is one Load call the engine saw.
type Load struct {
	Path    string
	Options engine.LoadOptions
}

// Call is one module call the engine saw.
type Call struct {
	// Method is the method called.
	Method string
	// Kwargs are the keyword arguments as passed (not copied).
	Kwargs map[string]any
	// Options are the call's options.
	Options engine.CallOptions
}

// String is the call in one line: the method, then the arguments sorted by
// name, tensors as dtype and shape ("forward normalize=true
// tokens=int64[2 16]").
func (c Call) String() string {
	keys := make([]string, 0, len(c.Kwargs))
	for k := range c.Kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := []string{c.Method}
	for _, k := range keys {
		switch v := c.Kwargs[k].(type) {
		case *tensor.Tensor:
			parts = append(parts, fmt.Sprintf("%s=%s%v", k, v.DType, v.Shape))
		default:
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// Name is Label, "fake" when empty.
func (e *Engine) Name() string { return cmp(e.Label, "fake") }

// Version is Release, "0.1" when empty.
func (e *Engine) Version() string { return cmp(e.Release, "0.1") }

// Formats is Reads, else Inner's formats, else every checkpoint format.
func (e *Engine) Formats() []spec.CheckpointFormat {
	switch {
	case e.Reads != nil:
		return e.Reads
	case e.Inner != nil:
		return e.Inner.Formats()
	}
	return spec.CheckpointFormats
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Load records the load and returns a module: Inner's, wrapped, or one
// with Schemas as its methods. It fails with LoadErr when that is set.
func (e *Engine) Load(path string, opts engine.LoadOptions) (engine.Module, error) {
	e.mu.Lock()
	e.loads = append(e.loads, Load{path, opts})
	e.mu.Unlock()
	if e.LoadErr != nil {
		return nil, e.LoadErr
	}
	m := &Module{e: e, device: cmp(opts.Device, "cpu")}
	if e.Inner != nil {
		inner, err := e.Inner.Load(path, opts)
		if err != nil {
			return nil, err
		}
		m.inner = inner
	}
	return m, nil
}

// SetOnCall replaces OnCall, safely while modules are being called.
func (e *Engine) SetOnCall(f func(ctx context.Context, c Call, next func(context.Context, map[string]any) (any, error)) (any, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.OnCall = f
}

// OverDefault returns a fake engine over the process's registered engine
// (libtorch, when runtime/torch is linked), skipping the test when there is
// none (a build without cgo).
func OverDefault(t testing.TB) *Engine {
	t.Helper()
	inner, err := engine.DefaultEngine()
	if err != nil {
		t.Skipf("no engine to wrap: %v", err)
	}
	return &Engine{Inner: inner}
}

// Loads returns the loads so far, in order.
func (e *Engine) Loads() []Load {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.loads)
}

// Calls returns the module calls so far, in order.
func (e *Engine) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// TakeCalls returns the module calls since the last TakeCalls, each as its
// String.
func (e *Engine) TakeCalls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, len(e.calls))
	for i, c := range e.calls {
		out[i] = c.String()
	}
	e.calls = nil
	return out
}

// Closed returns how many of the engine's modules were closed.
func (e *Engine) Closed() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Syncs returns the devices Synchronize was called with, and "empty-cache"
// for each EmptyCache, in order.
func (e *Engine) Syncs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.syncs)
}

// CUDADeviceCount is len(GPUs).
func (e *Engine) CUDADeviceCount() int { return len(e.GPUs) }

// CUDACurrentDevice returns Current and CurrentErr.
func (e *Engine) CUDACurrentDevice() (int, error) { return e.Current, e.CurrentErr }

// CUDADevice returns GPUs[index].
func (e *Engine) CUDADevice(index int) (engine.DeviceInfo, error) {
	if index < 0 || index >= len(e.GPUs) {
		return engine.DeviceInfo{}, fmt.Errorf("no CUDA device %d", index)
	}
	return e.GPUs[index], nil
}

// Synchronize records device and returns SyncErr.
func (e *Engine) Synchronize(device string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.syncs = append(e.syncs, device)
	return e.SyncErr
}

// EmptyCache records "empty-cache" and returns SyncErr.
func (e *Engine) EmptyCache() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.syncs = append(e.syncs, "empty-cache")
	return e.SyncErr
}

// GPU is a device for Engine.GPUs: index i, compute capability
// major.minor, freeGiB GiB free of freeGiB+1 GiB.
func GPU(i, major, minor int, freeGiB float64) engine.DeviceInfo {
	const gib = 1 << 30
	return engine.DeviceInfo{Index: i, Name: fmt.Sprintf("GPU%d sm_%d%d", i, major, minor), Major: major, Minor: minor,
		FreeBytes: uint64(freeGiB * gib), TotalBytes: uint64(freeGiB*gib) + gib}
}

// ErrNotCallable is the error of a call to a module that has no inner
// module and no OnCall to answer it.
var ErrNotCallable = errors.New("enginetest: the fake module has schemas only")

// Module is the fake engine's module: Inner's module wrapped, or schemas
// only.
type Module struct {
	e      *Engine
	inner  engine.Module
	device string

	mu     sync.Mutex
	closed bool
}

// NewModule returns a module with schemas as its methods, as a fake engine
// with those Schemas loads it.
func NewModule(schemas ...engine.MethodSchema) *Module {
	return &Module{e: &Engine{Schemas: schemas}, device: "cpu"}
}

// Engine returns the engine that loaded m.
func (m *Module) Engine() *Engine { return m.e }

// Methods lists the inner module's methods, or the names of the engine's
// Schemas, sorted.
func (m *Module) Methods() []string {
	if m.inner != nil {
		return m.inner.Methods()
	}
	out := make([]string, 0, len(m.e.Schemas))
	for _, s := range m.e.Schemas {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// Schema returns SchemaErr when set, else the inner module's schema or the
// engine's schema of that name.
func (m *Module) Schema(method string) (engine.MethodSchema, error) {
	if m.e.SchemaErr != nil {
		return engine.MethodSchema{}, m.e.SchemaErr
	}
	if m.inner != nil {
		return m.inner.Schema(method)
	}
	for _, s := range m.e.Schemas {
		if s.Name == method {
			return s, nil
		}
	}
	return engine.MethodSchema{}, fmt.Errorf("enginetest: no method %q", method)
}

// Call records the call, then runs it through the engine's OnCall, the
// inner module, or fails with ErrNotCallable.
func (m *Module) Call(ctx context.Context, method string, kwargs map[string]any, opts engine.CallOptions) (any, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, engine.ErrClosed
	}
	c := Call{Method: method, Kwargs: kwargs, Options: opts}
	m.e.mu.Lock()
	m.e.calls = append(m.e.calls, c)
	onCall := m.e.OnCall
	m.e.mu.Unlock()
	next := func(ctx context.Context, kw map[string]any) (any, error) {
		if m.inner == nil {
			return nil, fmt.Errorf("%s: %w", method, ErrNotCallable)
		}
		return m.inner.Call(ctx, method, kw, opts)
	}
	if onCall != nil {
		return onCall(ctx, c, next)
	}
	return next(ctx, kwargs)
}

// Device is the inner module's device, or the device it was loaded on
// ("cpu" when none was given).
func (m *Module) Device() string {
	if m.inner != nil {
		return m.inner.Device()
	}
	return m.device
}

// Close closes the inner module and counts the close on the engine once.
func (m *Module) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.e.mu.Lock()
	m.e.closed++
	m.e.mu.Unlock()
	if m.inner != nil {
		return m.inner.Close()
	}
	return nil
}

// Compile-time checks of the capabilities the documentation promises.
var (
	_ engine.CUDAEngine    = (*Engine)(nil)
	_ engine.CacheReleaser = (*Engine)(nil)
	_ engine.Synchronizer  = (*Engine)(nil)
	_ engine.Module        = (*Module)(nil)
)

// Gate holds module calls until it is opened, so that a test knows a call
// is in the engine (Entered) and stays there for as long as the test needs
// — a slow model without a slow model, and without sleeping. Use its Hold
// as an Engine's OnCall. A held call ignores its context, as a long engine
// call does; once the gate is open, the call runs (next) with it.
type Gate struct {
	entered chan Call
	open    chan struct{}
	once    sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate {
	return &Gate{entered: make(chan Call, 1024), open: make(chan struct{})}
}

// Hold is an OnCall that holds every call until the gate opens.
func (g *Gate) Hold(ctx context.Context, c Call, next func(context.Context, map[string]any) (any, error)) (any, error) {
	select {
	case <-g.open:
	default:
		g.entered <- c
		<-g.open
	}
	return next(ctx, c.Kwargs)
}

// Entered returns the next call held by the gate, failing the test when
// none comes within Patience.
func (g *Gate) Entered(t testing.TB) Call {
	t.Helper()
	return Receive(t, "a call to enter the engine", g.entered)
}

// Open lets the held calls and every later one run; opening twice is
// harmless.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }
