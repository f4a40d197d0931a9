// Package kvcache holds the key/value cache state of autoregressive
// inference: the seed's InferenceParams. It caches one key and one value
// tensor per layer (host tensor.Tensor values shaped [B, ...], batch first),
// tracks the sequence offset, and reorders every cached tensor along the
// batch dimension for a given batch index order, as beam search needs.
//
// A stateful realtime step method keeps an *InferenceParams as its session
// state between chunks. The package is pure Go (no cgo).
package kvcache

import (
	"fmt"
	"slices"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// DefaultSequenceDim is the dimension holding sequence positions unless
// WithSequenceDim says otherwise: tensors are [B, S, ...].
const DefaultSequenceDim = 1

// InferenceParams caches key/value tensors per layer during inference. The
// cache keeps the tensors it is given (callers must not modify them
// afterwards) and never modifies them itself: Append and SwapKeyValue build
// new tensors, so a tensor obtained from Layer stays valid. It is safe for
// concurrent use.
type InferenceParams struct {
	maxBatch int
	maxSeq   int
	seqDim   int

	mu     sync.Mutex
	offset int
	layers map[int]entry
}

// entry is one layer's cached pair. kbuf and vbuf, when not nil, are memory
// the cache allocated and owns: key.Data and value.Data are their prefixes
// (with capacity cut to length), and Append may write past those prefixes.
// Bytes once written there never change, so earlier tensors stay valid.
type entry struct {
	key, value *tensor.Tensor
	kbuf, vbuf []byte
}

// Option configures New.
type Option func(*InferenceParams) error

// WithSequenceDim sets the dimension of the cached tensors that holds
// sequence positions (default 1, for [B, S, ...]; 2 for [B, heads, S, D]).
// It must be at least 1: dimension 0 is the batch.
func WithSequenceDim(dim int) Option {
	return func(p *InferenceParams) error {
		if dim < 1 {
			return fmt.Errorf("kvcache: sequence dimension %d, want ≥ 1 (dimension 0 is the batch)", dim)
		}
		p.seqDim = dim
		return nil
	}
}

// New returns an empty cache for at most maxBatchSize sequences of at most
// maxSequenceLength positions.
func New(maxBatchSize, maxSequenceLength int, opts ...Option) (*InferenceParams, error) {
	if maxBatchSize < 1 {
		return nil, fmt.Errorf("kvcache: max batch size %d, want ≥ 1", maxBatchSize)
	}
	if maxSequenceLength < 1 {
		return nil, fmt.Errorf("kvcache: max sequence length %d, want ≥ 1", maxSequenceLength)
	}
	p := &InferenceParams{
		maxBatch: maxBatchSize,
		maxSeq:   maxSequenceLength,
		seqDim:   DefaultSequenceDim,
		layers:   map[int]entry{},
	}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// MaxBatchSize returns the largest batch the cache accepts.
func (p *InferenceParams) MaxBatchSize() int { return p.maxBatch }

// MaxSequenceLength returns the most sequence positions the cache accepts.
func (p *InferenceParams) MaxSequenceLength() int { return p.maxSeq }

// SequenceDim returns the dimension that holds sequence positions.
func (p *InferenceParams) SequenceDim() int { return p.seqDim }

// SequenceOffset returns how many positions have been processed: the
// position of the next token (the seed's sequence_len_offset).
func (p *InferenceParams) SequenceOffset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offset
}

// Advance moves the sequence offset on by n positions, typically once per
// forward step after every layer has stored its keys and values. Going past
// the max sequence length is an error and leaves the offset unchanged.
func (p *InferenceParams) Advance(n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 0 {
		return fmt.Errorf("kvcache: advance by %d, want ≥ 0", n)
	}
	if p.offset+n > p.maxSeq {
		return fmt.Errorf("kvcache: advancing the sequence offset %d by %d passes the max sequence length %d", p.offset, n, p.maxSeq)
	}
	p.offset += n
	return nil
}

// Reset empties the cache and sets the sequence offset back to 0.
func (p *InferenceParams) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offset = 0
	p.layers = map[int]entry{}
}

// Layers returns the numbers of the cached layers, sorted.
func (p *InferenceParams) Layers() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.layers))
	for l := range p.layers {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// Layer returns the cached key and value of a layer.
func (p *InferenceParams) Layer(layer int) (key, value *tensor.Tensor, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.layers[layer]
	return e.key, e.value, ok
}

// BatchSize returns the batch size of the cached tensors, or 0 when nothing
// is cached.
func (p *InferenceParams) BatchSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batchLocked()
}

func (p *InferenceParams) batchLocked() int {
	for _, e := range p.layers {
		return int(e.key.Shape[0])
	}
	return 0
}

// SequenceLength returns how many positions a layer holds (0 when the
// layer is not cached).
func (p *InferenceParams) SequenceLength(layer int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.layers[layer]
	if !ok {
		return 0
	}
	return int(e.key.Shape[p.seqDim])
}

