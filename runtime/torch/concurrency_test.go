//go:build cgo

package torch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

const oomSource = `
def forward(self, x: Tensor) -> Tensor:
    return x + 1

def boom(self, n: int) -> Tensor:
    return torch.empty([n, n, n])
`

// A real host allocation failure inside a scripted method comes back as
// ErrOutOfMemory (the interpreter re-throws it as a plain runtime_error), and
// the module keeps serving.
func TestOutOfMemory(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: oomSource}, engine.LoadOptions{})
	// 2^17 cubed float32 elements = 2^53 bytes: no host can allocate that.
	_, err := m.Call(context.Background(), "boom", map[string]any{"n": 1 << 17}, engine.CallOptions{})
	if !errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("huge allocation: error = %v, want ErrOutOfMemory", err)
	}
	var te *Error
	if !errors.As(err, &te) || !te.OOM || te.Method != "boom" || !strings.Contains(te.Message, "can't allocate memory") {
		t.Errorf("error = %#v", te)
	}
	for i := 0; i < 3; i++ {
		out := call(t, m, "forward", map[string]any{"x": tensor.FromFloat32([]float32{1, 2}, 2)})
		if got := floats(t, out); !reflect.DeepEqual(got, []float32{2, 3}) {
			t.Fatalf("call after OOM = %v", got)
		}
	}
}

func TestOOMMessages(t *testing.T) {
	oom := []string{
		"[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)",
		"CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 23.69 GiB total capacity; 1.03 GiB already allocated)",
		"The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript (most recent call last):\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB",
		"CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
		"std::bad_alloc",
	}
	for _, m := range oom {
		if !isOOMMessage(m) {
			t.Errorf("not recognised as OOM: %q", m)
		}
		if err := newError("call", "", "f", statusError, m); !errors.Is(err, engine.ErrOutOfMemory) {
			t.Errorf("newError(%q) does not unwrap to ErrOutOfMemory", m)
		}
	}
	for _, m := range []string{"mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)", "index 5 is out of bounds", ""} {
		if isOOMMessage(m) {
			t.Errorf("recognised as OOM: %q", m)
		}
	}
	if err := newError("call", "", "f", statusOOM, "anything"); !errors.Is(err, engine.ErrOutOfMemory) {
		t.Error("status OOM does not unwrap to ErrOutOfMemory")
	}
}

// Many goroutines calling one module at once get the outputs serial calls
// give.
func TestConcurrentCallsMatchSerial(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	const n = 64
	inputs := make([]*tensor.Tensor, n)
	serial := make([][]float32, n)
	for i := range inputs {
		inputs[i] = tensor.FromFloat32(seq(8, float32(i), 0.125), 2, 4)
		out := call(t, m, "forward", map[string]any{"x": inputs[i], "scale": float64(i)})
		serial[i] = floats(t, out.(map[string]any)["y"])
	}
	inGoroutines(t, 16, func(g int) error {
		for k := 0; k < n; k++ {
			i := (k + g*7) % n
			out, err := m.Call(context.Background(), "forward", map[string]any{"x": inputs[i], "scale": float64(i)}, engine.CallOptions{})
			if err != nil {
				return err
			}
			got, _ := out.(map[string]any)["y"].(*tensor.Tensor).Float32s()
			if !reflect.DeepEqual(got, serial[i]) {
				return fmt.Errorf("goroutine %d input %d: %v, serial %v", g, i, got, serial[i])
			}
		}
		return nil
	})
}

// Close waits for calls in flight; calls racing with Close either finish or
// report ErrClosed.
func TestCloseRacesCalls(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	x := tensor.FromFloat32(seq(8, 0, 1), 2, 4)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				_, err := m.Call(context.Background(), "forward", map[string]any{"x": x}, engine.CallOptions{})
				if err != nil && !errors.Is(err, engine.ErrClosed) {
					t.Errorf("call: %v", err)
					return
				}
			}
		}()
	}
	m.Close()
	wg.Wait()
}

// A call waiting for a slot honours its context.
func TestCallWaitsForSlot(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	e := m.eng
	// Take every slot.
	for i := 0; i < cap(e.sem); i++ {
		e.sem <- struct{}{}
	}
	// The context is live when the call starts and expires while it waits.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := m.Call(ctx, "forward", map[string]any{"x": tensor.FromFloat32(seq(8, 0, 1), 2, 4)}, engine.CallOptions{})
	for i := 0; i < cap(e.sem); i++ {
		<-e.sem
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want context.DeadlineExceeded", err)
	}
	// The slots are free again.
	call(t, m, "forward", map[string]any{"x": tensor.FromFloat32(seq(8, 0, 1), 2, 4)})
}
