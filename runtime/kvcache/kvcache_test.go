package kvcache

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// kv returns a float32 tensor [B, S, D] whose element (b, s, d) is
// base + b*1000 + s*10 + d, so every element says where it came from.
func kv(base float32, b, s, d int) *tensor.Tensor {
	v := make([]float32, 0, b*s*d)
	for i := range b {
		for j := range s {
			for k := range d {
				v = append(v, base+float32(i*1000+j*10+k))
			}
		}
	}
	return tensor.FromFloat32(v, int64(b), int64(s), int64(d))
}

func vals(t *testing.T, x *tensor.Tensor) []float32 {
	t.Helper()
	v, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// row returns batch row b of a float32 [B, ...] tensor.
func row(t *testing.T, x *tensor.Tensor, b int) []float32 {
	t.Helper()
	v := vals(t, x)
	n := len(v) / int(x.Shape[0])
	return v[b*n : (b+1)*n]
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustNew(t *testing.T, b, s int, opts ...Option) *InferenceParams {
	t.Helper()
	p, err := New(b, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(0, 8)
	wantErr(t, err, "max batch size 0")
	_, err = New(2, 0)
	wantErr(t, err, "max sequence length 0")
	_, err = New(2, 8, WithSequenceDim(0))
	wantErr(t, err, "sequence dimension 0")
	p := mustNew(t, 4, 16, WithSequenceDim(2))
	if p.MaxBatchSize() != 4 || p.MaxSequenceLength() != 16 || p.SequenceDim() != 2 || p.SequenceOffset() != 0 || p.BatchSize() != 0 {
		t.Errorf("new cache: %d %d %d %d %d", p.MaxBatchSize(), p.MaxSequenceLength(), p.SequenceDim(), p.SequenceOffset(), p.BatchSize())
	}
}

func TestSwapKeyValueReordersEveryLayer(t *testing.T) {
	p := mustNew(t, 4, 8)
	for l := range 3 {
		if err := p.Store(l, kv(float32(l)*1e5, 3, 4, 2), kv(float32(l)*1e5+0.5, 3, 4, 2)); err != nil {
			t.Fatal(err)
		}
	}
	oldKey, _, _ := p.Layer(1)
	before := append([]float32(nil), vals(t, oldKey)...)
	order := []int{2, 2, 0} // repeats allowed
	if err := p.SwapKeyValue(order); err != nil {
		t.Fatal(err)
	}
	for l := range 3 {
		k, v, ok := p.Layer(l)
		if !ok {
			t.Fatalf("layer %d gone", l)
		}
		if k.Shape[0] != 3 || v.Shape[0] != 3 {
			t.Fatalf("layer %d: shapes %v %v", l, k.Shape, v.Shape)
		}
		for i, src := range order {
			if !equal(row(t, k, i), row(t, kv(float32(l)*1e5, 3, 4, 2), src)) {
				t.Errorf("layer %d key row %d is not old row %d", l, i, src)
			}
			if !equal(row(t, v, i), row(t, kv(float32(l)*1e5+0.5, 3, 4, 2), src)) {
				t.Errorf("layer %d value row %d is not old row %d", l, i, src)
			}
		}
	}
	if !equal(vals(t, oldKey), before) {
		t.Error("a tensor handed out before the swap changed")
	}
}

func TestSwapKeyValueErrorsChangeNothing(t *testing.T) {
	p := mustNew(t, 4, 8)
	wantErr(t, p.SwapKeyValue([]int{0}), "nothing cached")
	k := kv(0, 3, 2, 2)
	if err := p.Store(7, k, kv(1, 3, 2, 2)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.SwapKeyValue([]int{0, 1}), "2 batch indexes", "batch of 3")
	wantErr(t, p.SwapKeyValue([]int{0, 1, 3}), "batch index 3", "position 2", "[0, 3)")
	wantErr(t, p.SwapKeyValue([]int{-1, 1, 2}), "batch index -1")
	if got, _, _ := p.Layer(7); got != k {
		t.Error("a failed swap replaced the cached key")
	}
}

func TestStoreValidates(t *testing.T) {
	p := mustNew(t, 2, 4)
	cases := []struct {
		name       string
		layer      int
		key, value *tensor.Tensor
		want       []string
	}{
		{"negative layer", -1, kv(0, 1, 1, 1), kv(0, 1, 1, 1), []string{"layer -1"}},
		{"nil key", 0, nil, kv(0, 1, 1, 1), []string{"nil key"}},
		{"bad data", 0, &tensor.Tensor{DType: tensor.Float32, Shape: []int64{1, 1}, Data: []byte{1}}, kv(0, 1, 1, 1), []string{"key", "needs 4 bytes"}},
		{"one dim", 0, tensor.FromFloat32([]float32{1}, 1), tensor.FromFloat32([]float32{1}, 1), []string{"shape [1]", "at least 2 dimensions"}},
		{"dtypes", 0, kv(0, 1, 2, 2), tensor.FromInt64(make([]int64, 4), 1, 2, 2), []string{"key is float32, value is int64"}},
		{"batch mismatch", 0, kv(0, 2, 2, 2), kv(0, 1, 2, 2), []string{"[2 2 2]", "[1 2 2]"}},
		{"seq mismatch", 0, kv(0, 1, 3, 2), kv(0, 1, 2, 2), []string{"disagree"}},
		{"batch too big", 0, kv(0, 3, 2, 2), kv(0, 3, 2, 2), []string{"batch size 3", "1..2"}},
		{"seq too long", 0, kv(0, 1, 5, 2), kv(0, 1, 5, 2), []string{"5 sequence positions", "max sequence length 4"}},
	}
	for _, c := range cases {
		err := p.Store(c.layer, c.key, c.value)
		if err == nil {
			t.Errorf("%s: stored", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
	if len(p.Layers()) != 0 {
		t.Fatalf("failed stores cached layers %v", p.Layers())
	}
	// Keys and values may differ in trailing dims (e.g. a different head dim).
	if err := p.Store(0, kv(0, 2, 3, 4), kv(0, 2, 3, 8)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.Store(1, kv(0, 1, 3, 4), kv(0, 1, 3, 4)), "layer 1 has batch size 1", "layer 0 holds 2")
	// Replacing the only layer with another batch size is fine.
	if err := p.Store(0, kv(0, 1, 3, 4), kv(0, 1, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if p.BatchSize() != 1 || p.SequenceLength(0) != 3 || p.SequenceLength(5) != 0 {
		t.Errorf("batch %d, seq %d", p.BatchSize(), p.SequenceLength(0))
	}
}

func TestAppendAlongSequence(t *testing.T) {
	p := mustNew(t, 2, 6)
	if err := p.Append(0, kv(0, 2, 2, 3), kv(0.5, 2, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if err := p.Append(0, kv(100, 2, 3, 3), kv(100.5, 2, 3, 3)); err != nil {
		t.Fatal(err)
	}
	k, v, _ := p.Layer(0)
	if fmt.Sprint(k.Shape) != "[2 5 3]" || fmt.Sprint(v.Shape) != "[2 5 3]" {
		t.Fatalf("shapes %v %v, want [2 5 3]", k.Shape, v.Shape)
	}
	for b := range 2 {
		want := append(row(t, kv(0, 2, 2, 3), b), row(t, kv(100, 2, 3, 3), b)...)
		if !equal(row(t, k, b), want) {
			t.Errorf("key row %d = %v, want %v", b, row(t, k, b), want)
		}
	}
	wantErr(t, p.Append(0, kv(0, 2, 2, 3), kv(0, 2, 2, 3)), "appending 2 positions to 5", "max sequence length 6")
	wantErr(t, p.Append(0, kv(0, 2, 1, 4), kv(0, 2, 1, 4)), "dimension 2 differs")
	wantErr(t, p.Append(0, kv(0, 1, 1, 3), kv(0, 1, 1, 3)), "dimension 0 differs")
	if k2, _, _ := p.Layer(0); k2 != k {
		t.Error("a failed append changed the cache")
	}
}

// With [B, heads, S, D] tensors the sequence is dimension 2.
func TestAppendSequenceDim2(t *testing.T) {
	p := mustNew(t, 1, 8, WithSequenceDim(2))
	mk := func(base float32, s int) *tensor.Tensor {
		v := make([]float32, 0, 2*s)
		for h := range 2 {
			for j := range s {
				v = append(v, base+float32(h*100+j))
			}
		}
		return tensor.FromFloat32(v, 1, 2, int64(s), 1)
	}
	if err := p.Append(3, mk(0, 2), mk(0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := p.Append(3, mk(50, 1), mk(50, 1)); err != nil {
		t.Fatal(err)
	}
	k, _, _ := p.Layer(3)
	want := []float32{0, 1, 50, 100, 101, 150} // head 0: s0 s1 new; head 1: s0 s1 new
	if !equal(vals(t, k), want) || fmt.Sprint(k.Shape) != "[1 2 3 1]" {
		t.Errorf("got %v %v, want %v [1 2 3 1]", vals(t, k), k.Shape, want)
	}
	if p.SequenceLength(3) != 3 {
		t.Errorf("sequence length %d, want 3", p.SequenceLength(3))
	}
}

func TestSequenceOffsetAndReset(t *testing.T) {
	p := mustNew(t, 1, 10)
	if err := p.Advance(4); err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(6); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.Advance(1), "offset 10 by 1", "max sequence length 10")
	wantErr(t, p.Advance(-1), "advance by -1")
	if p.SequenceOffset() != 10 {
		t.Errorf("offset %d, want 10", p.SequenceOffset())
	}
	if err := p.Store(0, kv(0, 1, 1, 1), kv(0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if p.SequenceOffset() != 0 || len(p.Layers()) != 0 || p.BatchSize() != 0 {
		t.Errorf("after Reset: offset %d layers %v", p.SequenceOffset(), p.Layers())
	}
}

// A small beam search: each step every beam appends one position, then the
// best beams are picked (with repeats) and the cache swapped. Each row's
// history must be the history of the beam it descends from.
func TestBeamSearchHistory(t *testing.T) {
	const beams, steps, layers, dim = 3, 5, 2, 2
	p := mustNew(t, beams, steps)
	history := make([][]float32, beams) // the token ids each row has seen
	picks := [][]int{{0, 0, 1}, {2, 1, 1}, {0, 1, 2}, {1, 1, 0}, {2, 0, 2}}
	for step := range steps {
		tokens := make([]float32, beams)
		for b := range beams {
			tokens[b] = float32(step*10 + b)
			history[b] = append(history[b], tokens[b])
		}
		for l := range layers {
			v := make([]float32, 0, beams*dim)
			for b := range beams {
				for d := range dim {
					v = append(v, tokens[b]*float32(l+1)+float32(d)/10)
				}
			}
			x := tensor.FromFloat32(v, beams, 1, dim)
			if err := p.Append(l, x, x); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Advance(1); err != nil {
			t.Fatal(err)
		}
		if err := p.SwapKeyValue(picks[step]); err != nil {
			t.Fatal(err)
		}
		next := make([][]float32, beams)
		for i, src := range picks[step] {
			next[i] = append([]float32(nil), history[src]...)
		}
		history = next
	}
	for l := range layers {
		k, _, _ := p.Layer(l)
		for b := range beams {
			got := row(t, k, b)
			for s, tok := range history[b] {
				for d := range dim {
					if want := tok*float32(l+1) + float32(d)/10; got[s*dim+d] != want {
						t.Fatalf("layer %d beam %d position %d: %v, want %v (history %v)", l, b, s, got[s*dim+d], want, history[b])
					}
				}
			}
		}
	}
	if p.SequenceOffset() != steps {
		t.Errorf("offset %d, want %d", p.SequenceOffset(), steps)
	}
}

// Half-precision tensors are swapped by whole elements.
func TestSwapFloat16(t *testing.T) {
	p := mustNew(t, 2, 2)
	k := &tensor.Tensor{DType: tensor.Float16, Shape: []int64{2, 1, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	if err := p.Store(0, k, k); err != nil {
		t.Fatal(err)
	}
	if err := p.SwapKeyValue([]int{1, 0}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := p.Layer(0)
	if fmt.Sprint(got.Data) != "[5 6 7 8 1 2 3 4]" {
		t.Errorf("swapped bytes %v", got.Data)
	}
}

func TestConcurrentUse(t *testing.T) {
	p := mustNew(t, 2, 1000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				x := kv(0, 2, 1, 2)
				if err := p.Append(g, x, x); err != nil {
					t.Error(err)
					return
				}
				if err := p.SwapKeyValue([]int{1, 0}); err != nil {
					t.Error(err)
					return
				}
				_ = p.Layers()
			}
		}()
	}
	wg.Wait()
	for g := range 4 {
		if n := p.SequenceLength(g); n != 50 {
			t.Errorf("layer %d holds %d positions, want 50", g, n)
		}
	}
}

func BenchmarkSwapKeyValue24Layers(b *testing.B) {
	// 24 layers of [8, 256, 128] float16 keys and values: 24 MiB in all.
	p, err := New(8, 256)
	if err != nil {
		b.Fatal(err)
	}
	x := &tensor.Tensor{DType: tensor.Float16, Shape: []int64{8, 256, 128}, Data: make([]byte, 8*256*128*2)}
	for l := range 24 {
		if err := p.Store(l, x, x); err != nil {
			b.Fatal(err)
		}
	}
	order := []int{0, 0, 1, 3, 3, 5, 6, 2}
	b.SetBytes(int64(24 * 2 * len(x.Data)))
	for b.Loop() {
		if err := p.SwapKeyValue(order); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode appends one position per step to 8 layers, the way an
// autoregressive decode fills its cache, for 256 steps of float16 [B, 1,
// 256] keys and values; one op is a whole decode.
func BenchmarkDecode(b *testing.B) {
	const layers, steps, hidden = 8, 256, 256
	for _, batch := range []int{1, 4} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			x := &tensor.Tensor{DType: tensor.Float16, Shape: []int64{int64(batch), 1, hidden}, Data: make([]byte, batch*hidden*2)}
			b.SetBytes(int64(layers * steps * 2 * len(x.Data)))
			for b.Loop() {
				p, err := New(batch, steps)
				if err != nil {
					b.Fatal(err)
				}
				for range steps {
					for l := range layers {
						if err := p.Append(l, x, x); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// Appends to [1, S, D] go in place; every tensor handed out keeps its
// contents, the caller's stored tensors are never written, and the cache's
// memory never grows beyond the max sequence length.
func TestAppendInPlaceKeepsEarlierTensors(t *testing.T) {
	const maxSeq, d = 40, 3
	p := mustNew(t, 1, maxSeq)
	// The first tensor is the caller's, with spare capacity that an
	// in-place append must not use.
	first := kv(0, 1, 2, d)
	spare := make([]byte, len(first.Data), 4*len(first.Data))
	copy(spare, first.Data)
	first.Data = spare
	if err := p.Append(0, first, first); err != nil {
		t.Fatal(err)
	}
	type snap struct {
		k    *tensor.Tensor
		want []float32
	}
	var seen []snap
	var all []float32
	all = append(all, vals(t, first)...)
	for step := range maxSeq - 2 {
		x := kv(float32(100*(step+1)), 1, 1, d)
		if step == 3 {
			bad := kv(0, 1, 1, d+1)
			wantErr(t, p.Append(0, bad, bad), "dimension 2 differs")
			wantErr(t, p.Append(0, x, kv(0, 1, 1, d+1)), "value", "dimension 2 differs")
		}
		if err := p.Append(0, x, x); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		all = append(all, vals(t, x)...)
		k, v, _ := p.Layer(0)
		if !equal(vals(t, k), all) || !equal(vals(t, v), all) {
			t.Fatalf("step %d: key %v, want %v", step, vals(t, k), all)
		}
		if cap(k.Data) != len(k.Data) {
			t.Fatalf("step %d: Layer's data has spare capacity %d, which a caller's append would write into the cache", step, cap(k.Data)-len(k.Data))
		}
		seen = append(seen, snap{k, vals(t, k)})
	}
	for i, s := range seen {
		if got := vals(t, s.k); !equal(got, s.want) {
			t.Fatalf("tensor from step %d changed: %v, want %v", i, got, s.want)
		}
	}
	if got := spare[len(first.Data) : len(first.Data)+4]; fmt.Sprint(got) != "[0 0 0 0]" {
		t.Errorf("the caller's spare capacity was written: %v", got)
	}
	e := p.layers[0]
	if limit := maxSeq * d * 4; cap(e.kbuf) > limit || cap(e.vbuf) > limit {
		t.Errorf("cache memory %d/%d bytes, want at most %d (the max sequence length)", cap(e.kbuf), cap(e.vbuf), limit)
	}
	x := kv(0, 1, 1, d)
	wantErr(t, p.Append(0, x, x), "exceeds the max sequence length")
	if k, _, _ := p.Layer(0); k != seen[len(seen)-1].k {
		t.Error("a failed append changed the cache")
	}
}

// After a swap the rows are fresh memory, and appends still see them.
func TestAppendAfterSwap(t *testing.T) {
	p := mustNew(t, 1, 8)
	for i := range 3 {
		x := kv(float32(10*i), 1, 1, 2)
		if err := p.Append(0, x, x); err != nil {
			t.Fatal(err)
		}
	}
	before, _, _ := p.Layer(0)
	if err := p.SwapKeyValue([]int{0}); err != nil {
		t.Fatal(err)
	}
	x := kv(99, 1, 1, 2)
	if err := p.Append(0, x, x); err != nil {
		t.Fatal(err)
	}
	k, _, _ := p.Layer(0)
	want := append(vals(t, before), vals(t, x)...)
	if !equal(vals(t, k), want) {
		t.Errorf("after swap and append: %v, want %v", vals(t, k), want)
	}
}
