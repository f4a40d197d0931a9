//go:build cgo

package torch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/worldfoundry/wfgen/runtime/infra"
	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// ErrAOTIUnavailable is the load error of an AOTInductor package on an
// engine built against a libtorch older than 2.6, which cannot run one.
var ErrAOTIUnavailable = errors.New("AOTInductor packages need libtorch ≥ 2.6")

// AOTIMethod is the one method of an AOTInductor package: the call it was
// exported for.
const AOTIMethod = spec.DefaultMethod

// AOTIModule is an AOTInductor package (.pt2) loaded by the engine: a model
// compiled ahead of time for one call, run by libtorch's
// AOTIModelPackageLoader. It implements engine.CallSpecModule; its
// methods are safe for concurrent use.
type AOTIModule struct {
	eng    *Engine
	path   string
	device string
	spec   engine.CallSpec
	// outHint is the size of the last output blob, the next call's buffer.
	outHint atomic.Int64

	mu      sync.RWMutex
	h       shim.AOTIHandle
	closed  bool
	cleanup runtime.Cleanup
}

// aotiUnavailable says why this engine cannot run AOTInductor packages, or
// returns nil when it can.
func (e *Engine) aotiUnavailable() error {
	if shim.AOTIAvailable() {
		return nil
	}
	return fmt.Errorf("%w (this engine was built against %s)", ErrAOTIUnavailable, e.Version())
}

