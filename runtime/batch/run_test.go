package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// recorder is a fault-injecting forward over int items. Each item i maps to
// the output 10*i+1. fail decides, from the batch and the call, whether the
// call fails and with what.
type recorder struct {
	fail  func(batch []int, c Call) error
	calls []string // "[lo,hi)" or "[lo,hi)+p" with p padding items
	seen  [][]int  // the batches forward received, padding included
	infos []Call
}

func (r *recorder) forward(ctx context.Context, batch []int) ([]int, error) {
	c, ok := CallFrom(ctx)
	if !ok {
		return nil, errors.New("no Call in context")
	}
	tag := fmt.Sprintf("[%d,%d)", c.Offset, c.Offset+c.Items)
	if c.Size > c.Items {
		tag += fmt.Sprintf("+%d", c.Size-c.Items)
	}
	r.calls = append(r.calls, tag)
	r.seen = append(r.seen, slices.Clone(batch))
	r.infos = append(r.infos, c)
	if len(batch) != c.Size {
		return nil, fmt.Errorf("batch has %d items, Call says %d", len(batch), c.Size)
	}
	if r.fail != nil {
		if err := r.fail(batch, c); err != nil {
			return nil, err
		}
	}
	out := make([]int, len(batch))
	for i, x := range batch {
		out[i] = 10*x + 1
	}
	return out, nil
}

func ints(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func wantOutputs(items []int) []int {
	out := make([]int, len(items))
	for i, x := range items {
		out[i] = 10*x + 1
	}
	return out
}

var oom = fmt.Errorf("CUDA out of memory. Tried to allocate 2.00 GiB: %w", engine.ErrOutOfMemory)

func TestOOMRetriesOnlyTheFailedSlice(t *testing.T) {
	// Item 5 cannot share a batch: any batch of more than one item that
	// holds it runs out of memory.
	r := &recorder{fail: func(b []int, c Call) error {
		if len(b) > 1 && slices.Contains(b, 5) {
			return oom
		}
		return nil
	}}
	var last Stats
	items := ints(10)
	got, err := Run(context.Background(), items, r.forward, WithMaxBatchSize(4), WithStats(func(s Stats) { last = s }))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[0,4)", "[4,8)", "[4,6)", "[4,5)", "[5,6)", "[6,8)", "[8,10)"}
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls = %v\nwant    %v", r.calls, want)
	}
	if !slices.Equal(got, wantOutputs(items)) {
		t.Errorf("outputs = %v, want %v", got, wantOutputs(items))
	}
	wantStats := Stats{Items: 10, Done: 10, Calls: 7, Batches: 5, Retries: 2, Lanes: 1}
	if last != wantStats {
		t.Errorf("stats = %+v, want %+v", last, wantStats)
	}
}

func TestOOMAboveAMemoryLimit(t *testing.T) {
	// Memory allows at most 3 items at once.
	r := &recorder{fail: func(b []int, c Call) error {
		if len(b) > 3 {
			return oom
		}
		return nil
	}}
	items := ints(11)
	got, err := Run(context.Background(), items, r.forward, WithMaxBatchSize(8))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[0,8)", "[0,4)", "[0,2)", "[2,4)", "[4,8)", "[4,6)", "[6,8)", "[8,11)"}
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls = %v\nwant    %v", r.calls, want)
	}
	if !slices.Equal(got, wantOutputs(items)) {
		t.Errorf("outputs = %v", got)
	}
}

func TestOOMAtSizeOneIsReturnedUnchanged(t *testing.T) {
	for _, pad := range [][]int{nil, {2, 4}} {
		t.Run(fmt.Sprint("pad", pad), func(t *testing.T) {
			r := &recorder{fail: func(b []int, c Call) error {
				if slices.Contains(b, 2) { // item 2 never fits, even alone
					return oom
				}
				return nil
			}}
			opts := []Option{WithMaxBatchSize(4)}
			if pad != nil {
				opts = append(opts, WithPadSizes(pad...))
			}
			got, err := Run(context.Background(), ints(6), r.forward, opts...)
			if err != oom { // identity: not wrapped, not replaced
				t.Fatalf("err = %v (%T), want the forward's error value itself", err, err)
			}
			if !errors.Is(err, engine.ErrOutOfMemory) {
				t.Error("errors.Is(err, ErrOutOfMemory) is false")
			}
			if got != nil {
				t.Errorf("outputs = %v, want nil on error", got)
			}
			wantLast := "[2,3)"
			if pad != nil {
				wantLast = "[2,3)+1"
			}
			if last := r.calls[len(r.calls)-1]; last != wantLast {
				t.Errorf("last call %s, want %s (calls %v)", last, wantLast, r.calls)
			}
		})
	}
}

