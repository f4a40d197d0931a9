package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// laneForward is a forward over int items (output 10*i+1) that records each
// call's Call, checks that calls of one lane never overlap, and counts how
// many calls ran at once at most.
type laneForward struct {
	mu      sync.Mutex
	calls   []Call
	busy    map[int]bool
	active  atomic.Int32
	most    atomic.Int32
	overlap bool // two calls of one lane at once
	fail    func(batch []int, c Call) error
	sleep   time.Duration // each call's length (0: 2 ms)
}

func (f *laneForward) forward(ctx context.Context, batch []int) ([]int, error) {
	c, _ := CallFrom(ctx)
	f.mu.Lock()
	if f.busy == nil {
		f.busy = map[int]bool{}
	}
	if f.busy[c.Lane] {
		f.overlap = true
	}
	f.busy[c.Lane] = true
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	n := f.active.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	// The tests run in synctest bubbles: the sleep ends only once every
	// other goroutine is blocked, so every lane that has a batch to run
	// is in a call by then.
	d := f.sleep
	if d == 0 {
		d = 2 * time.Millisecond
	}
	time.Sleep(d)
	f.active.Add(-1)
	f.mu.Lock()
	f.busy[c.Lane] = false
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(batch, c); err != nil {
			return nil, err
		}
	}
	out := make([]int, len(batch))
	for i, v := range batch {
		out[i] = 10*v + 1
	}
	return out, nil
}

// batches is the set of (offset, items, size) of the calls, sorted.
func (f *laneForward) batches() []string {
	var s []string
	for _, c := range f.calls {
		s = append(s, fmt.Sprintf("%d+%d/%d", c.Offset, c.Items, c.Size))
	}
	slices.Sort(s)
	return s
}

// TestLanesRunTheSameBatchesAtOnce: with three lanes, 61 items in batches
// of 8 padded to {4, 8} run as the very batches one lane makes, with the
// same outputs, but up to three calls at once, each lane's calls one after
// another.
func TestLanesRunTheSameBatchesAtOnce(t *testing.T) {
	synctest.Test(t, testLanesRunTheSameBatchesAtOnce)
}

func testLanesRunTheSameBatchesAtOnce(t *testing.T) {
	items := ints(61)
	var one, three laneForward
	want, err := Run(context.Background(), items, one.forward, WithMaxBatchSize(8), WithPadSizes(4, 8))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), items, three.forward, WithMaxBatchSize(8), WithPadSizes(4, 8), WithLanes(3))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs with three lanes differ from one lane's:\n%v\n%v", got, want)
	}
	if !slices.Equal(three.batches(), one.batches()) {
		t.Errorf("batches with three lanes %v; one lane made %v", three.batches(), one.batches())
	}
	if m := three.most.Load(); m != 3 {
		t.Errorf("at most %d call(s) at once with three lanes, want 3", m)
	}
	if one.most.Load() != 1 {
		t.Errorf("one lane made %d calls at once", one.most.Load())
	}
	if three.overlap {
		t.Error("two calls of one lane overlapped")
	}
	lanes := map[int]bool{}
	for _, c := range three.calls {
		lanes[c.Lane] = true
	}
	if len(lanes) != 3 {
		t.Errorf("calls came from lanes %v; want 0, 1 and 2", lanes)
	}
	// Fewer batches than lanes: one lane per batch.
	var few laneForward
	if _, err := Run(context.Background(), ints(9), few.forward, WithMaxBatchSize(8), WithLanes(4)); err != nil || len(few.calls) != 2 {
		t.Errorf("9 items, 4 lanes: %d calls, %v", len(few.calls), err)
	}
}

// TestLanesStopOnAFailure: a forward failure in one lane is the run's
// error (not the cancellation it causes in the others), no outputs come
// back, and the other lanes stop early.
func TestLanesStopOnAFailure(t *testing.T) { synctest.Test(t, testLanesStopOnAFailure) }

