//go:build cgo

package torch

import (
	goruntime "runtime"
	"sync"
	"time"
)

// A cgo call is not a scheduling point. A goroutine that calls libtorch back
// to back for over 10 ms (a batch loop, a stream producing chunks) leaves its
// P's scheduling tick unchanged, so the Go runtime's sysmon thread takes the
// goroutine for one that hogs its P: from then on it retakes the P during
// every call, wakes another thread to take the P over, and polls every
// 20 µs instead of backing off. Those wake-ups and timer interrupts land on
// the core libtorch computes on. Yielding once every yieldEvery is a
// scheduling point and stops all of it for the price of one Gosched
// (docs/benchmarks-engine.md has the figures).

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
	goruntime.Gosched()
	// The goroutine may run on another P now, whose tick the reschedule
	// just advanced: restart that P's clock.
	c = yieldClocks.Get().(*yieldClock)
	c.last = sinceEpoch()
	yieldClocks.Put(c)
}