func TestPaddingRepeatsLastRealItemAndTrims(t *testing.T) {
	r := &recorder{}
	items := ints(11)
	var last Stats
	got, err := Run(context.Background(), items, r.forward, WithPadSizes(1, 2, 4, 8), WithStats(func(s Stats) { last = s }))
	if err != nil {
		t.Fatal(err)
	}
	wantSeen := [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 10}}
	if !slices.EqualFunc(r.seen, wantSeen, slices.Equal) {
		t.Errorf("forward saw %v, want %v", r.seen, wantSeen)
	}
	if !slices.Equal(got, wantOutputs(items)) {
		t.Errorf("outputs = %v, want %v", got, wantOutputs(items))
	}
	if last.Padded != 1 || last.Done != 11 {
		t.Errorf("stats = %+v, want Padded 1, Done 11", last)
	}
}

func TestPaddingAppliesToRetriedHalves(t *testing.T) {
	// 7 items padded to 8 run out of memory; the halves 4 and 3 are padded
	// to 4, then the 3 needs no further split.
	r := &recorder{fail: func(b []int, c Call) error {
		if len(b) > 4 {
			return oom
		}
		return nil
	}}
	items := ints(7)
	got, err := Run(context.Background(), items, r.forward, WithPadSizes(2, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{"[0,7)+1", "[0,4)", "[4,7)+1"}
	if !slices.Equal(r.calls, wantCalls) {
		t.Errorf("calls = %v, want %v", r.calls, wantCalls)
	}
	wantSeen := [][]int{{0, 1, 2, 3, 4, 5, 6, 6}, {0, 1, 2, 3}, {4, 5, 6, 6}}
	if !slices.EqualFunc(r.seen, wantSeen, slices.Equal) {
		t.Errorf("forward saw %v, want %v", r.seen, wantSeen)
	}
	if !slices.Equal(got, wantOutputs(items)) {
		t.Errorf("outputs = %v", got)
	}
}

func TestWrongOutputCountIsRejected(t *testing.T) {
	cases := []struct {
		name  string
		opts  []Option
		delta int
		want  string
	}{
		{"fewer", []Option{WithMaxBatchSize(4)}, -1, "forward returned 3 outputs for a batch of 4 inputs (items [0, 4))"},
		{"more", []Option{WithMaxBatchSize(4)}, +2, "forward returned 6 outputs for a batch of 4 inputs"},
		{"padded", []Option{WithPadSizes(8)}, -3, "forward returned 5 outputs for a batch of 8 inputs (6 items + 2 padding"},
		{"none", []Option{WithMaxBatchSize(4)}, -4, "forward returned 0 outputs for a batch of 4 inputs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fwd := func(ctx context.Context, b []int) ([]int, error) {
				return make([]int, len(b)+tc.delta), nil
			}
			got, err := Run(context.Background(), ints(6), fwd, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if got != nil {
				t.Errorf("outputs = %v, want nil", got)
			}
		})
	}
}

var errBadItem = errors.New("bad input: image has 5 channels")

func TestPerItemErrorsBisect(t *testing.T) {
	bad := map[int]bool{5: true, 12: true}
	r := &recorder{fail: func(b []int, c Call) error {
		for _, x := range b {
			if bad[x] {
				return fmt.Errorf("item %d: %w", x, errBadItem)
			}
		}
		return nil
	}}
	items := ints(16)
	var last Stats
	got, err := Run(context.Background(), items, r.forward, WithMaxBatchSize(8), WithPerItemErrors(),
		WithStats(func(s Stats) { last = s }))
	var ie ItemErrors
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v, want ItemErrors", err)
	}
	if !slices.Equal(ie.Indexes(), []int{5, 12}) {
		t.Errorf("failed indexes = %v, want [5 12]", ie.Indexes())
	}
	if !errors.Is(err, errBadItem) {
		t.Error("errors.Is(err, errBadItem) is false")
	}
	want := wantOutputs(items)
	want[5], want[12] = 0, 0
	if !slices.Equal(got, want) {
		t.Errorf("outputs = %v\nwant      %v", got, want)
	}
	wantCalls := []string{
		"[0,8)", "[0,4)", "[4,8)", "[4,6)", "[4,5)", "[5,6)", "[6,8)",
		"[8,16)", "[8,12)", "[12,16)", "[12,14)", "[12,13)", "[13,14)", "[14,16)",
	}
	if !slices.Equal(r.calls, wantCalls) {
		t.Errorf("calls = %v\nwant    %v", r.calls, wantCalls)
	}
	wantStats := Stats{Items: 16, Done: 14, Failed: 2, Calls: 14, Batches: 6, Bisections: 6, Lanes: 1}
	if last != wantStats {
		t.Errorf("stats = %+v, want %+v", last, wantStats)
	}
	if !strings.Contains(err.Error(), "item 5: item 5: bad input") {
		t.Errorf("message %q does not name item 5 and its error", err)
	}
}

