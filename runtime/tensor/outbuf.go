package tensor

import (
	"errors"
	"sync/atomic"
)

// ErrOutputBufferBusy is returned by a call given an OutputBuffer that
// another call is using at the same moment.
var ErrOutputBufferBusy = errors.New("output buffer is in use by another call")

// OutputBuffer is memory that calls put their output tensors' data in,
// instead of fresh memory for every call: for loops that are done with one
// call's outputs before the next call, as with ONNX Runtime's pre-allocated
// outputs or Triton's shared-memory outputs. It saves an allocation the size
// of the outputs per call and the garbage collection that follows, and keeps
// the memory warm in the CPU caches.
//
// The output tensors of a call given a buffer may share its memory until the
// next call given the same buffer, which overwrites them: copy out what must
// outlive that (Tensor.Clone, Tensor.Float32s). A buffer serves one call at
// a time; a second call that overlaps fails with ErrOutputBufferBusy. The
// zero value is ready to use and grows to the largest output it has held.
//
// Engines use Acquire and Release; callers only pass a buffer in
// CallOptions.Outputs.
type OutputBuffer struct {
	busy atomic.Bool
	data []byte
}

// Acquire marks b in use by one call and returns its memory, grown to at
// least n bytes (its contents are whatever the last call left). The caller
// must call Release when the call is over, whether it succeeded or not.
func (b *OutputBuffer) Acquire(n int) ([]byte, error) {
	if !b.busy.CompareAndSwap(false, true) {
		return nil, ErrOutputBufferBusy
	}
	if len(b.data) < n {
		b.data = make([]byte, n)
	}
	return b.data, nil
}

// Release ends the call that acquired b.
func (b *OutputBuffer) Release() { b.busy.Store(false) }
