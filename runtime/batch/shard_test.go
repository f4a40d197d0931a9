package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// memWorld exchanges the shares of size ranks that live in one process, as
// a process group would (package runtime/dist has the real one and its own
// tests); it lets these tests run several ranks' Run side by side.
type memWorld struct {
	size      int
	everyRank bool
	mu        sync.Mutex
	cond      *sync.Cond
	shares    [][]byte
	arrived   int
}

func newMemWorld(size int, everyRank bool) *memWorld {
	w := &memWorld{size: size, everyRank: everyRank, shares: make([][]byte, size)}
	w.cond = sync.NewCond(&w.mu)
	return w
}

type memSharder struct {
	w    *memWorld
	rank int
	span func(n, unit int) (int, int)
}

func (s memSharder) Span(n, unit int) (int, int) {
	if s.span != nil {
		return s.span(n, unit)
	}
	return n * s.rank / s.w.size, n * (s.rank + 1) / s.w.size // not aligned to unit
}

func (s memSharder) Exchange(ctx context.Context, share []byte) ([][]byte, error) {
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shares[s.rank] = slices.Clone(share)
	w.arrived++
	w.cond.Broadcast()
	for w.arrived < w.size {
		w.cond.Wait()
	}
	if s.rank != 0 && !w.everyRank {
		return nil, nil
	}
	return slices.Clone(w.shares), nil
}

type rankResult struct {
	out []int
	err error
	rec *recorder
}

// runRanks runs Run on every rank of a fresh world with the same items.
func runRanks(size int, everyRank bool, items []int, fail func(rank int) func([]int, Call) error, opts ...Option) []rankResult {
	w := newMemWorld(size, everyRank)
	res := make([]rankResult, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &recorder{}
			if fail != nil {
				rec.fail = fail(r)
			}
			o := append(slices.Clone(opts), WithSharding(memSharder{w: w, rank: r}))
			out, err := Run(context.Background(), items, rec.forward, o...)
			res[r] = rankResult{out, err, rec}
		}()
	}
	wg.Wait()
	return res
}

func TestShardedRunGathersInOrder(t *testing.T) {
	items := ints(37)
	for _, everyRank := range []bool{false, true} {
		res := runRanks(3, everyRank, items, nil, WithMaxBatchSize(4), WithPadSizes(2, 4))
		for r, x := range res {
			if x.err != nil {
				t.Fatalf("rank %d: %v", r, x.err)
			}
			if r != 0 && !everyRank {
				if x.out != nil {
					t.Errorf("rank %d received %v", r, x.out)
				}
			} else if !slices.Equal(x.out, wantOutputs(items)) {
				t.Errorf("rank %d (every rank %v): outputs %v", r, everyRank, x.out)
			}
			// Each rank ran its own share only, in batches of at most 4,
			// padded, with offsets into the whole run.
			lo, hi := 37*r/3, 37*(r+1)/3
			for _, c := range x.rec.infos {
				if c.Offset < lo || c.Offset+c.Items > hi || c.Items > 4 || (c.Size != 2 && c.Size != 4) {
					t.Errorf("rank %d [%d, %d): call %+v", r, lo, hi, c)
				}
			}
		}
	}
}

func TestShardedRunReportsAFailedRank(t *testing.T) {
	items := ints(20)
	res := runRanks(4, false, items, func(rank int) func([]int, Call) error {
		if rank != 2 {
			return nil
		}
		return func([]int, Call) error { return errBadItem }
	}, WithMaxBatchSize(4))
	if !errors.Is(res[2].err, errBadItem) {
		t.Errorf("failing rank: %v", res[2].err)
	}
	if res[0].err == nil || !strings.Contains(res[0].err.Error(), "rank 2 (items [10, 15) of 20)") ||
		!strings.Contains(res[0].err.Error(), errBadItem.Error()) || res[0].out != nil {
		t.Errorf("rank 0: %v, %v", res[0].out, res[0].err)
	}
	for _, r := range []int{1, 3} {
		if res[r].err != nil || res[r].out != nil {
			t.Errorf("rank %d: %v, %v", r, res[r].out, res[r].err)
		}
	}
}

func TestShardedRunMergesItemErrors(t *testing.T) {
	items := ints(12)
	bad := map[int]bool{1: true, 9: true}
	res := runRanks(2, false, items, func(int) func([]int, Call) error {
		return func(b []int, _ Call) error {
			for _, x := range b {
				if bad[x] {
					return fmt.Errorf("item %d: %w", x, errBadItem)
				}
			}
			return nil
		}
	}, WithMaxBatchSize(4), WithPerItemErrors())
	var ie ItemErrors
	if !errors.As(res[0].err, &ie) || !slices.Equal(ie.Indexes(), []int{1, 9}) {
		t.Fatalf("rank 0: %v", res[0].err)
	}
	if !errors.Is(ie[0].Err, errBadItem) || !strings.Contains(ie[1].Err.Error(), "rank 1: item 9") {
		t.Errorf("item errors: %v", ie)
	}
	want := wantOutputs(items)
	want[1], want[9] = 0, 0
	if !slices.Equal(res[0].out, want) {
		t.Errorf("outputs %v, want %v", res[0].out, want)
	}
	if !errors.As(res[1].err, &ie) || !slices.Equal(ie.Indexes(), []int{9}) || res[1].out != nil {
		t.Errorf("rank 1: %v %v", res[1].out, res[1].err)
	}
}

func TestShardedRunRejectsBadSpans(t *testing.T) {
	items := ints(8)
	w := newMemWorld(1, false)
	_, err := Run(context.Background(), items, (&recorder{}).forward,
		WithSharding(memSharder{w: w, span: func(n, _ int) (int, int) { return 2, n + 1 }}))
	if err == nil || !strings.Contains(err.Error(), "sharder gave items [2, 9) of 8") {
		t.Errorf("bad span: %v", err)
	}
	// Ranks that disagree on the items: their shares do not tile.
	w = newMemWorld(2, false)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = Run(context.Background(), ints(8+4*r), (&recorder{}).forward, WithSharding(memSharder{w: w, rank: r}))
		}()
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "every rank must run the same items") {
		t.Errorf("mismatched items: %v", errs[0])
	}
}
