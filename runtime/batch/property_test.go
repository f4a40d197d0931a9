package batch

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// randomCase draws a problem size, a max batch size and (half the time) a
// set of pad sizes whose largest is at least the max.
func randomCase(rng *rand.Rand) (n, maxSize int, pad []int) {
	n = rng.IntN(120)
	maxSize = 1 + rng.IntN(16)
	if rng.IntN(2) == 0 {
		// Valid pad sizes: strictly increasing, ending at the max.
		for s := 1; s < maxSize; s *= 2 {
			if rng.IntN(2) == 0 {
				pad = append(pad, s)
			}
		}
		pad = append(pad, maxSize)
	}
	return n, maxSize, pad
}

// spanChecker asserts the executor's central promise: every call is either
// one of the initial chunks or a half of a call that failed, each such slice
// is run at most once, and successful slices are disjoint and cover the
// items exactly once.
type spanChecker struct {
	t       *testing.T
	allowed map[span]bool
	covered []int
}

func newSpanChecker(t *testing.T, n, maxSize int) *spanChecker {
	c := &spanChecker{t: t, allowed: map[span]bool{}, covered: make([]int, n)}
	for lo := 0; lo < n; lo += maxSize {
		c.allowed[span{lo, min(lo+maxSize, n)}] = true
	}
	return c
}

func (c *spanChecker) call(s span, failed bool) {
	c.t.Helper()
	if !c.allowed[s] {
		c.t.Fatalf("forward called on %v, which is neither an initial chunk nor the half of a failed slice (or was already run)", s)
	}
	delete(c.allowed, s)
	if failed {
		if s.hi-s.lo > 1 {
			mid := s.lo + (s.hi-s.lo+1)/2
			c.allowed[span{s.lo, mid}] = true
			c.allowed[span{mid, s.hi}] = true
		}
		return
	}
	for i := s.lo; i < s.hi; i++ {
		c.covered[i]++
	}
}

func TestPropertyOOMRecovery(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n, maxSize, pad := randomCase(rng)
		limit := 1 + rng.IntN(maxSize+2) // the most items that fit in memory
		// Some items are "big": any batch of more than one holding one fails.
		big := map[int]bool{}
		for range rng.IntN(4) {
			if n > 0 {
				big[rng.IntN(n)] = true
			}
		}
		name := fmt.Sprintf("iter %d: n=%d max=%d pad=%v limit=%d big=%v", iter, n, maxSize, pad, limit, big)

		chk := newSpanChecker(t, n, maxSize)
		items := ints(n)
		cfg, err := NewConfig(WithMaxBatchSize(maxSize), WithPadSizes(pad...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// A single item fails only when even its padded batch exceeds the limit.
		wantFail := n > 0 && cfg.PaddedSize(1) > limit
		fwd := func(ctx context.Context, b []int) ([]int, error) {
			c, _ := CallFrom(ctx)
			s := span{c.Offset, c.Offset + c.Items}
			fail := len(b) > limit
			if c.Items > 1 {
				for _, x := range b {
					fail = fail || big[x]
				}
			}
			chk.call(s, fail)
			if c.Items > maxSize || len(b) != cfg.PaddedSize(c.Items) {
				t.Fatalf("%s: batch of %d items sent at %d", name, c.Items, len(b))
			}
			if fail {
				return nil, fmt.Errorf("alloc %d: %w", len(b), engine.ErrOutOfMemory)
			}
			out := make([]int, len(b))
			for i, x := range b {
				out[i] = 10*x + 1
			}
			return out, nil
		}
		got, err := Run(context.Background(), items, fwd, WithMaxBatchSize(maxSize), WithPadSizes(pad...))
		if wantFail {
			if !errors.Is(err, engine.ErrOutOfMemory) || got != nil {
				t.Fatalf("%s: got %v, %v; want an out-of-memory error", name, got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, wantOutputs(items)) {
			t.Fatalf("%s: outputs %v", name, got)
		}
		for i, k := range chk.covered {
			if k != 1 {
				t.Fatalf("%s: item %d was in %d successful batches", name, i, k)
			}
		}
	}
}

func TestPropertyPerItemErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	errBad := errors.New("bad item")
	for iter := range 2000 {
		n, maxSize, pad := randomCase(rng)
		bad := map[int]bool{}
		if n > 0 {
			for range rng.IntN(5) {
				bad[rng.IntN(n)] = true
			}
		}
		name := fmt.Sprintf("iter %d: n=%d max=%d pad=%v bad=%v", iter, n, maxSize, pad, bad)
		chk := newSpanChecker(t, n, maxSize)
		calls := 0
		fwd := func(ctx context.Context, b []int) ([]int, error) {
			c, _ := CallFrom(ctx)
			calls++
			fail := false
			for _, x := range b {
				fail = fail || bad[x]
			}
			chk.call(span{c.Offset, c.Offset + c.Items}, fail)
			if fail {
				return nil, errBad
			}
			out := make([]int, len(b))
			for i, x := range b {
				out[i] = 10*x + 1
			}
			return out, nil
		}
		items := ints(n)
		got, err := Run(context.Background(), items, fwd, WithMaxBatchSize(maxSize), WithPadSizes(pad...), WithPerItemErrors())
		want := wantOutputs(items)
		var wantIdx []int
		for i := range items {
			if bad[i] {
				want[i] = 0
				wantIdx = append(wantIdx, i)
			}
		}
		if len(wantIdx) == 0 {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		} else {
			var ie ItemErrors
			if !errors.As(err, &ie) || !slices.Equal(ie.Indexes(), wantIdx) || !errors.Is(err, errBad) {
				t.Fatalf("%s: err = %v, want ItemErrors at %v", name, err, wantIdx)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: outputs %v, want %v", name, got, want)
		}
		for i, k := range chk.covered {
			want := 1
			if bad[i] {
				want = 0
			}
			if k != want {
				t.Fatalf("%s: item %d was in %d successful batches, want %d", name, i, k, want)
			}
		}
		// Documented cost bound: the initial chunks plus at most
		// 2·ceil(log2(max)) calls per failing item.
		chunks := (n + maxSize - 1) / maxSize
		depth := bits.Len(uint(maxSize - 1))
		if bound := chunks + 2*depth*len(wantIdx); calls > bound {
			t.Fatalf("%s: %d calls, documented bound %d", name, calls, bound)
		}
	}
}