func TestItemFailureWithoutPerItemStops(t *testing.T) {
	r := &recorder{fail: func(b []int, c Call) error {
		if slices.Contains(b, 5) {
			return errBadItem
		}
		return nil
	}}
	got, err := Run(context.Background(), ints(16), r.forward, WithMaxBatchSize(8))
	if !errors.Is(err, errBadItem) {
		t.Fatalf("err = %v, want errBadItem", err)
	}
	if !strings.Contains(err.Error(), "items [0, 8) of 16") {
		t.Errorf("message %q does not name the item range", err)
	}
	if got != nil || len(r.calls) != 1 {
		t.Errorf("outputs %v after calls %v; want nil after one call", got, r.calls)
	}
}

func TestPerItemModeStillPropagatesOOMAtSizeOne(t *testing.T) {
	r := &recorder{fail: func(b []int, c Call) error {
		if slices.Contains(b, 3) {
			return oom
		}
		return nil
	}}
	_, err := Run(context.Background(), ints(8), r.forward, WithMaxBatchSize(8), WithPerItemErrors())
	if err != oom {
		t.Fatalf("err = %v, want the out-of-memory error itself", err)
	}
}

func TestPerItemModeDoesNotBisectCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{fail: func(b []int, c Call) error {
		cancel()
		return context.Canceled
	}}
	_, err := Run(ctx, ints(8), r.forward, WithMaxBatchSize(8), WithPerItemErrors())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(r.calls) != 1 {
		t.Errorf("calls = %v, want one", r.calls)
	}
}

