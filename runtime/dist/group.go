package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Group is a joined process group. Its collectives must be called by every
// rank in the same order; a Group is safe for concurrent use, but
// collectives from several goroutines run one at a time, in an order the
// ranks would not agree on, so call them from one goroutine.
type Group struct {
	comm Comm
	cfg  Config

	mu     sync.Mutex // held for a whole collective
	seq    int64      // collectives started
	closed bool

	errMu  sync.Mutex // held briefly, so that Err does not wait for a collective
	failed error      // the first failure, wrapping ErrGroupFailed
}

// Rank returns this worker's rank, 0 <= Rank() < Size().
func (g *Group) Rank() int { return g.cfg.Rank }

// Size returns the number of ranks.
func (g *Group) Size() int { return g.cfg.Size }

// Backend returns the backend in use (Gloo or NCCL).
func (g *Group) Backend() string { return g.cfg.Backend }

// Device returns where collectives run ("cpu", "cuda:N").
func (g *Group) Device() string { return g.cfg.Device }

// Timeout returns the bound of every collective.
func (g *Group) Timeout() time.Duration { return g.cfg.Timeout }

// Err returns the failure that made the group unusable (matching
// ErrGroupFailed), or nil.
func (g *Group) Err() error {
	g.errMu.Lock()
	defer g.errMu.Unlock()
	return g.failed
}

// Collective kinds, as exchanged in headers.
const (
	kindAllReduce = 1 + iota
	kindBroadcast
	kindAllGather
	kindGather
	kindBarrier
)

var kindNames = map[int64]string{
	kindAllReduce: "all_reduce", kindBroadcast: "broadcast", kindAllGather: "all_gather",
	kindGather: "gather", kindBarrier: "barrier",
}

// Header layout: int64 words, little-endian.
const (
	hMagic = iota
	hSeq
	hKind
	hArg    // reduce op or root rank
	hStatus // 0 ok, 1 this rank's argument is invalid
	hDType  // 1 + index in tensor.DTypes; 0 no tensor
	hNDim
	hBytes
	hDims
	maxDims   = 64
	headerLen = hDims + maxDims
	magic     = 0x7766676400000001 // "wfgd", version 1
)

type header []int64

