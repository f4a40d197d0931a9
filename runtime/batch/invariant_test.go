package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// With WithInvariant every forward call has the max batch size, whatever
// the pad sizes, the number of items and where the last batch is cut; the
// padding repeats the final real item and its outputs are dropped.
func TestInvariantPadsEveryCallToTheMax(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		max  int
	}{
		{[]Option{WithPadSizes(1, 2, 4, 8)}, 8},
		{[]Option{WithMaxBatchSize(5)}, 5},
		{nil, DefaultMaxBatchSize},
		{[]Option{WithMaxBatchSize(16), WithBatchRange(1, 6)}, 6},
	} {
		for _, n := range []int{1, 3, 8, 11, 17} {
			t.Run(fmt.Sprintf("max%d/items%d", tc.max, n), func(t *testing.T) {
				r := &recorder{}
				var st Stats
				opts := append(slices.Clone(tc.opts), WithInvariant(), WithStats(func(s Stats) { st = s }))
				got, err := Run(context.Background(), ints(n), r.forward, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, wantOutputs(ints(n))) {
					t.Errorf("outputs %v", got)
				}
				calls := (n + tc.max - 1) / tc.max
				if len(r.seen) != calls {
					t.Fatalf("%d calls %v, want %d", len(r.seen), r.calls, calls)
				}
				for k, b := range r.seen {
					if len(b) != tc.max {
						t.Errorf("call %d sent %d items, want %d (calls %v)", k, len(b), tc.max, r.calls)
					}
					last := min((k+1)*tc.max, n) - 1
					for _, x := range b[min(tc.max, n-k*tc.max):] {
						if x != last {
							t.Errorf("call %d: padding %v, want copies of item %d", k, b, last)
						}
					}
				}
				if st.Padded != calls*tc.max-n {
					t.Errorf("stats %+v, want %d padding items", st, calls*tc.max-n)
				}
			})
		}
	}
}

// Halving cannot help when every call has one size: an out-of-memory error
// is returned as is after one call; per-item errors still bisect, every
// half padded to the full size.
func TestInvariantOutOfMemoryAndPerItemErrors(t *testing.T) {
	r := &recorder{fail: func([]int, Call) error { return oom }}
	var st Stats
	got, err := Run(context.Background(), ints(6), r.forward, WithMaxBatchSize(8), WithInvariant(), WithStats(func(s Stats) { st = s }))
	if err != oom || got != nil {
		t.Fatalf("outputs %v, err %v; want the forward's error value itself", got, err)
	}
	if st.Calls != 1 || st.Retries != 0 || !slices.Equal(r.calls, []string{"[0,6)+2"}) {
		t.Errorf("calls %v, stats %+v; want one call", r.calls, st)
	}

	r = &recorder{fail: func(b []int, c Call) error {
		if slices.Contains(b, 2) {
			return fmt.Errorf("item 2: %w", errBadItem)
		}
		return nil
	}}
	got, err = Run(context.Background(), ints(4), r.forward, WithPadSizes(1, 2, 4), WithInvariant(), WithPerItemErrors())
	var ie ItemErrors
	if !errors.As(err, &ie) || !slices.Equal(ie.Indexes(), []int{2}) {
		t.Fatalf("err = %v, want item 2 alone to fail", err)
	}
	want := wantOutputs(ints(4))
	want[2] = 0
	if !slices.Equal(got, want) {
		t.Errorf("outputs %v, want %v", got, want)
	}
	for k, b := range r.seen {
		if len(b) != 4 {
			t.Errorf("call %s sent %d items, want 4", r.calls[k], len(b))
		}
	}
	if !slices.Equal(r.calls, []string{"[0,4)", "[0,2)+2", "[2,4)+2", "[2,3)+3", "[3,4)+3"}) {
		t.Errorf("calls %v", r.calls)
	}
}

// A task's batching block asks for invariance with invariant: true.
func TestInvariantFromTheTask(t *testing.T) {
	task := &spec.InferenceTaskProfile{
		TaskID:   "embed",
		Inputs:   []spec.InferenceFieldSpec{{FieldID: "x", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, Required: true}},
		Batching: &spec.BatchingSpec{MaxBatchSize: 8, PadToBatchSizes: []int{1, 2, 4, 8}},
	}
	for _, on := range []bool{false, true} {
		task.Batching.Invariant = on
		opts, err := TaskOptions(task)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewConfig(opts...)
		if err != nil || c.Invariant != on || c.PaddedSize(3) != map[bool]int{false: 4, true: 8}[on] {
			t.Errorf("invariant: %v: config %+v, %v", on, c, err)
		}
	}
}

