package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// withAutoLanes makes WithAutoLanes try up to n lanes, whatever GOMAXPROCS
// is, for the test.
func withAutoLanes(t *testing.T, n int) {
	saved := autoLanes
	autoLanes = func() int { return n }
	t.Cleanup(func() { autoLanes = saved })
}

// lanesSeen records Stats.Lanes of every stats report.
type lanesSeen struct {
	mu    sync.Mutex
	lanes []int
	last  Stats
}

func (l *lanesSeen) hook(s Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lanes) == 0 || l.lanes[len(l.lanes)-1] != s.Lanes {
		l.lanes = append(l.lanes, s.Lanes)
	}
	if s.Done < l.last.Done || s.Calls < l.last.Calls || s.Items != l.last.Items && l.last.Items != 0 {
		panic("stats went back or changed their item count")
	}
	l.last = s
}

// TestAutoLanesChooseByMeasuring: a forward whose calls overlap freely (each
// sleeps, so lanes run at once) ends on more lanes, doubling up to the
// limit; a forward whose calls cannot overlap (one lock around them all, as
// a model whose calls keep every core busy) is measured on two lanes and
// goes on with one. Both runs make the
// very batches and outputs of one lane. The runs are in synctest bubbles, so
// the times Run measures are the sleeps, not the machine's load.
func TestAutoLanesChooseByMeasuring(t *testing.T) {
	withAutoLanes(t, 4)
	synctest.Test(t, testAutoLanesChooseByMeasuring)
}

func testAutoLanesChooseByMeasuring(t *testing.T) {
	items := ints(2400*4 + 3)
	opts := []Option{WithMaxBatchSize(4), WithPadSizes(2, 4)}
	var one laneForward
	want, err := Run(context.Background(), items, one.forward, opts...)
	if err != nil {
		t.Fatal(err)
	}

	var free laneForward
	var seen lanesSeen
	got, err := Run(context.Background(), items, free.forward, append(opts, WithAutoLanes(), WithStats(seen.hook))...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || !slices.Equal(free.batches(), one.batches()) {
		t.Fatal("auto lanes changed the outputs or the batches")
	}
	if seen.last.Lanes != 4 || free.most.Load() != 4 {
		t.Errorf("overlapping calls: lanes over the run %v (last %d), at most %d calls at once; want to end on 4, and 4", seen.lanes, seen.last.Lanes, free.most.Load())
	}
	if seen.last.Done != len(items) || seen.last.Items != len(items) || seen.last.Batches != len(one.calls) {
		t.Errorf("last stats %+v; want all %d items in %d batches", seen.last, len(items), len(one.calls))
	}
	if free.overlap {
		t.Error("two calls of one lane overlapped")
	}

	// A channel, not a sync.Mutex: a goroutine waiting on a channel is
	// durably blocked, so the bubble's clock moves on.
	lock := make(chan struct{}, 1)
	var serial laneForward
	var seen2 lanesSeen
	locked := func(ctx context.Context, b []int) ([]int, error) {
		lock <- struct{}{}
		defer func() { <-lock }()
		return serial.forward(ctx, b)
	}
	got, err = Run(context.Background(), items, locked, append(opts, WithAutoLanes(), WithStats(seen2.hook))...)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("serialised forward: %v, outputs equal %v", err, slices.Equal(got, want))
	}
	if seen2.last.Lanes != 1 || !slices.Contains(seen2.lanes, 2) {
		t.Errorf("serialised calls: lanes over the run %v (last %d); want two-lane segments, then 1", seen2.lanes, seen2.last.Lanes)
	}
}

// TestAutoLanesShortRunsAndForcedLanes: a run too short to spare a probe
// uses one lane; WithLanes after WithAutoLanes forces its number; a
// persistent forward keeps the choice, so its next run starts with it.
func TestAutoLanesShortRunsAndForcedLanes(t *testing.T) {
	withAutoLanes(t, 2)
	synctest.Test(t, testAutoLanesShortRunsAndForcedLanes)
}

func testAutoLanesShortRunsAndForcedLanes(t *testing.T) {
	var short laneForward
	if _, err := Run(context.Background(), ints(111*8), short.forward, WithMaxBatchSize(8), WithAutoLanes()); err != nil || short.most.Load() != 1 {
		t.Errorf("111 batches: at most %d calls at once, %v; want 1", short.most.Load(), err)
	}
	var forced laneForward
	if _, err := Run(context.Background(), ints(400*8), forced.forward, WithMaxBatchSize(8), WithAutoLanes(), WithLanes(1)); err != nil || forced.most.Load() != 1 {
		t.Errorf("WithLanes(1): at most %d calls at once, %v; want 1", forced.most.Load(), err)
	}
	var warm, first, again laneForward
	var seen lanesSeen
	key := WithPersistentForward(t.Name())
	if _, err := Run(context.Background(), ints(400*8), warm.forward, WithMaxBatchSize(8), WithAutoLanes(), key); err != nil || warm.most.Load() != 1 {
		t.Fatalf("first run of the key (a warm-up): at most %d calls at once, %v; want 1", warm.most.Load(), err)
	}
	if _, err := Run(context.Background(), ints(400*8), first.forward, WithMaxBatchSize(8), WithAutoLanes(), key); err != nil || first.most.Load() != 2 {
		t.Fatalf("second run: at most %d calls at once, %v; want 2", first.most.Load(), err)
	}
	if _, err := Run(context.Background(), ints(20*8), again.forward, WithMaxBatchSize(8), WithAutoLanes(), key, WithStats(seen.hook)); err != nil || !slices.Equal(seen.lanes, []int{2}) {
		t.Errorf("a short run of the key: lanes %v, %v; want 2 from the first call", seen.lanes, err)
	}
}