func (h header) bytes() []byte {
	b := make([]byte, 8*len(h))
	for i, v := range h {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

func (h header) describe() string {
	name := kindNames[h[hKind]]
	if name == "" {
		name = fmt.Sprintf("collective %d", h[hKind])
	}
	s := fmt.Sprintf("%s #%d", name, h[hSeq])
	switch h[hKind] {
	case kindAllReduce:
		s += " (" + ReduceOp(h[hArg]).String() + ")"
	case kindBroadcast, kindGather:
		s += fmt.Sprintf(" (root %d)", h[hArg])
	}
	return s
}

// tensor returns the dtype and shape a header carries.
func (h header) tensor() (tensor.DType, []int64) {
	d := h[hDType]
	if d < 1 || int(d) > len(tensor.DTypes) {
		return "", nil
	}
	n := h[hNDim]
	return tensor.DTypes[d-1], append([]int64(nil), h[hDims:hDims+n]...)
}

func describeTensor(dt tensor.DType, shape []int64) string { return fmt.Sprintf("%s%v", dt, shape) }

// newHeader describes this rank's call; a tensor that cannot be sent marks
// the header invalid (and is returned as the local problem).
func (g *Group) newHeader(kind int64, arg int64, t *tensor.Tensor, needTensor bool) (header, error) {
	h := make(header, headerLen)
	h[hMagic], h[hSeq], h[hKind], h[hArg] = magic, g.seq, kind, arg
	var problem error
	switch {
	case t == nil && needTensor:
		problem = errors.New("nil tensor")
	case t == nil:
	case t.Check() != nil:
		problem = t.Check()
	case len(t.Shape) > maxDims:
		problem = fmt.Errorf("tensor has %d dimensions; at most %d can be sent", len(t.Shape), maxDims)
	default:
		for i, d := range tensor.DTypes {
			if d == t.DType {
				h[hDType] = int64(i + 1)
			}
		}
		h[hNDim], h[hBytes] = int64(len(t.Shape)), int64(len(t.Data))
		copy(h[hDims:], t.Shape)
	}
	if problem != nil {
		h[hStatus] = 1
	}
	return h, problem
}

// begin starts a collective: the group must be open and sound.
func (g *Group) begin(kind int64) error {
	if g.closed {
		return fmt.Errorf("dist: %s: %w", kindNames[kind], ErrClosed)
	}
	if err := g.Err(); err != nil {
		return fmt.Errorf("dist: %s: %w", kindNames[kind], err)
	}
	g.seq++
	return nil
}

// fail records the first failure of a data-moving call and returns it.
func (g *Group) fail(what string, err error) error {
	e := fmt.Errorf("dist: %s: %w: %w", what, ErrGroupFailed, err)
	g.errMu.Lock()
	defer g.errMu.Unlock()
	if g.failed == nil {
		g.failed = e
	}
	return e
}

// exchange all-gathers the headers and checks that every rank called the
// same collective with a valid argument. Every rank sees every header, so
// all of them reach the same verdict and the group stays in step.
func (g *Group) exchange(ctx context.Context, h header, local error) ([]header, error) {
	what := h.describe()
	in := h.bytes()
	all := make([]byte, len(in)*g.cfg.Size)
	if err := g.comm.AllGather(ctx, in, all); err != nil {
		return nil, g.fail(what, err)
	}
	hs := make([]header, g.cfg.Size)
	for r := range hs {
		hs[r] = make(header, headerLen)
		for i := range hs[r] {
			hs[r][i] = int64(binary.LittleEndian.Uint64(all[8*(r*headerLen+i):]))
		}
	}
	for r, o := range hs {
		if o[hMagic] != magic || o[hSeq] != h[hSeq] || o[hKind] != h[hKind] || o[hArg] != h[hArg] {
			if o[hMagic] != magic {
				return nil, g.fail(what, fmt.Errorf("rank %d sent a malformed header", r))
			}
			return nil, fmt.Errorf("dist: %s: rank %d called %s: every rank must call the same collectives in the same order", what, r, o.describe())
		}
	}
	for r, o := range hs {
		if o[hStatus] != 0 {
			if r == g.cfg.Rank {
				return nil, fmt.Errorf("dist: %s: %w", what, local)
			}
			return nil, fmt.Errorf("dist: %s: rank %d gave an invalid tensor", what, r)
		}
	}
	return hs, nil
}

// AllReduce replaces t's elements, on every rank, by their reduction over
// the ranks. Every rank passes a tensor of the same dtype and shape.
func (g *Group) AllReduce(ctx context.Context, t *tensor.Tensor, op ReduceOp) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(kindAllReduce); err != nil {
		return err
	}
	h, local := g.newHeader(kindAllReduce, int64(op), t, true)
	if local == nil && (op < Sum || op > Max) {
		local, h[hStatus] = fmt.Errorf("unknown reduce op %d", int(op)), 1
	}
	hs, err := g.exchange(ctx, h, local)
	if err != nil {
		return err
	}
	dt, shape := hs[0].tensor()
	for r, o := range hs {
		odt, oshape := o.tensor()
		if odt != dt || !equalShape(oshape, shape) {
			return fmt.Errorf("dist: %s: rank %d gave %s, rank 0 %s: all ranks must give the same dtype and shape",
				h.describe(), r, describeTensor(odt, oshape), describeTensor(dt, shape))
		}
	}
	if len(t.Data) == 0 {
		return nil
	}
	if err := g.comm.AllReduce(ctx, t.Data, t.DType, op); err != nil {
		return g.fail(h.describe(), err)
	}
	return nil
}

// Broadcast returns root's tensor on every rank: on root, t itself; on the
// other ranks a new tensor (their t is not used and may be nil).
func (g *Group) Broadcast(ctx context.Context, t *tensor.Tensor, root int) (*tensor.Tensor, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(kindBroadcast); err != nil {
		return nil, err
	}
	mine := g.cfg.Rank == root
	var send *tensor.Tensor
	if mine {
		send = t
	}
	h, local := g.newHeader(kindBroadcast, int64(root), send, mine)
	if local == nil && (root < 0 || root >= g.cfg.Size) {
		local, h[hStatus] = fmt.Errorf("root %d is outside the group of %d", root, g.cfg.Size), 1
	}
	hs, err := g.exchange(ctx, h, local)
	if err != nil {
		return nil, err
	}
	dt, shape := hs[root].tensor()
	n := hs[root][hBytes]
	// The engine writes the root's bytes back on the root too: give it a
	// copy rather than the caller's tensor.
	buf := make([]byte, n)
	if mine {
		copy(buf, t.Data)
	}
	if n > 0 {
		if err := g.comm.Broadcast(ctx, buf, root); err != nil {
			return nil, g.fail(h.describe(), err)
		}
	}
	if mine {
		return t, nil
	}
	return &tensor.Tensor{DType: dt, Shape: shape, Data: buf}, nil
}

// AllGather returns every rank's tensor, in rank order, on every rank. The
// tensors may differ in dtype and shape: each is padded to the largest for
// the transfer.
func (g *Group) AllGather(ctx context.Context, t *tensor.Tensor) ([]*tensor.Tensor, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(kindAllGather); err != nil {
		return nil, err
	}
	return g.gather(ctx, kindAllGather, t, -1)
}

// Gather returns every rank's tensor, in rank order, on root, and nil on
// the other ranks. The tensors may differ in dtype and shape.
func (g *Group) Gather(ctx context.Context, t *tensor.Tensor, root int) ([]*tensor.Tensor, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(kindGather); err != nil {
		return nil, err
	}
	return g.gather(ctx, kindGather, t, root)
}

func (g *Group) gather(ctx context.Context, kind int64, t *tensor.Tensor, root int) ([]*tensor.Tensor, error) {
	h, local := g.newHeader(kind, int64(root), t, true)
	if local == nil && kind == kindGather && (root < 0 || root >= g.cfg.Size) {
		local, h[hStatus] = fmt.Errorf("root %d is outside the group of %d", root, g.cfg.Size), 1
	}
	hs, err := g.exchange(ctx, h, local)
	if err != nil {
		return nil, err
	}
	var width int64
	for _, o := range hs {
		width = max(width, o[hBytes])
	}
	receive := kind == kindAllGather || g.cfg.Rank == root
	var all []byte
	if receive {
		all = make([]byte, width*int64(g.cfg.Size))
	}
	if width > 0 {
		in := t.Data
		if int64(len(in)) < width {
			in = make([]byte, width)
			copy(in, t.Data)
		}
		if kind == kindAllGather {
			err = g.comm.AllGather(ctx, in, all)
		} else {
			err = g.comm.Gather(ctx, in, all, root)
		}
		if err != nil {
			return nil, g.fail(h.describe(), err)
		}
	}
	if !receive {
		return nil, nil
	}
	out := make([]*tensor.Tensor, g.cfg.Size)
	for r, o := range hs {
		dt, shape := o.tensor()
		lo := int64(r) * width
		hi := lo + o[hBytes]
		out[r] = &tensor.Tensor{DType: dt, Shape: shape, Data: all[lo:hi:hi]}
	}
	return out, nil
}

// Barrier returns when every rank has called it.
func (g *Group) Barrier(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.begin(kindBarrier); err != nil {
		return err
	}
	h, _ := g.newHeader(kindBarrier, 0, nil, false)
	_, err := g.exchange(ctx, h, nil)
	return err
}

// Close leaves the group. A group that failed is released in the
// background: the engine may still be waiting, up to the timeout, for a
// collective that will never complete. Later collectives return ErrClosed.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	if g.Err() != nil {
		go g.comm.Close()
		return nil
	}
	return g.comm.Close()
}

func equalShape(a, b []int64) bool {
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