// loadAOTI loads an AOTInductor package onto opts.Device (default "cpu"),
// which must be the kind of device it was compiled for; opts.DType, when
// set, must be the package's floating dtype (a compiled model cannot be
// cast). The package must carry the call spec examples/aoti/export.py
// records (CallSpecKey), which is checked against the package's own pytree
// call spec and number of inputs.
func (e *Engine) loadAOTI(path string, opts engine.LoadOptions) (*AOTIModule, error) {
	if err := e.aotiUnavailable(); err != nil {
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	if err := e.init(); err != nil {
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	if _, err := infra.Install(infra.Options{}); err != nil {
		return nil, fmt.Errorf("torch: load %s: process policy: %w", path, err)
	}
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("torch: load: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("torch: load %s: not a file, want an AOTInductor package", path)
	}
	device := opts.Device
	if device == "" {
		device = "cpu"
	}
	h, res := shim.AOTILoad(path, device, make([]byte, 16<<10))
	if res.Status != statusOK {
		return nil, newError("load", path, "", res.Status, string(res.Payload))
	}
	fail := func(err error) (*AOTIModule, error) {
		shim.AOTIClose(h)
		return nil, fmt.Errorf("torch: load %s: %w", path, err)
	}
	v, err := decodeValue(res.Payload, true)
	if err != nil {
		return fail(err)
	}
	info, ok := v.(map[string]any)
	if !ok {
		return fail(fmt.Errorf("malformed package info %T", v))
	}
	p, err := packageInfo(info)
	if err != nil {
		return fail(err)
	}
	if kind, _, _ := strings.Cut(device, ":"); p.device != "" && kind != p.device {
		return fail(fmt.Errorf("the package was compiled for %s and cannot run on %s; export it on a %s device", p.device, device, kind))
	}
	if err := checkLoadDType(&p.spec, opts.DType); err != nil {
		return fail(err)
	}
	m := &AOTIModule{eng: e, path: path, device: device, spec: p.spec, h: h}
	m.outHint.Store(minOutBuf)
	// A safety net only: Close releases the package deterministically.
	m.cleanup = runtime.AddCleanup(m, func(h shim.AOTIHandle) { shim.AOTIClose(h) }, h)
	return m, nil
}

// Methods returns the package's one method, "forward".
func (m *AOTIModule) Methods() []string { return []string{AOTIMethod} }

func (m *AOTIModule) noMethod(method string) error {
	return fmt.Errorf("torch: %s: no method %q (an AOTInductor package has one: %s)", m.path, method, AOTIMethod)
}

// CallSpec returns the call the package was exported for.
func (m *AOTIModule) CallSpec(method string) (engine.CallSpec, error) {
	if method != AOTIMethod {
		return engine.CallSpec{}, m.noMethod(method)
	}
	s := m.spec
	s.Inputs = append([]engine.CallInput(nil), s.Inputs...)
	s.Outputs = append([]engine.CallOutput(nil), s.Outputs...)
	dims := make(map[string]engine.DimRange, len(s.Dims))
	for k, v := range s.Dims {
		dims[k] = v
	}
	s.Dims = dims
	return s, nil
}

// Schema returns the schema the call spec implies: the tensor inputs (all
// required, typed Tensor; baked-in constants are not arguments) and the
// return type (Tensor, Tuple[Tensor, ...] or Dict[str, Tensor]).
func (m *AOTIModule) Schema(method string) (engine.MethodSchema, error) {
	if method != AOTIMethod {
		return engine.MethodSchema{}, m.noMethod(method)
	}
	s := engine.MethodSchema{Name: method}
	for _, in := range m.spec.Tensors() {
		s.Arguments = append(s.Arguments, engine.Argument{Name: in.Name, Type: "Tensor"})
	}
	switch m.spec.Returns {
	case engine.ReturnsDict:
		s.Returns = []string{"Dict[str, Tensor]"}
	case engine.ReturnsTuple:
		ts := make([]string, len(m.spec.Outputs))
		for i := range ts {
			ts[i] = "Tensor"
		}
		s.Returns = []string{"Tuple[" + strings.Join(ts, ", ") + "]"}
	default:
		s.Returns = []string{"Tensor"}
	}
	return s, nil
}

// Device returns the device the package runs on.
func (m *AOTIModule) Device() string { return m.device }

// Path returns the file the package was loaded from.
func (m *AOTIModule) Path() string { return m.path }

// Call runs the package's call with keyword arguments: every tensor input
// of the call spec by name, with the dtype and shape it was exported for
// (named dimensions within their exported range, agreeing across inputs;
// checked before libtorch sees them: a compiled model does not check).
// Outputs come back as the package returns them: one tensor, []any or
// map[string]any. opts.Autocast does nothing (the dtypes were fixed at
// export); opts.Outputs is used as by Module.Call. ctx is honoured while
// waiting for a call slot.
func (m *AOTIModule) Call(ctx context.Context, method string, kwargs map[string]any, opts engine.CallOptions) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if method != AOTIMethod {
		return nil, m.noMethod(method)
	}
	inputs, err := bindInputs(&m.spec, kwargs)
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	enc, err := encodeKwargs(map[string]any{"inputs": inputs})
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	if err := m.eng.takeSlot(ctx); err != nil {
		enc.release()
		return nil, err
	}
	m.mu.RLock()
	release := func() {
		m.mu.RUnlock()
		<-m.eng.sem
		enc.release()
	}
	if m.closed {
		release()
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, engine.ErrClosed)
	}
	var out []byte
	if opts.Outputs != nil {
		if out, err = opts.Outputs.Acquire(int(m.outHint.Load())); err != nil {
			release()
			return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
		}
	} else {
		out = make([]byte, m.outHint.Load())
	}
	var pinner runtime.Pinner
	if shim.NeedsPin(enc.ptrs) {
		enc.pin(&pinner)
	}
	res := onThread(func() shim.Result { return shim.AOTICall(m.h, enc.buf, enc.ptrs, out) })
	pinner.Unpin()
	release()
	runtime.KeepAlive(m)
	if opts.Outputs != nil {
		opts.Outputs.Release()
	}
	yieldIfDue()
	if res.Status != statusOK {
		return nil, newError("call", m.path, method, res.Status, string(res.Payload))
	}
	m.outHint.Store(max((int64(len(res.Payload))+63)&^63, minOutBuf))
	copyData := opts.Outputs == nil && len(out) > 64<<10 && 2*len(res.Payload) < len(out) && aliases(res.Payload, out)
	v, err := decodeValue(res.Payload, copyData)
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	v, err = assembleOutputs(&m.spec, v)
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	return v, nil
}

// Close releases the package (and the folder libtorch unpacked it into).
// It waits for calls in flight; later calls return engine.ErrClosed.
// Closing twice is a no-op.
func (m *AOTIModule) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.cleanup.Stop()
	shim.AOTIClose(m.h)
	m.h = shim.AOTIHandle{}
	return nil
}

var _ engine.CallSpecModule = (*AOTIModule)(nil)
