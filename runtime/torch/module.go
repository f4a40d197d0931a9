//go:build cgo

package torch

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// minOutBuf is the smallest output buffer a call uses (an error message
// longer than the buffer takes the shim's overflow path).
const minOutBuf = 128

// Module is a TorchScript module loaded by the engine; it implements
// engine.Module. Its methods are safe for concurrent use.
type Module struct {
	eng     *Engine
	path    string
	dtype   tensor.DType
	stat    os.FileInfo
	info    moduleInfo
	methods []string
	// outHint is, per method, the size of the last output blob: the next
	// call's output buffer, so outputs usually fit and alias it.
	outHint map[string]*atomic.Int64

	mu      sync.RWMutex
	h       shim.Handle
	closed  bool
	cleanup runtime.Cleanup
}

func newModule(e *Engine, h shim.Handle, info moduleInfo, path string, dtype tensor.DType, st os.FileInfo) *Module {
	m := &Module{eng: e, h: h, info: info, path: path, dtype: dtype, stat: st,
		outHint: make(map[string]*atomic.Int64, len(info.methods))}
	m.methods = append([]string(nil), info.methods...)
	sort.Strings(m.methods)
	for _, name := range info.methods {
		v := new(atomic.Int64)
		v.Store(minOutBuf)
		m.outHint[name] = v
	}
	// A safety net only: Close releases the module deterministically.
	m.cleanup = runtime.AddCleanup(m, func(h shim.Handle) { shim.Close(h) }, h)
	return m
}

// Methods lists the module's methods, sorted.
func (m *Module) Methods() []string { return append([]string(nil), m.methods...) }

// Schema returns one method's schema: arguments without self, their
// TorchScript types and defaults, and the return type.
func (m *Module) Schema(method string) (engine.MethodSchema, error) {
	s, ok := m.info.schemas[method]
	if !ok {
		return engine.MethodSchema{}, m.noMethod(method)
	}
	s.Arguments = append([]engine.Argument(nil), s.Arguments...)
	s.Returns = append([]string(nil), s.Returns...)
	return s, nil
}

func (m *Module) noMethod(method string) error {
	return fmt.Errorf("torch: %s: no method %q (methods: %s)", m.path, method, strings.Join(m.methods, ", "))
}

// Device returns the device the module lives on, e.g. "cpu" or "cuda:0".
func (m *Module) Device() string { return m.info.device }

// DType returns the dtype floating parameters were cast to at load, or ""
// when they kept their own.
func (m *Module) DType() tensor.DType { return m.dtype }

// Path returns the file the module was loaded from.
func (m *Module) Path() string { return m.path }

// Compiled reports whether the module was compiled by CompileModule (now or
// when it was saved to the compile cache).
func (m *Module) Compiled() bool { return m.info.compiled }

func (m *Module) isCUDA() bool { return strings.HasPrefix(m.info.device, "cuda") }

// Call runs method with keyword arguments. Values are nil, string, int64
// (or int, int32), float64 (or float32), bool, *tensor.Tensor, lists
// ([]any or typed slices) and map[string]any; each is converted to the
// argument's TorchScript type (an int is accepted for a float). Floating
// input tensors are cast to the module's load dtype when one was given.
// Outputs come back as nil, string, int64, float64, bool, *tensor.Tensor,
// []any (lists and tuples) and map[string]any; output tensors own their data,
// unless opts.Outputs is given: then their data is in that buffer until the
// next call given it.
//
// ctx is honoured while waiting for a call slot; a call that has entered
// libtorch runs to completion. opts.Autocast applies CUDA autocast with
// opts.AutocastDType (default float16) on CUDA modules and is a no-op
// elsewhere.
func (m *Module) Call(ctx context.Context, method string, kwargs map[string]any, opts engine.CallOptions) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hint, ok := m.outHint[method]
	if !ok {
		return nil, m.noMethod(method)
	}
	autocast := 0
	if opts.Autocast && m.isCUDA() {
		dt := opts.AutocastDType
		if dt == "" {
			dt = tensor.Float16
		}
		if dt != tensor.Float16 && dt != tensor.BFloat16 {
			return nil, fmt.Errorf("torch: call %s (%s): autocast dtype %q: want float16 or bfloat16", method, m.path, dt)
		}
		autocast, _ = dtypeCode(dt)
	}
	enc, err := encodeKwargs(kwargs)
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	if err := m.eng.takeSlot(ctx); err != nil {
		enc.release()
		return nil, err
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		<-m.eng.sem
		enc.release()
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, engine.ErrClosed)
	}
	var out []byte
	if opts.Outputs != nil {
		if out, err = opts.Outputs.Acquire(int(hint.Load())); err != nil {
			m.mu.RUnlock()
			<-m.eng.sem
			enc.release()
			return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
		}
	} else {
		out = make([]byte, hint.Load())
	}
	var pinner runtime.Pinner
	if shim.NeedsPin(enc.ptrs) {
		enc.pin(&pinner)
	}
	res := onThread(func() shim.Result { return shim.Call(m.h, method, enc.buf, enc.ptrs, autocast, out) })
	pinner.Unpin()
	m.mu.RUnlock()
	<-m.eng.sem
	enc.release()
	runtime.KeepAlive(m)
	if opts.Outputs != nil {
		// An output that overflowed the buffer is in fresh memory; the
		// grown hint makes the buffer big enough from the next call on.
		opts.Outputs.Release()
	}
	yieldIfDue()
	if res.Status != statusOK {
		return nil, newError("call", m.path, method, res.Status, string(res.Payload))
	}
	size := (int64(len(res.Payload)) + 63) &^ 63
	if size < minOutBuf {
		size = minOutBuf
	}
	hint.Store(size)
	// When a small output landed in a big buffer, copy it out so the buffer
	// is not kept alive by the output tensors.
	copyData := opts.Outputs == nil && len(out) > 64<<10 && 2*len(res.Payload) < len(out) && aliases(res.Payload, out)
	v, err := decodeValue(res.Payload, copyData)
	if err != nil {
		return nil, fmt.Errorf("torch: call %s (%s): %w", method, m.path, err)
	}
	return v, nil
}

func aliases(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// save writes the module as a TorchScript archive.
func (m *Module) save(path string) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return engine.ErrClosed
	}
	res := shim.Save(m.h, path, make([]byte, 4096))
	if res.Status != statusOK {
		return newError("save", path, "", res.Status, string(res.Payload))
	}
	return nil
}

// Close releases the module. It waits for calls in flight; later calls
// return engine.ErrClosed. Closing twice is a no-op.
func (m *Module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.cleanup.Stop()
	shim.Close(m.h)
	m.h = shim.Handle{}
	return nil
}

// takeSlot takes one of the engine's call slots (MaxConcurrentCalls), or
// returns ctx's error when it ends first; the caller gives the slot back
// with <-e.sem.
func (e *Engine) takeSlot(ctx context.Context) error {
	done := ctx.Done()
	if done == nil {
		e.sem <- struct{}{}
		return nil
	}
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-done:
		return ctx.Err()
	}
}