func TestWarmupSizes(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want []int
	}{
		{[]Option{WithPadSizes(1, 2, 4, 8)}, []int{1, 2, 4, 8}},
		{[]Option{WithPadSizes(1, 8, 64)}, []int{1, 8, 64}},
		{[]Option{WithPadSizes(1, 2, 4, 8), WithInvariant()}, []int{8}},
		{[]Option{WithMaxBatchSize(16)}, []int{1, 2, 4, 8, 16}},
		{[]Option{WithMaxBatchSize(12)}, []int{1, 2, 4, 8, 12}},
		{[]Option{WithMaxBatchSize(1)}, []int{1}},
		{[]Option{WithMaxBatchSize(12), WithInvariant()}, []int{12}},
		{[]Option{WithPadSizes(1, 2, 4, 8), WithBatchRange(2, 6)}, []int{2, 4, 6}},
		{[]Option{WithMaxBatchSize(16), WithBatchRange(3, 0)}, []int{3, 4, 8, 16}},
	} {
		c, err := NewConfig(tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.WarmupSizes(); !slices.Equal(got, tc.want) {
			t.Errorf("config %+v: warm-up sizes %v, want %v", c, got, tc.want)
		}
	}
}

// With equivalent sizes, an invariant batch is padded only to the smallest
// of them that holds it (pad sizes narrow them; the max is always one),
// sizes measured for another max are ignored, and an out-of-memory batch
// is halved when its halves pad to a smaller size.
func TestInvariantEquivalentSizes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []Option
		padded []int // PaddedSize(1), PaddedSize(2), ...
		warmup []int
	}{
		{"all but one", []Option{WithMaxBatchSize(8), WithEquivalentSizes(8, 2, 3, 4, 5, 6, 7, 8)}, []int{2, 2, 3, 4, 5, 6, 7, 8}, []int{2, 3, 4, 5, 6, 7, 8}},
		{"gaps, any order, out of range", []Option{WithMaxBatchSize(8), WithEquivalentSizes(8, 8, 4, 0, 12)}, []int{4, 4, 4, 4, 8, 8, 8, 8}, []int{4, 8}},
		{"pad sizes narrow them", []Option{WithPadSizes(1, 2, 4, 8), WithEquivalentSizes(8, 3, 4, 5, 6, 7, 8)}, []int{4, 4, 4, 4, 8, 8, 8, 8}, []int{4, 8}},
		{"measured for another max", []Option{WithEquivalentSizes(16, 1, 2, 3), WithMaxBatchSize(8)}, []int{8, 8, 8, 8, 8, 8, 8, 8}, []int{8}},
		{"the min", []Option{WithMaxBatchSize(8), WithEquivalentSizes(8, 1, 2, 3, 8), WithBatchRange(3, 0)}, []int{3, 3, 3, 8, 8, 8, 8, 8}, []int{3, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := NewConfig(append(slices.Clone(tc.opts), WithInvariant())...)
			if err != nil {
				t.Fatal(err)
			}
			var padded []int
			for n := 1; n <= cfg.MaxBatchSize; n++ {
				padded = append(padded, cfg.PaddedSize(n))
			}
			if !slices.Equal(padded, tc.padded) || !slices.Equal(cfg.WarmupSizes(), tc.warmup) {
				t.Errorf("padded sizes %v, warm-up %v; want %v, %v", padded, cfg.WarmupSizes(), tc.padded, tc.warmup)
			}
			// Without WithInvariant the sizes change nothing.
			plain, err := NewConfig(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if plain.PaddedSize(1) != max(1, plain.MinBatchSize, firstOr(plain.PadSizes, 1)) {
				t.Errorf("without invariance a batch of 1 is sent at %d", plain.PaddedSize(1))
			}
		})
	}

	r := &recorder{fail: func(b []int, c Call) error {
		if c.Size > 4 {
			return oom
		}
		return nil
	}}
	got, err := Run(context.Background(), ints(6), r.forward, WithMaxBatchSize(8), WithInvariant(), WithEquivalentSizes(8, 4, 8))
	if err != nil || !slices.Equal(got, wantOutputs(ints(6))) {
		t.Fatalf("outputs %v, err %v", got, err)
	}
	if !slices.Equal(r.calls, []string{"[0,6)+2", "[0,3)+1", "[3,6)+1"}) {
		t.Errorf("calls %v: want the halves at the smaller equivalent size", r.calls)
	}
}

func firstOr(s []int, def int) int {
	if len(s) > 0 {
		return s[0]
	}
	return def
}
