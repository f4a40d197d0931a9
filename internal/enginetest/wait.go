package enginetest

import (
	"runtime"
	"testing"
	"time"
)

// Patience bounds every wait of WaitFor and Receive: long enough that only
// a hang reaches it, however loaded the machine (race detector, two shared
// cores), short enough to fail well before go test's own timeout.
const Patience = 2 * time.Minute

// WaitFor returns once cond holds, polling it; it fails the test when cond
// still does not hold after Patience (a hang). Use it for a state another
// goroutine or process reaches, instead of sleeping for a guessed time:
// how long the wait takes is never asserted.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Await(cond) {
		t.Fatalf("still waiting for %s after %v", what, Patience)
	}
}

// Await polls cond until it holds and returns true, or returns false once
// Patience has passed: WaitFor for a test that says more when it fails.
func Await(cond func() bool) bool {
	deadline := time.Now().Add(Patience)
	for pause := 100 * time.Microsecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// Receive returns the next value of ch, failing the test when none comes
// within Patience (a hang) or ch is closed.
func Receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(Patience)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("still waiting for %s after %v", what, Patience)
	}
	panic("unreachable")
}

// Allocated returns the bytes fn allocates (runtime.MemStats.TotalAlloc,
// after a collection): what decoding or refusing a hostile input costs.
// Allocations of other goroutines meanwhile count too, so a test that
// bounds it runs alone (not in parallel).
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