func TestCancellationBetweenBatches(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{}
	got, err := Run(ctx, ints(20), r.forward, WithMaxBatchSize(4), WithStats(func(s Stats) {
		if s.Batches == 2 {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "stopped after 8 of 20 items") {
		t.Errorf("message %q does not say how far it got", err)
	}
	if got != nil || len(r.calls) != 2 {
		t.Errorf("outputs %v, calls %v; want nil after 2 calls", got, r.calls)
	}
}

func TestPersistentForwardIsVisibleToForward(t *testing.T) {
	r := &recorder{}
	if _, err := Run(context.Background(), ints(5), r.forward, WithMaxBatchSize(2), WithPersistentForward("clip/base/encode")); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.infos {
		if !c.Persistent() || c.PersistentKey != "clip/base/encode" {
			t.Errorf("call %+v does not carry the persistent key", c)
		}
	}
	r = &recorder{}
	if _, err := Run(context.Background(), ints(5), r.forward); err != nil {
		t.Fatal(err)
	}
	if r.infos[0].Persistent() {
		t.Error("forward is persistent without WithPersistentForward")
	}
	cfg, err := NewConfig(WithPersistentForward("k"))
	if err != nil || cfg.PersistentKey != "k" {
		t.Errorf("NewConfig = %+v, %v", cfg, err)
	}
}

func TestForwardAppendDoesNotClobberItems(t *testing.T) {
	items := ints(6)
	fwd := func(ctx context.Context, b []int) ([]int, error) {
		b = append(b, -1) // must reallocate, not write into items
		return b[:len(b)-1], nil
	}
	got, err := Run(context.Background(), items, fwd, WithMaxBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(items, ints(6)) || !slices.Equal(got, ints(6)) {
		t.Errorf("items %v, outputs %v", items, got)
	}
}

func TestEmptyAndInvalid(t *testing.T) {
	r := &recorder{}
	got, err := Run(context.Background(), nil, r.forward)
	if err != nil || got == nil || len(got) != 0 || len(r.calls) != 0 {
		t.Errorf("empty input: outputs %#v, err %v, calls %v", got, err, r.calls)
	}
	if _, err := Run[int, int](context.Background(), ints(3), nil); err == nil || !strings.Contains(err.Error(), "nil forward") {
		t.Errorf("nil forward: err = %v", err)
	}
	bad := []struct {
		opts []Option
		want string
	}{
		{[]Option{WithMaxBatchSize(0)}, "batch: max batch size 0, pad sizes []: max_batch_size 0 must be at least 1"},
		{[]Option{WithMaxBatchSize(-3)}, "max_batch_size -3 must be at least 1"},
		{[]Option{WithPadSizes(1, 0, 4)}, "batch: max batch size 4, pad sizes [1 0 4]: pad_to_batch_sizes entry 0 must be at least 1"},
		{[]Option{WithPadSizes(1, 2, 4), WithMaxBatchSize(6)}, "the largest of pad_to_batch_sizes is 4, but max_batch_size is 6; end the list with 6"},
		// The manifest's rules, whichever way the options arrive: a pad
		// size above the max is refused, not padded to.
		{[]Option{WithMaxBatchSize(5), WithPadSizes(1, 16)}, "batch: max batch size 5, pad sizes [1 16]: pad_to_batch_sizes entry 16 exceeds max_batch_size 5"},
		{[]Option{WithPadSizes(16, 4, 1)}, "pad_to_batch_sizes must be strictly increasing (4 follows 16); pad_to_batch_sizes must be strictly increasing (1 follows 16)"},
		{[]Option{WithPadSizes(1, 2, 2, 4)}, "pad_to_batch_sizes must be strictly increasing (2 follows 2)"},
	}
	for _, tc := range bad {
		_, err := Run(context.Background(), ints(3), r.forward, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
	if len(r.calls) != 0 {
		t.Errorf("forward called with an invalid config: %v", r.calls)
	}
}

func TestNewConfigDefaults(t *testing.T) {
	c, err := NewConfig()
	if err != nil || c.MaxBatchSize != DefaultMaxBatchSize {
		t.Errorf("default config %+v, %v", c, err)
	}
	c, err = NewConfig(WithPadSizes(1, 4, 16))
	if err != nil || c.MaxBatchSize != 16 || !slices.Equal(c.PadSizes, []int{1, 4, 16}) {
		t.Errorf("padded config %+v, %v", c, err)
	}
	for n, want := range map[int]int{1: 1, 2: 4, 4: 4, 5: 16, 16: 16} {
		if got := c.PaddedSize(n); got != want {
			t.Errorf("PaddedSize(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestTaskOptions(t *testing.T) {
	task := &spec.InferenceTaskProfile{
		TaskID:   "embed",
		Inputs:   []spec.InferenceFieldSpec{{FieldID: "x", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, Required: true}},
		Batching: &spec.BatchingSpec{MaxBatchSize: 6, PadToBatchSizes: []int{2, 6}},
	}
	opts, err := TaskOptions(task)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConfig(opts...)
	if err != nil || c.MaxBatchSize != 6 || !slices.Equal(c.PadSizes, []int{2, 6}) {
		t.Errorf("task config %+v, %v", c, err)
	}
	// Options after the task's are checked against the task's max.
	if _, err := NewConfig(append(opts, WithPadSizes(1, 16))...); err == nil || !strings.Contains(err.Error(), "pad_to_batch_sizes entry 16 exceeds max_batch_size 6") {
		t.Errorf("WithPadSizes(1, 16) after a task with max 6: %v", err)
	}
	if c, err := NewConfig(append(opts, WithPadSizes(1, 3, 6))...); err != nil || !slices.Equal(c.PadSizes, []int{1, 3, 6}) {
		t.Errorf("WithPadSizes(1, 3, 6) after a task with max 6: %+v, %v", c, err)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*spec.InferenceTaskProfile)
		want   string
	}{
		{"no batching", func(t *spec.InferenceTaskProfile) { t.Batching = nil }, "task is not batchable (the manifest gives it no batching settings)"},
		{"no tensor", func(t *spec.InferenceTaskProfile) { t.Inputs[0].Kind = spec.KindString },
			"task cannot be batched: batching: batching stacks each item's tensor, image and video inputs into one call, but the task has no call_kwargs field"},
		{"pad sizes", func(t *spec.InferenceTaskProfile) { t.Batching.PadToBatchSizes = []int{8, 2} },
			"task cannot be batched: batching/pad_to_batch_sizes/0: pad_to_batch_sizes entry 8 exceeds max_batch_size 6; batching/pad_to_batch_sizes/1: pad_to_batch_sizes must be strictly increasing (2 follows 8)"},
	} {
		cp := *task
		cp.Inputs = slices.Clone(task.Inputs)
		b := *task.Batching
		cp.Batching = &b
		tc.mutate(&cp)
		if opts, err := TaskOptions(&cp); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: options %d, error %v; want %q", tc.name, len(opts), err, tc.want)
		}
	}
}

func TestStatsHookSeesEveryCall(t *testing.T) {
	r := &recorder{fail: func(b []int, c Call) error {
		if len(b) > 2 {
			return oom
		}
		return nil
	}}
	var seen []Stats
	_, err := Run(context.Background(), ints(9), r.forward, WithMaxBatchSize(4), WithPadSizes(1, 2, 4),
		WithStats(func(s Stats) { seen = append(seen, s) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(r.calls) {
		t.Fatalf("hook called %d times for %d forward calls", len(seen), len(r.calls))
	}
	for i, s := range seen {
		if s.Calls != i+1 {
			t.Errorf("hook %d: Calls = %d", i, s.Calls)
		}
		if i > 0 && s.Done < seen[i-1].Done {
			t.Errorf("Done went down: %+v after %+v", s, seen[i-1])
		}
	}
	// [0,4) oom, [0,2), [2,4), [4,8) oom, [4,6), [6,8), [8,9).
	want := Stats{Items: 9, Done: 9, Calls: 7, Batches: 5, Retries: 2, Lanes: 1}
	if got := seen[len(seen)-1]; got != want {
		t.Errorf("final stats %+v, want %+v", got, want)
	}
}

// A forward exported for batches of 2 to 12 items gets nothing else: the
// max batch size and the pad sizes above 12 give way, and a last batch of
// one item is padded to 2.
func TestBatchRangeSplitsAndPads(t *testing.T) {
	cases := []struct {
		n     int
		opts  []Option
		calls []string
	}{
		{100, []Option{WithMaxBatchSize(32), WithPadSizes(8, 16, 32), WithBatchRange(2, 12)},
			[]string{"[0,12)", "[12,24)", "[24,36)", "[36,48)", "[48,60)", "[60,72)", "[72,84)", "[84,96)", "[96,100)+4"}},
		{25, []Option{WithMaxBatchSize(16), WithBatchRange(2, 12)}, []string{"[0,12)", "[12,24)", "[24,25)+1"}},
		{5, []Option{WithMaxBatchSize(4), WithBatchRange(3, 0)}, []string{"[0,4)", "[4,5)+2"}},
		{3, []Option{WithPadSizes(1, 2, 4), WithBatchRange(1, 2)}, []string{"[0,2)", "[2,3)"}},
	}
	for _, c := range cases {
		r := &recorder{}
		items := ints(c.n)
		out, err := Run(context.Background(), items, r.forward, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out, wantOutputs(items)) || !slices.Equal(r.calls, c.calls) {
			t.Errorf("%d items: calls %v, want %v", c.n, r.calls, c.calls)
		}
		for _, b := range r.seen {
			if len(b) > 12 || len(b) < 1 {
				t.Errorf("%d items: a batch of %d", c.n, len(b))
			}
		}
	}
	if _, err := NewConfig(WithBatchRange(4, 2)); err == nil || !strings.Contains(err.Error(), "batch range [4, 2]: want 0 ≤ min ≤ max") {
		t.Fatalf("min above max: %v", err)
	}
	cfg, err := NewConfig(WithMaxBatchSize(32), WithPadSizes(8, 16, 32), WithBatchRange(2, 16))
	if err != nil || cfg.MaxBatchSize != 16 || !slices.Equal(cfg.PadSizes, []int{8, 16}) || cfg.MinBatchSize != 2 {
		t.Fatalf("config %+v, %v", cfg, err)
	}
}
