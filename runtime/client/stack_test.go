package client_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func newTinyEncoder(t testing.TB) *tinyencoder.Client {
	t.Helper()
	c, err := tinyencoder.New(client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func embedParams(n int, normalize bool) []tinyencoder.EmbedParams {
	ps := make([]tinyencoder.EmbedParams, n)
	for i := range ps {
		ps[i] = tinyencoder.DefaultEmbedParams()
		ps[i].Tokens = tokens(i)
		ps[i].Normalize = normalize
	}
	return ps
}

// The typed batch path (items read in place) gives each item what a call
// of its own gives, across full, padded and single batches.
func TestEmbedBatchMatchesEmbed(t *testing.T) {
	t.Parallel()
	c := newTinyEncoder(t)
	ctx := context.Background()
	for _, normalize := range []bool{true, false} {
		ps := embedParams(37, normalize)
		var st batch.Stats
		got, err := c.EmbedBatch(ctx, ps, batch.WithStats(func(s batch.Stats) { st = s }))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ps) || st.Calls != 5 || st.Padded != 3 {
			t.Fatalf("%d results, stats %+v; want 37 results in 5 calls with 3 padding items", len(got), st)
		}
		for i := range ps {
			one, err := c.Embed(ctx, ps[i])
			if err != nil {
				t.Fatal(err)
			}
			want, _ := one.Embedding.Vector.Float32s()
			v, err := got[i].Embedding.Vector.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			assertClose(t, v, want, 1e-5)
			if s := got[i].Embedding.Vector.Shape; len(s) != 1 || s[0] != 64 {
				t.Fatalf("item %d: shape %v, want [64]", i, s)
			}
		}
	}
}

// With lanes, the generated EmbedBatch makes the same batches at once and
// returns the same bytes, item by item, through both the typed and the map
// path: each lane stacks into buffers of its own.
func TestEmbedBatchLanesMatchOneLane(t *testing.T) {
	t.Parallel()
	c := newTinyEncoder(t)
	ctx := context.Background()
	ps := embedParams(203, true)
	want, err := c.EmbedBatch(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	var st batch.Stats
	got, err := c.EmbedBatch(ctx, ps, batch.WithLanes(3), batch.WithStats(func(s batch.Stats) { st = s }))
	if err != nil {
		t.Fatal(err)
	}
	if st.Items != 203 || st.Done != 203 || st.Calls != 26 {
		t.Errorf("stats %+v; want 203 items done in 26 calls", st)
	}
	items := make([]map[string]any, len(ps))
	for i := range ps {
		items[i] = ps[i].CallKwargs()
	}
	maps, err := c.Backend().(*client.Client).RunBatch(ctx, "embed", items, batch.WithLanes(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		w := want[i].Embedding.Vector
		if g := got[i].Embedding.Vector; !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("item %d: three lanes differ from one", i)
		}
		if g, _ := maps[i]["embedding"].(*tensor.Tensor); g == nil || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("item %d: the map path with two lanes differs from one lane", i)
		}
	}
}

// Items must agree on what is not stacked, and stack with item 0: the
// typed path and the map path refuse the same batches, naming the item and
// the field, before anything runs.
func TestBatchRefusesItemsThatDoNotStack(t *testing.T) {
	t.Parallel()
	c := newTinyEncoder(t)
	ctx := context.Background()
	calls := 0
	stats := batch.WithStats(func(s batch.Stats) { calls = s.Calls })

	differ := embedParams(9, true)
	differ[5].Normalize = false
	short := embedParams(9, true)
	short[7].Tokens = tensor.FromInt64(make([]int64, 4), 4)
	for _, tc := range []struct {
		name string
		ps   []tinyencoder.EmbedParams
		want string
	}{
		{"shared field differs", differ, `item 5: field "normalize" differs from the first item's`},
		{"tensor shape differs", short, `item 7: field "tokens" is int64[4], but the first item's is int64[6]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.EmbedBatch(ctx, tc.ps, stats)
			if err == nil || !strings.Contains(err.Error(), tc.want) || res != nil || calls != 0 {
				t.Errorf("typed: %d results, %d calls, error %v; want %q", len(res), calls, err, tc.want)
			}
			items := make([]map[string]any, len(tc.ps))
			for i := range tc.ps {
				items[i] = tc.ps[i].CallKwargs()
			}
			outs, err := c.Backend().(*client.Client).RunBatch(ctx, "embed", items, stats)
			if err == nil || !strings.Contains(err.Error(), tc.want) || outs != nil || calls != 0 {
				t.Errorf("maps: %d outputs, %d calls, error %v; want %q", len(outs), calls, err, tc.want)
			}
		})
	}

	items := []map[string]any{{"tokens": tokens(0)}, {"tokens": tokens(1), "normalize": false}}
	if _, err := c.Backend().(*client.Client).RunBatch(ctx, "embed", items); err == nil || !strings.Contains(err.Error(), `item 1: field "normalize" differs`) {
		t.Errorf("an item setting a kwarg item 0 leaves out: %v", err)
	}
	items = []map[string]any{{"tokens": tokens(0)}, {"normalize": true}}
	if _, err := c.Backend().(*client.Client).RunBatch(ctx, "embed", items); err == nil || !strings.Contains(err.Error(), `item 1: field "tokens" is stacked by batching, but the item gives no tensor`) {
		t.Errorf("an item without the stacked tensor: %v", err)
	}
}

// The batch path allocates per forward call and for what each result
// holds, not per item: 1,000 more items cost about two allocations each
// (the result's embedding, and an eighth of a forward call's ~10; 2.25
// under -race, whose sync.Pool drops items), at most 3. The map-per-item
// path this replaced made 21.
func TestEmbedBatchAllocationsPerItem(t *testing.T) {
	c := newTinyEncoder(t)
	ctx := context.Background()
	small, large := embedParams(200, true), embedParams(1200, true)
	run := func(ps []tinyencoder.EmbedParams) func() {
		return func() {
			if _, err := c.EmbedBatch(ctx, ps); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := testing.AllocsPerRun(3, run(small))
	b := testing.AllocsPerRun(3, run(large))
	perItem := (b - a) / 1000
	t.Logf("%.2f allocations per item", perItem)
	if perItem > 3 {
		t.Errorf("%.2f allocations per item (200 items: %.0f, 1,200 items: %.0f); want ≤ 3", perItem, a, b)
	}
}

// The one batch-compatibility rule: stacked inputs agree on dtype and
// shape (or are unset in both); every other call input is equal or unset
// in both, lists and tensor lists item by item; load kwargs do not count.
func TestBatchConflict(t *testing.T) {
	t.Parallel()
	task := &wfspec.InferenceTaskProfile{TaskID: "t", Inputs: []wfspec.InferenceFieldSpec{
		{FieldID: "tokens", Kind: wfspec.KindTensor, Target: wfspec.TargetCallKwargs, Required: true},
		{FieldID: "mask", Kind: wfspec.KindTensor, Target: wfspec.TargetCallKwargs},
		{FieldID: "seed", Kind: wfspec.KindInt, Target: wfspec.TargetCallKwargs},
		{FieldID: "tags", Kind: wfspec.KindStringList, Target: wfspec.TargetCallKwargs},
		{FieldID: "refs", Kind: wfspec.KindTensorList, Target: wfspec.TargetCallKwargs},
		{FieldID: "threads", Kind: wfspec.KindInt, Target: wfspec.TargetLoadKwargs},
	}}
	base := func() map[string]any {
		return map[string]any{"tokens": tokens(1), "seed": int64(3), "tags": []any{"a"}, "refs": []any{tokens(1)}, "threads": int64(1)}
	}
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		want   string // "" when the items may share a forward call
	}{
		{"equal", func(map[string]any) {}, ""},
		{"other stacked values", func(m map[string]any) { m["tokens"] = tokens(2) }, ""},
		{"load kwargs", func(m map[string]any) { m["threads"] = int64(4) }, ""},
		{"equal tensor list", func(m map[string]any) { m["refs"] = []any{tokens(1)} }, ""},
		{"stacked shape", func(m map[string]any) { m["tokens"] = tensor.FromInt64([]int64{1, 2}, 2) }, `field "tokens" is int64[2], but the first item's is int64[6]`},
		{"stacked dtype", func(m map[string]any) { m["tokens"] = tensor.FromFloat32([]float32{1}, 1) }, `field "tokens" is float32[1]`},
		{"stacked set in one", func(m map[string]any) { m["mask"] = tokens(1) }, `field "mask" is stacked by batching, but the item gives a tensor (the first item gives none)`},
		{"stacked unset in one", func(m map[string]any) { delete(m, "tokens") }, `field "tokens" is stacked by batching, but the item gives no tensor (the first item does)`},
		{"scalar", func(m map[string]any) { m["seed"] = int64(4) }, `field "seed" differs from the first item's`},
		{"optional unset in one", func(m map[string]any) { delete(m, "seed") }, `field "seed" differs`},
		{"list", func(m map[string]any) { m["tags"] = []any{"a", "b"} }, `field "tags" differs`},
		{"empty list and unset", func(m map[string]any) { m["tags"] = []any{} }, `field "tags" differs`},
		{"tensor list contents", func(m map[string]any) { m["refs"] = []any{tokens(2)} }, `field "refs" differs`},
	} {
		b := base()
		c.change(b)
		in := client.Kwargs(task, base(), b)
		got := client.BatchConflict(task, in, 1, in, 0)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: BatchConflict = %q, want %q", c.name, got, c.want)
		}
	}
}

// A batchable task's run options are resolved at load for the family's own
// tasks; a task given by a copy of its own (same id, other batching) is
// run with the copy's settings, as before the load.
func TestCallTaskCopyKeepsItsBatching(t *testing.T) {
	t.Parallel()
	sp := loadSpec(t, "tiny-encoder")
	c, err := client.New(sp, client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	task := &sp.Tasks[0]
	in := client.Kwargs(task, map[string]any{"tokens": tokens(1)})
	if _, err := c.Call(ctx, task, in); err != nil {
		t.Fatal(err)
	}
	cp := *task
	b := *task.Batching
	b.PadToBatchSizes = []int{4, 2}
	cp.Batching = &b
	_, err = c.Call(ctx, &cp, client.Kwargs(&cp, map[string]any{"tokens": tokens(1)}))
	if err == nil || !strings.Contains(err.Error(), "strictly increasing") {
		t.Fatalf("a copy of the task with pad sizes [4 2]: got %v, want the pad sizes' problem", err)
	}
	if _, err := c.Call(ctx, task, in); err != nil {
		t.Fatalf("the family's own task after the copy: %v", err)
	}
}
