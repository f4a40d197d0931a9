//go:build cgo

package torch

import (
	"context"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// TorchScript's profiling executor optimizes a method after its first calls;
// with CPU fusion on, a libtorch built with LLVM (Debian's 2.6) compiles
// elementwise chains such as relu(matmul + b) with NNC, and that compile
// never returned here: the second call of this module hung (Debian's
// python3-torch 2.6 hangs on the same module). The engine turns CPU fusion
// off unless EnvCPUFusion asks for it.
func TestRepeatedCallsOfFusibleModuleFinish(t *testing.T) {
	c := newBenchCase("fusible-4x32", 4, 32, 32)
	path := buildModule(t, ModuleSource{Source: c.source, Parameters: c.params})
	// Closed only when the calls finish: Close waits for a running call.
	m, err := Default().load(path, engine.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 20; i++ {
			if _, err := m.Call(context.Background(), "forward", c.kwargs(), engine.CallOptions{}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("20 calls of a module with a fusible relu(matmul + b) did not finish in a minute (CPU fusion compiling?)")
	}
}