// check validates one key/value pair for a layer.
func (p *InferenceParams) check(layer int, key, value *tensor.Tensor) error {
	if layer < 0 {
		return fmt.Errorf("kvcache: layer %d, want ≥ 0", layer)
	}
	for _, kv := range []struct {
		name string
		t    *tensor.Tensor
	}{{"key", key}, {"value", value}} {
		if kv.t == nil {
			return fmt.Errorf("kvcache: layer %d: nil %s", layer, kv.name)
		}
		if err := kv.t.Check(); err != nil {
			return fmt.Errorf("kvcache: layer %d %s: %w", layer, kv.name, err)
		}
		if len(kv.t.Shape) <= p.seqDim {
			return fmt.Errorf("kvcache: layer %d %s has shape %v, want at least %d dimensions (batch first, sequence in dimension %d)", layer, kv.name, kv.t.Shape, p.seqDim+1, p.seqDim)
		}
	}
	if key.DType != value.DType {
		return fmt.Errorf("kvcache: layer %d: key is %s, value is %s", layer, key.DType, value.DType)
	}
	if key.Shape[0] != value.Shape[0] || key.Shape[p.seqDim] != value.Shape[p.seqDim] {
		return fmt.Errorf("kvcache: layer %d: key %v and value %v disagree on batch (dim 0) or sequence (dim %d)", layer, key.Shape, value.Shape, p.seqDim)
	}
	if b := key.Shape[0]; b < 1 || b > int64(p.maxBatch) {
		return fmt.Errorf("kvcache: layer %d: batch size %d, want 1..%d (max batch size)", layer, b, p.maxBatch)
	}
	if s := key.Shape[p.seqDim]; s > int64(p.maxSeq) {
		return fmt.Errorf("kvcache: layer %d: %d sequence positions exceed the max sequence length %d", layer, s, p.maxSeq)
	}
	return nil
}

// checkBatch requires batch to match the other cached layers.
func (p *InferenceParams) checkBatch(layer int, batch int64) error {
	for l, e := range p.layers {
		if l != layer && e.key.Shape[0] != batch {
			return fmt.Errorf("kvcache: layer %d has batch size %d, but layer %d holds %d", layer, batch, l, e.key.Shape[0])
		}
	}
	return nil
}

// Store caches a layer's key and value, replacing what the layer held.
// Both are shaped [B, ...] with the sequence in SequenceDim; they must agree
// on dtype, batch and sequence length, B must not exceed the max batch size
// nor differ from the other cached layers, and the sequence length must not
// exceed the max sequence length.
func (p *InferenceParams) Store(layer int, key, value *tensor.Tensor) error {
	if err := p.check(layer, key, value); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkBatch(layer, key.Shape[0]); err != nil {
		return err
	}
	p.layers[layer] = entry{key: key, value: value}
	return nil
}

// Append concatenates new keys and values onto a layer's cache along the
// sequence dimension (Store when the layer holds nothing yet). Every other
// dimension and the dtype must match what the layer holds, and the total
// must not exceed the max sequence length; on error the cache is unchanged.
//
// When everything before the sequence dimension has size 1 ([1, S, ...], or
// [1, 1, S, D] with WithSequenceDim(2)), positions are contiguous blocks and
// Append writes the new ones after the cached ones, in memory the cache
// owns and grows by doubling (never beyond the max sequence length): a
// decode costs O(new positions) per step. Otherwise (a batch or several
// heads before the sequence) every Append copies the layer into a new
// tensor, O(cached positions), as a contiguous [B, S, ...] layout requires.
// Either way, tensors obtained earlier from Layer keep their contents.
func (p *InferenceParams) Append(layer int, key, value *tensor.Tensor) error {
	if err := p.check(layer, key, value); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.layers[layer]
	if !ok {
		if err := p.checkBatch(layer, key.Shape[0]); err != nil {
			return err
		}
		p.layers[layer] = entry{key: key, value: value}
		return nil
	}
	if n, add := old.key.Shape[p.seqDim], key.Shape[p.seqDim]; n+add > int64(p.maxSeq) {
		return fmt.Errorf("kvcache: layer %d: appending %d positions to %d exceeds the max sequence length %d", layer, add, n, p.maxSeq)
	}
	if old.kbuf != nil && outerSize(key.Shape, p.seqDim) == 1 && outerSize(old.key.Shape, p.seqDim) == 1 {
		// [1, S, ...]: the sequence is outermost, so appending is adding
		// bytes at the end of memory the cache owns.
		if err := sameLayout(old.key, key, p.seqDim); err != nil {
			return fmt.Errorf("kvcache: layer %d key: %w", layer, err)
		}
		if err := sameLayout(old.value, value, p.seqDim); err != nil {
			return fmt.Errorf("kvcache: layer %d value: %w", layer, err)
		}
		k, kbuf := extend(old.key, old.kbuf, key, p.seqDim, p.maxSeq)
		v, vbuf := extend(old.value, old.vbuf, value, p.seqDim, p.maxSeq)
		p.layers[layer] = entry{key: k, value: v, kbuf: kbuf, vbuf: vbuf}
		return nil
	}
	k, err := concat(old.key, key, p.seqDim)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d key: %w", layer, err)
	}
	v, err := concat(old.value, value, p.seqDim)
	if err != nil {
		return fmt.Errorf("kvcache: layer %d value: %w", layer, err)
	}
	// The concatenation is fresh memory the cache owns; when the sequence is
	// outermost, later appends can go in place (the first one copies into
	// memory with room to grow).
	p.layers[layer] = entry{key: k, value: v, kbuf: k.Data, vbuf: v.Data}
	return nil
}

