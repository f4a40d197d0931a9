//go:build cgo

package torch

import (
	"runtime"
	"sync"
	"time"
	_ "unsafe" // for go:linkname
)

// A cgo call is not a scheduling point. A goroutine that calls libtorch back
// to back for over 10 ms (a batch loop, a stream producing chunks) leaves its
// P's scheduling tick unchanged, so the Go runtime's sysmon thread takes the
// goroutine for one that hogs its P: from then on it retakes the P during
// every call, wakes another thread to take the P over, and polls every
// 20 µs instead of backing off. Those wake-ups and timer interrupts land on
// the core libtorch computes on. Yielding once every yieldEvery is a
// scheduling point and stops all of it (docs/benchmarks/engine.md has the
// figures).
//
// The yield is the runtime's goyield, not runtime.Gosched. Gosched puts the
// goroutine on the global run queue and wakes an idle P's thread to look for
// work; that thread often takes the goroutine, which then computes on another
// OS thread, often on the other core with cold caches, and the wake-up and
// the woken thread's spinning cost tens of µs each time. goyield puts the
// goroutine on its own P's run queue and wakes no one, so it goes on on the
// same thread (after any goroutines already waiting there, as after any
// yield). The runtime keeps goyield's signature stable for linkname users
// (go.dev/issue/67401).

// yieldEvery is how long the goroutines on one P may call libtorch without
// yielding. It must stay well under the runtime's 10 ms forced-preemption
// period (forcePreemptNS in runtime/proc.go). Benchmarks set it to 0 to
// measure calls without yields.
var yieldEvery = 4 * time.Millisecond

// yieldClock is when the goroutines on one P last yielded.
type yieldClock struct{ last time.Duration }

// epoch makes sinceEpoch a monotonic clock.
var epoch = time.Now()

func sinceEpoch() time.Duration { return time.Since(epoch) }

// yieldClocks holds about one clock per P: a sync.Pool hands a P's cached
// object back to the goroutine running on that P, and the runtime keeps its
// scheduling tick per P.
var yieldClocks = sync.Pool{New: func() any { return &yieldClock{last: sinceEpoch()} }}

// yieldIfDue yields once when this P has not yielded for yieldEvery. Call
// runs it after each libtorch call.
func yieldIfDue() {
	if yieldEvery <= 0 {
		return
	}
	c := yieldClocks.Get().(*yieldClock)
	due := sinceEpoch()-c.last >= yieldEvery
	yieldClocks.Put(c)
	if !due {
		return
	}
	goyield()
	// The goroutine may run on another P now (stolen from the run queue),
	// whose tick the reschedule just advanced: restart that P's clock.
	c = yieldClocks.Get().(*yieldClock)
	c.last = sinceEpoch()
	yieldClocks.Put(c)
}

// goyield is runtime.goyield: like runtime.Gosched, but the goroutine goes
// on the current P's run queue and no other thread is woken.
//
//go:linkname goyield runtime.goyield
func goyield()

// keepThread says whether libtorch calls hold the calling goroutine on its
// OS thread (runtime.LockOSThread) while they run, so that the goroutine
// goes on, after the call, on the thread that made it. Without it, a
// goroutine whose P was taken during a call (by the garbage collector's
// stop-the-world phases, or by sysmon when no P is idle) waits on the global
// run queue and goes on on whichever thread takes it: back-to-back calls
// then spread over several OS threads, each with its own malloc arena and
// libtorch thread-local state, and run slower than the same calls from one
// thread (docs/benchmarks/engine.md, "Calls that hop threads"). Locked, the
// thread waits for a P and keeps the goroutine. Benchmarks set it to false
// to measure calls without it.
var keepThread = true

// onThread runs call (a libtorch call) with the goroutine held on its OS
// thread when keepThread is set. The lock nests inside a caller's own
// runtime.LockOSThread.
func onThread[T any](call func() T) T {
	if !keepThread {
		return call()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return call()
}
