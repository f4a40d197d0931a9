package dist

import (
	"context"

	"github.com/worldfoundry/wfgen/runtime/batch"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Span returns the items [lo, hi) of n that rank runs out of size ranks.
// The items are cut into chunks of unit (the last one may be shorter) and
// every rank gets a contiguous run of whole chunks, as many as the others
// or one more (the first ranks). With unit set to a batch run's max batch
// size, every batch of a sharded run is one that the unsharded run makes
// too, padding included, so their outputs are bit-identical; ranks beyond
// the number of chunks get nothing. A unit below 1 counts as 1.
func Span(n, unit, rank, size int) (lo, hi int) {
	if n <= 0 || size < 1 || rank < 0 || rank >= size {
		return 0, 0
	}
	unit = max(unit, 1)
	chunks := (n + unit - 1) / unit
	q, rem := chunks/size, chunks%size
	first := rank*q + min(rank, rem)
	last := first + q
	if rank < rem {
		last++
	}
	return min(first*unit, n), min(last*unit, n)
}

// ShardOption configures Sharded.
type ShardOption func(*sharder)

// OnEveryRank gathers a sharded run's outputs on every rank (all_gather)
// instead of rank 0 only.
func OnEveryRank() ShardOption { return func(s *sharder) { s.everyRank = true } }

// Sharded returns the batch option that spreads a batch run over g's ranks:
// every rank calls the run (batch.Run, a client's RunBatch, a generated
// <Task>Batch method) with the same items, runs the contiguous share Span
// gives it — bounded, padded and retried on out-of-memory on its own
// device as usual — and the outputs are gathered in the original order on
// rank 0, where the run returns all of them; on the other ranks it returns
// nil outputs (OnEveryRank returns them everywhere). A failure of any
// rank's share is the run's error on the receiving ranks. A nil g leaves
// the run unsharded, so a program runs the same outside a distributed job.
func Sharded(g *Group, opts ...ShardOption) batch.Option {
	if g == nil {
		return batch.WithSharding(nil)
	}
	s := &sharder{g: g}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return batch.WithSharding(s)
}

// sharder is a batch.Sharder over a Group.
type sharder struct {
	g         *Group
	everyRank bool
}

func (s *sharder) Span(n, unit int) (lo, hi int) { return Span(n, unit, s.g.Rank(), s.g.Size()) }

func (s *sharder) Exchange(ctx context.Context, share []byte) ([][]byte, error) {
	t := &tensor.Tensor{DType: tensor.Uint8, Shape: []int64{int64(len(share))}, Data: share}
	var ts []*tensor.Tensor
	var err error
	if s.everyRank {
		ts, err = s.g.AllGather(ctx, t)
	} else {
		ts, err = s.g.Gather(ctx, t, 0)
	}
	if err != nil || ts == nil {
		return nil, err
	}
	out := make([][]byte, len(ts))
	for i, x := range ts {
		out[i] = x.Data
	}
	return out, nil
}
