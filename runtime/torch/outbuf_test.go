//go:build cgo

package torch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

const outBufSource = `
def forward(self, x: Tensor) -> Dict[str, Tensor]:
    return {"double": x * 2.0, "sum": x.sum()}

def big(self, n: int) -> Tensor:
    return torch.arange(n).float()
`

// inBuffer reports whether t's data lies inside the output buffer's memory.
func inBuffer(t *tensor.Tensor, buf []byte) bool {
	if len(t.Data) == 0 || len(buf) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&t.Data[0])), uintptr(unsafe.Pointer(&buf[0]))
	return p >= lo && p < lo+uintptr(len(buf))
}

// bufferMemory returns the buffer's current memory (acquired and released).
func bufferMemory(t *testing.T, b *tensor.OutputBuffer) []byte {
	t.Helper()
	mem, err := b.Acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	return mem
}

func TestCallWithOutputBuffer(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: outBufSource}, engine.LoadOptions{})
	ctx := context.Background()
	var buf tensor.OutputBuffer
	opts := engine.CallOptions{Outputs: &buf}
	run := func(x []float32, o engine.CallOptions) map[string]any {
		t.Helper()
		out, err := m.Call(ctx, "forward", map[string]any{"x": tensor.FromFloat32(x, int64(len(x)))}, o)
		if err != nil {
			t.Fatal(err)
		}
		return out.(map[string]any)
	}

	// The outputs are the same as with fresh memory; from the second call on
	// (the first one sizes the buffer) they live in the buffer.
	x := seq(64, 1, 1)
	fresh := run(x, engine.CallOptions{})
	run(x, opts)
	first := run(x, opts)
	mem := bufferMemory(t, &buf)
	for _, k := range []string{"double", "sum"} {
		if got, want := floats(t, first[k]), floats(t, fresh[k]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s with a buffer = %v, want %v", k, got, want)
		}
		if !inBuffer(first[k].(*tensor.Tensor), mem) {
			t.Errorf("%s is not in the output buffer", k)
		}
		if inBuffer(fresh[k].(*tensor.Tensor), mem) {
			t.Errorf("%s of a call without the buffer is in it", k)
		}
	}

	// The next call given the buffer overwrites the previous outputs, as
	// documented; a call without it does not.
	run(seq(64, -1, -1), opts)
	if got := floats(t, first["double"]); got[0] != -2 {
		t.Errorf("after the next call, the earlier output starts with %v; want it overwritten (-2)", got[0])
	}
	run(seq(64, 5, 0), engine.CallOptions{})
	if got := floats(t, first["double"]); got[0] != -2 {
		t.Errorf("a call without the buffer changed the buffer's outputs: %v", got[0])
	}

	// A buffer saves the output memory. Bytes rather than allocation counts
	// are compared: the race detector makes sync.Pool drop items at random,
	// which moves the count by about one either way, while the output here
	// (64 KiB) dwarfs everything else a call allocates.
	big := seq(16<<10, 0, 1)
	kw := map[string]any{"x": tensor.FromFloat32(big, int64(len(big)))}
	call := func(o engine.CallOptions) func() {
		return func() {
			if _, err := m.Call(ctx, "forward", kw, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	outBytes := float64(4 * len(big))
	withBuf, without := bytesPerCall(call(opts)), bytesPerCall(call(engine.CallOptions{}))
	if without < outBytes || withBuf > without-outBytes/2 {
		t.Errorf("bytes allocated per call: %.0f with a buffer, %.0f without; want the %.0f output bytes saved", withBuf, without, outBytes)
	}
}

// bytesPerCall returns the heap bytes f allocates per call, averaged over
// 100 calls after one warm-up call.
func bytesPerCall(f func()) float64 {
	const n = 100
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / n
}

func TestOutputBufferGrowsAndRejectsOverlap(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: outBufSource}, engine.LoadOptions{})
	ctx := context.Background()
	var buf tensor.OutputBuffer
	opts := engine.CallOptions{Outputs: &buf}
	big := func(n int64) *tensor.Tensor {
		t.Helper()
		out, err := m.Call(ctx, "big", map[string]any{"n": n}, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := floats(t, out)
		if int64(len(got)) != n || got[n-1] != float32(n-1) {
			t.Fatalf("big(%d) = %d values ending %v", n, len(got), got[len(got)-1])
		}
		return out.(*tensor.Tensor)
	}
	// An output bigger than the buffer comes back whole in fresh memory; the
	// buffer is big enough from the next call on.
	if out := big(10000); inBuffer(out, bufferMemory(t, &buf)) {
		t.Error("an output that overflowed the buffer is reported inside it")
	}
	if out := big(10000); !inBuffer(out, bufferMemory(t, &buf)) {
		t.Error("the second call of the same size is not in the buffer")
	}
	if out := big(10); !inBuffer(out, bufferMemory(t, &buf)) {
		t.Error("a smaller output is not in the buffer")
	}

	// A buffer another call holds is refused with a clear error, and the
	// refused call leaves the module serving.
	if _, err := buf.Acquire(0); err != nil {
		t.Fatal(err)
	}
	_, err := m.Call(ctx, "big", map[string]any{"n": int64(3)}, opts)
	if !errors.Is(err, tensor.ErrOutputBufferBusy) {
		t.Fatalf("call with a buffer in use: %v, want ErrOutputBufferBusy", err)
	}
	buf.Release()
	big(3)
}

// Goroutines with a buffer each, calling one module at once, get their own
// outputs (the race detector checks the buffers' hand-offs).
func TestOutputBuffersConcurrent(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: outBufSource}, engine.LoadOptions{})
	inGoroutines(t, 8, func(g int) error {
		var buf tensor.OutputBuffer
		for i := 0; i < 50; i++ {
			v := float32(g*1000 + i)
			out, err := m.Call(context.Background(), "forward",
				map[string]any{"x": tensor.FromFloat32([]float32{v, v}, 2)}, engine.CallOptions{Outputs: &buf})
			if err != nil {
				return err
			}
			got, _ := out.(map[string]any)["double"].(*tensor.Tensor).Float32s()
			if got[0] != 2*v || got[1] != 2*v {
				return fmt.Errorf("goroutine %d call %d: got %v, want %v", g, i, got, 2*v)
			}
		}
		return nil
	})
}
