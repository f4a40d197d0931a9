package serve

import (
	"runtime"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// Callers run every call, never more goroutines than their max while the
// calls' concurrency stays within it, never wait when all are busy, and
// return when the server closes.
func TestCallers(t *testing.T) {
	before := runtime.NumGoroutine()
	stop := make(chan struct{})
	c := newCallers(2, stop)

	// One call after another: at most two callers ever start.
	for i := range 200 {
		done := make(chan int, 1)
		c.run(func() { done <- i })
		if got := <-done; got != i {
			t.Fatalf("call %d ran as %d", i, got)
		}
	}
	if n := c.started.Load(); n < 1 || n > 2 {
		t.Fatalf("%d callers started for calls one at a time, want 1 or 2", n)
	}

	// Three calls at once with two callers: the third runs at once all the
	// same, on a goroutine of its own.
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(3)
	var finished sync.WaitGroup
	finished.Add(3)
	for range 3 {
		c.run(func() {
			running.Done()
			<-release
			finished.Done()
		})
	}
	running.Wait() // all three run together: none waited for another
	close(release)
	finished.Wait()
	if n := c.started.Load(); n > 2 {
		t.Fatalf("%d callers started, want at most 2", n)
	}

	close(stop)
	enginetest.WaitFor(t, "the callers to return after the stop", func() bool { return runtime.NumGoroutine() <= before })
}
