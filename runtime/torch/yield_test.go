//go:build cgo

package torch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// voluntarySwitches sums the voluntary context switches of this process's
// threads: each is a thread going to sleep (sysmon's polls, woken Ms parking
// again), unlike involuntary ones, which other load on the machine causes.
func voluntarySwitches(t testing.TB) int64 {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		t.Skipf("no /proc/self/task: %v", err)
	}
	var n int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}

// switchesPerCall makes back-to-back calls for d and returns the voluntary
// context switches per call.
func switchesPerCall(t *testing.T, m *Module, kw map[string]any, d time.Duration) (float64, int) {
	t.Helper()
	before := voluntarySwitches(t)
	calls := 0
	for deadline := time.Now().Add(d); time.Now().Before(deadline); calls++ {
		if _, err := m.Call(context.Background(), "forward", kw, engine.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return float64(voluntarySwitches(t)-before) / float64(calls), calls
}

// Back-to-back calls must not make the Go runtime treat the caller as a
// goroutine hogging its P (see yield.go). Without the periodic yield this
// machine measures about 0.2 voluntary context switches per call of the
// small module (sysmon polling every 20 µs and waking threads to retake the
// P), with it about 0.015.
func TestBackToBackCallsKeepSchedulerQuiet(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's own threads wake up; make test runs this test without -race")
	}
	if testing.Short() {
		t.Skip("runs calls for a second")
	}
	c := benchCases()[1]
	m, _ := c.load(t)
	kw := c.kwargs()
	switchesPerCall(t, m, kw, 50*time.Millisecond) // warm up

	saved := yieldEvery
	yieldEvery = 0
	off, offCalls := switchesPerCall(t, m, kw, 400*time.Millisecond)
	yieldEvery = saved
	on, onCalls := switchesPerCall(t, m, kw, 400*time.Millisecond)
	t.Logf("voluntary context switches per call: %.3f with yields (%d calls), %.3f without (%d calls)", on, onCalls, off, offCalls)
	if on > 0.1 {
		t.Errorf("back-to-back calls cause %.3f voluntary context switches per call, want under 0.1 (without yields: %.3f)", on, off)
	}
}

// A goroutine locked to its OS thread keeps getting correct results across
// many yields (goyield on a locked thread hands the P to another thread and
// back), and many goroutines calling at once all finish.
func TestYieldsWithLockedThreadAndManyCallers(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: outBufSource}, engine.LoadOptions{})
	saved := yieldEvery
	yieldEvery = 100 * time.Microsecond // many yields in a short test
	defer func() { yieldEvery = saved }()
	done := make(chan error, 5)
	for g := 0; g < 5; g++ {
		go func(g int) {
			if g == 0 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
				v := float32(g + 1)
				out, err := m.Call(context.Background(), "forward",
					map[string]any{"x": tensor.FromFloat32([]float32{v}, 1)}, engine.CallOptions{})
				if err != nil {
					done <- err
					return
				}
				if got, _ := out.(map[string]any)["double"].(*tensor.Tensor).Float32s(); got[0] != 2*v {
					done <- fmt.Errorf("goroutine %d: got %v, want %v", g, got, 2*v)
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 5; g++ {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("callers did not finish: yields stalled")
		}
	}
}