func testLanesStopOnAFailure(t *testing.T) {
	boom := errors.New("boom")
	f := laneForward{fail: func(batch []int, c Call) error {
		if c.Offset == 512 {
			return boom
		}
		return nil
	}}
	out, err := Run(context.Background(), ints(1024), f.forward, WithMaxBatchSize(8), WithLanes(2))
	if !errors.Is(err, boom) || errors.Is(err, context.Canceled) || out != nil {
		t.Fatalf("Run = %d outputs, %v; want nil and boom", len(out), err)
	}
	if len(f.calls) > 70 {
		t.Errorf("%d calls of 128: the first lane did not stop after the second failed", len(f.calls))
	}
}

// TestLanesItemErrorsAndStats: per-item errors from every lane come back
// together in item order, with the other items' outputs, and the stats
// hook sees the sums over the lanes, one call at a time.
func TestLanesItemErrorsAndStats(t *testing.T) { synctest.Test(t, testLanesItemErrorsAndStats) }

func testLanesItemErrorsAndStats(t *testing.T) {
	bad := map[int]bool{3: true, 40: true, 77: true}
	f := laneForward{fail: func(batch []int, c Call) error {
		for _, v := range batch {
			if bad[v] {
				return fmt.Errorf("item %d is bad", v)
			}
		}
		return nil
	}}
	var mu sync.Mutex
	var last Stats
	inHook := atomic.Int32{}
	hook := func(s Stats) {
		if inHook.Add(1) > 1 {
			t.Error("stats hook called from two lanes at once")
		}
		mu.Lock()
		last = s
		mu.Unlock()
		inHook.Add(-1)
	}
	out, err := Run(context.Background(), ints(80), f.forward, WithMaxBatchSize(8), WithPerItemErrors(), WithLanes(3), WithStats(hook))
	var ie ItemErrors
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v; want ItemErrors", err)
	}
	var idx []int
	for _, e := range ie {
		idx = append(idx, e.Index)
	}
	if !slices.Equal(idx, []int{3, 40, 77}) {
		t.Errorf("item errors at %v; want [3 40 77]", idx)
	}
	for i, v := range out {
		if !bad[i] && v != 10*i+1 {
			t.Fatalf("output %d = %d", i, v)
		}
	}
	if last.Items != 80 || last.Done != 77 || last.Failed != 3 {
		t.Errorf("last stats %+v; want 80 items, 77 done, 3 failed", last)
	}
}

// TestLanesOutOfMemoryHalvesPerLane: a lane's out-of-memory failure halves
// only that lane's batch.
func TestLanesOutOfMemoryHalvesPerLane(t *testing.T) {
	synctest.Test(t, testLanesOutOfMemoryHalvesPerLane)
}

func testLanesOutOfMemoryHalvesPerLane(t *testing.T) {
	f := laneForward{fail: func(batch []int, c Call) error {
		if c.Offset == 32 && c.Items == 8 {
			return engine.ErrOutOfMemory
		}
		return nil
	}}
	out, err := Run(context.Background(), ints(64), f.forward, WithMaxBatchSize(8), WithLanes(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != 10*i+1 {
			t.Fatalf("output %d = %d", i, v)
		}
	}
	if b := f.batches(); !slices.Contains(b, "32+4/4") || !slices.Contains(b, "36+4/4") {
		t.Errorf("batches %v; want [32, 40) retried as two halves", b)
	}
}

// TestLanesStatsCountEveryItemFromTheStart: the stats hook sees the whole
// run's item count from the first call on, however early a lane reports.
func TestLanesStatsCountEveryItemFromTheStart(t *testing.T) {
	for range 20 {
		var bad atomic.Int32
		hook := func(s Stats) {
			if s.Items != 256 {
				bad.Store(int32(s.Items))
			}
		}
		forward := func(ctx context.Context, b []int) ([]int, error) { return b, nil }
		if _, err := Run(context.Background(), ints(256), forward, WithMaxBatchSize(8), WithLanes(16), WithStats(hook)); err != nil {
			t.Fatal(err)
		}
		if n := bad.Load(); n != 0 {
			t.Fatalf("a stats report counted %d items of 256", n)
		}
	}
}