// outerSize is the number of elements before dimension dim: 1 when the
// tensor's sequence positions are contiguous blocks one after another.
func outerSize(shape []int64, dim int) int64 {
	n := int64(1)
	for _, x := range shape[:dim] {
		n *= x
	}
	return n
}

// extend appends b's data (one contiguous block per position, as outerSize
// 1 gives) to a, whose data is a prefix of buf. It writes in place when buf
// has room, and otherwise moves to memory twice the needed size, capped at
// maxSeq positions. It returns the new tensor and the buffer holding it.
func extend(a *tensor.Tensor, buf []byte, b *tensor.Tensor, dim, maxSeq int) (*tensor.Tensor, []byte) {
	n := len(a.Data) + len(b.Data)
	if cap(buf) < n {
		// Positions are the same size in a and b; size the new memory in
		// positions so that the cap never exceeds maxSeq of them.
		posBytes := len(b.Data) / int(max(b.Shape[dim], 1))
		want := n
		if posBytes > 0 {
			want = min(2*n, maxSeq*posBytes)
		}
		grown := make([]byte, len(a.Data), max(want, n))
		copy(grown, a.Data)
		buf = grown
	}
	buf = append(buf[:len(a.Data)], b.Data...)
	shape := slices.Clone(a.Shape)
	shape[dim] += b.Shape[dim]
	return &tensor.Tensor{DType: a.DType, Shape: shape, Data: buf[:n:n]}, buf
}

// sameLayout checks that b can be appended to a along dim.
func sameLayout(a, b *tensor.Tensor, dim int) error {
	if a.DType != b.DType {
		return fmt.Errorf("cached %s, appending %s", a.DType, b.DType)
	}
	if len(a.Shape) != len(b.Shape) {
		return fmt.Errorf("cached shape %v, appending %v", a.Shape, b.Shape)
	}
	for d := range a.Shape {
		if d != dim && a.Shape[d] != b.Shape[d] {
			return fmt.Errorf("cached shape %v, appending %v: dimension %d differs", a.Shape, b.Shape, d)
		}
	}
	return nil
}

// concat joins a and b along dim; all other dimensions must match.
func concat(a, b *tensor.Tensor, dim int) (*tensor.Tensor, error) {
	if err := sameLayout(a, b, dim); err != nil {
		return nil, err
	}
	outer := outerSize(a.Shape, dim)
	inner := int64(a.DType.Size())
	for _, n := range a.Shape[dim+1:] {
		inner *= n
	}
	ca, cb := a.Shape[dim]*inner, b.Shape[dim]*inner
	data := make([]byte, 0, len(a.Data)+len(b.Data))
	for o := range outer {
		data = append(data, a.Data[o*ca:(o+1)*ca]...)
		data = append(data, b.Data[o*cb:(o+1)*cb]...)
	}
	shape := slices.Clone(a.Shape)
	shape[dim] += b.Shape[dim]
	return &tensor.Tensor{DType: a.DType, Shape: shape, Data: data}, nil
}

// SwapKeyValue reorders every cached key and value along the batch
// dimension: row i of the result is row batchIdx[i] of the cache (the
// seed's swap_key_value_dict, as beam search needs after picking beams).
// Indexes may repeat. batchIdx must have one entry per cached batch row,
// each in [0, B); swapping an empty cache is an error. On error nothing
// changes.
func (p *InferenceParams) SwapKeyValue(batchIdx []int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.layers) == 0 {
		return fmt.Errorf("kvcache: nothing cached to swap")
	}
	b := p.batchLocked()
	if len(batchIdx) != b {
		return fmt.Errorf("kvcache: %d batch indexes for a cached batch of %d; want one per row", len(batchIdx), b)
	}
	for i, x := range batchIdx {
		if x < 0 || x >= b {
			return fmt.Errorf("kvcache: batch index %d (position %d) is out of range [0, %d)", x, i, b)
		}
	}
	next := make(map[int]entry, len(p.layers))
	for l, e := range p.layers {
		k, v := gather(e.key, batchIdx), gather(e.value, batchIdx)
		next[l] = entry{key: k, value: v, kbuf: k.Data, vbuf: v.Data}
	}
	p.layers = next
	return nil
}

// gather returns the rows idx of t along dimension 0.
func gather(t *tensor.Tensor, idx []int) *tensor.Tensor {
	row := len(t.Data) / int(t.Shape[0])
	data := make([]byte, 0, row*len(idx))
	for _, i := range idx {
		data = append(data, t.Data[i*row:(i+1)*row]...)
	}
	shape := slices.Clone(t.Shape)
	shape[0] = int64(len(idx))
	return &tensor.Tensor{DType: t.DType, Shape: shape, Data: data}
}