// TestAutoLanesItemErrors: items that fail on their own, in the warm-up, in
// the probes and after them, come back with their own indexes, and every
// other item's output with them.
func TestAutoLanesItemErrors(t *testing.T) {
	withAutoLanes(t, 2)
	synctest.Test(t, testAutoLanesItemErrors)
}

func testAutoLanesItemErrors(t *testing.T) {
	bad := map[int]bool{3: true, 50: true, 130: true, 2000: true, 3199: true}
	f := laneForward{fail: func(batch []int, c Call) error {
		for _, v := range batch {
			if bad[v] {
				return errors.New("bad item")
			}
		}
		return nil
	}}
	out, err := Run(context.Background(), ints(3200), f.forward, WithMaxBatchSize(8), WithPerItemErrors(), WithAutoLanes())
	var ie ItemErrors
	if !errors.As(err, &ie) || !slices.Equal(ie.Indexes(), []int{3, 50, 130, 2000, 3199}) {
		t.Fatalf("Run error %v; want the five bad items", err)
	}
	for i, v := range out {
		if want := 10*i + 1; !bad[i] && v != want {
			t.Fatalf("item %d: %d, want %d", i, v, want)
		}
	}
}

// TestAutoLanesSettle: a persistent forward's runs add to one body of
// evidence; once each side has enough, later runs stop measuring and run
// on the lanes it chose from their first call.
func TestAutoLanesSettle(t *testing.T) {
	withAutoLanes(t, 2)
	synctest.Test(t, testAutoLanesSettle)
}

func testAutoLanesSettle(t *testing.T) {
	lock := make(chan struct{}, 1)
	var f laneForward
	serial := func(ctx context.Context, b []int) ([]int, error) {
		lock <- struct{}{}
		defer func() { <-lock }()
		return f.forward(ctx, b)
	}
	key := WithPersistentForward(t.Name())
	var measured []bool
	for run := range 6 {
		var seen lanesSeen
		if _, err := Run(context.Background(), ints(400*8), serial, WithMaxBatchSize(8), WithAutoLanes(), key, WithStats(seen.hook)); err != nil {
			t.Fatal(err)
		}
		if seen.last.Lanes != 1 {
			t.Fatalf("run %d ended on %d lanes; want 1", run, seen.last.Lanes)
		}
		measured = append(measured, slices.Contains(seen.lanes, 2))
	}
	// The first run warms up; the next ones measure until the evidence
	// suffices, then no run measures.
	settled := slices.Index(measured[1:], false) + 1
	if measured[0] || !measured[1] || settled == 0 || slices.Contains(measured[settled:], true) {
		t.Errorf("runs that measured: %v; want a warm-up, then some, then none", measured)
	}
}

// TestAutoLanesShortRunsSample: runs too short for segments of 20 ms are
// each one sample, run whole on the side with less evidence; the runs of a
// persistent forward settle on two lanes where calls overlap and on one
// where they cannot.
func TestAutoLanesShortRunsSample(t *testing.T) {
	withAutoLanes(t, 2)
	synctest.Test(t, testAutoLanesShortRunsSample)
}

func testAutoLanesShortRunsSample(t *testing.T) {
	lock := make(chan struct{}, 1)
	for _, tc := range []struct {
		name   string
		serial bool
		want   int
	}{{"overlapping", false, 2}, {"serial", true, 1}} {
		var f laneForward
		f.sleep = 100 * time.Microsecond
		forward := f.forward
		if tc.serial {
			forward = func(ctx context.Context, b []int) ([]int, error) {
				lock <- struct{}{}
				defer func() { <-lock }()
				return f.forward(ctx, b)
			}
		}
		key := WithPersistentForward(t.Name() + tc.name)
		var lanes [][]int
		for range 40 {
			var seen lanesSeen
			if _, err := Run(context.Background(), ints(120), forward, WithMaxBatchSize(1), WithAutoLanes(), key, WithStats(seen.hook)); err != nil {
				t.Fatal(err)
			}
			lanes = append(lanes, seen.lanes)
		}
		last := lanes[len(lanes)-1]
		if !slices.Equal(last, []int{tc.want}) || !slices.ContainsFunc(lanes, func(l []int) bool { return slices.Equal(l, []int{1, 2}) }) {
			t.Errorf("%s: lanes of the runs %v; want whole runs on two lanes among them, and to end on %d alone", tc.name, lanes, tc.want)
		}
	}
}
