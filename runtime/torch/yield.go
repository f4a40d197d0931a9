//go:build cgo

package torch

import (
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
