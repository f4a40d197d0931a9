//go:build cgo && wfbench

package torch

import (
	"runtime"
	"time"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// benchRaw runs method n times in a plain C++ loop (no Go, no value blobs on
// the way out) for the benchmarks' "raw C++" baseline. Only tensor kwargs.
func (m *Module) benchRaw(method string, kwargs map[string]any, n int, outBytes int) (time.Duration, error) {
	enc, err := encodeKwargs(kwargs)
	if err != nil {
		return 0, err
	}
	defer enc.release()
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, engine.ErrClosed
	}
	var pinner runtime.Pinner
	enc.pin(&pinner)
	defer pinner.Unpin()
	ns, res := shim.BenchRaw(m.h, method, enc.buf, enc.ptrs, n, make([]byte, outBytes))
	if res.Status != statusOK {
		return 0, newError("bench", m.path, method, res.Status, string(res.Payload))
	}
	return time.Duration(ns), nil
}
