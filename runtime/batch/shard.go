package batch

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"slices"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Sharder spreads one Run over the ranks of a distributed job
// (WithSharding): every rank calls Run with the same items and options;
// each runs the contiguous share Span gives it — in batches bounded,
// padded and retried on out-of-memory as an unsharded run's — and the
// shares' outputs are gathered in the original order on the ranks that
// receive them. Package runtime/dist implements it over a process group
// (dist.Sharded).
type Sharder interface {
	// Span returns the items [lo, hi) of n that this rank runs. The ranks'
	// spans tile [0, n) in rank order. unit is the run's max batch size:
	// spans that start at multiples of it make every batch of a sharded run
	// one that the unsharded run also makes.
	Span(n, unit int) (lo, hi int)
	// Exchange sends this rank's encoded share to the receiving ranks and
	// returns every rank's share, in rank order, on those, and nil on the
	// others. Every rank calls it once per Run, also when its share failed,
	// so that a failure reaches the receivers instead of leaving them
	// waiting.
	Exchange(ctx context.Context, share []byte) ([][]byte, error)
}

func init() {
	// The engine's values (engine.Module.Call outputs, which the client's
	// RunBatch returns per item) inside interfaces.
	gob.Register(&tensor.Tensor{})
	gob.Register([]any(nil))
	gob.Register(map[string]any(nil))
}

// shareHeader opens an encoded share; the outputs of the items that did not
// fail follow, one gob value each, in item order.
type shareHeader struct {
	// N is the number of items of the whole run; [Lo, Hi) the share's.
	N, Lo, Hi int
	// Err is the failure of the whole share, "" if none.
	Err string
	// Failed are the indexes (into the run's items) of items that failed
	// on their own (WithPerItemErrors), Messages their errors.
	Failed   []int
	Messages []string
}

// runSharded runs this rank's share and exchanges the shares. Outputs cross
// ranks with encoding/gob: Out must be encodable (exported fields; the
// engine's values are registered above). On a rank that does not receive
// the shares, Run returns nil outputs and only this rank's own error.
func runSharded[In, Out any](ctx context.Context, items []In, forward Forward[In, Out], cfg Config) ([]Out, error) {
	n := len(items)
	lo, hi := cfg.Sharder.Span(n, cfg.MaxBatchSize)
	if lo < 0 || lo > hi || hi > n {
		return nil, fmt.Errorf("batch: sharder gave items [%d, %d) of %d", lo, hi, n)
	}
	mine, err := runAuto(ctx, items[lo:hi:hi], lo, n, forward, cfg)
	var itemErrs ItemErrors
	if err != nil && !errors.As(err, &itemErrs) && (ctx.Err() != nil ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Stopped: no exchange (it could wait for the other ranks' work).
		// They fail at the group's timeout, or sooner when this process
		// leaves the group.
		return nil, err
	}
	share := encodeShare(shareHeader{N: n, Lo: lo, Hi: hi}, mine, itemErrs, err)
	shares, xerr := cfg.Sharder.Exchange(ctx, share)
	if xerr != nil {
		if err != nil && itemErrs == nil {
			return nil, fmt.Errorf("%w (and gathering the shares failed: %v)", err, xerr)
		}
		return nil, fmt.Errorf("batch: gathering the shares of %d items: %w", n, xerr)
	}
	if err != nil && itemErrs == nil {
		return nil, err
	}
	if shares == nil {
		if itemErrs != nil {
			return nil, itemErrs
		}
		return nil, nil
	}
	return decodeShares(shares, n, lo, hi, mine, itemErrs)
}

// encodeShare encodes a share. An output that cannot be encoded turns into
// a failure of the share, which the receivers report.
func encodeShare[Out any](h shareHeader, outs []Out, itemErrs ItemErrors, runErr error) []byte {
	if runErr != nil && itemErrs == nil {
		h.Err = runErr.Error()
		return encodeHeader(h)
	}
	failed := make(map[int]bool, len(itemErrs))
	for _, ie := range itemErrs {
		h.Failed = append(h.Failed, ie.Index)
		h.Messages = append(h.Messages, ie.Err.Error())
		failed[ie.Index] = true
	}
	var b bytes.Buffer
	enc := gob.NewEncoder(&b)
	err := enc.Encode(&h)
	for i := range outs {
		if err != nil {
			break
		}
		if !failed[h.Lo+i] {
			if err = enc.Encode(&outs[i]); err != nil {
				err = fmt.Errorf("item %d: %w", h.Lo+i, err)
			}
		}
	}
	if err != nil {
		return encodeHeader(shareHeader{N: h.N, Lo: h.Lo, Hi: h.Hi, Err: "encoding the outputs: " + err.Error()})
	}
	return b.Bytes()
}

func encodeHeader(h shareHeader) []byte {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&h); err != nil {
		panic(err) // a shareHeader always encodes
	}
	return b.Bytes()
}

// decodeShares puts the shares' outputs together, checking that they tile
// the run's items. This rank's own share, items [lo, hi), is taken from
// mine and local (its item errors keep their error values) rather than
// decoded.
func decodeShares[Out any](shares [][]byte, n, lo, hi int, mine []Out, local ItemErrors) ([]Out, error) {
	out := make([]Out, n)
	copy(out[lo:hi], mine)
	itemErrs := slices.Clone(local)
	next := 0
	for r, b := range shares {
		dec := gob.NewDecoder(bytes.NewReader(b))
		var h shareHeader
		if err := dec.Decode(&h); err != nil {
			return nil, fmt.Errorf("batch: share of rank %d: %w", r, err)
		}
		if h.N != n || h.Lo != next || h.Hi < h.Lo || h.Hi > n {
			return nil, fmt.Errorf("batch: rank %d ran items [%d, %d) of %d, expected a share of the %d items starting at %d: every rank must run the same items",
				r, h.Lo, h.Hi, h.N, n, next)
		}
		next = h.Hi
		if h.Err != "" {
			return nil, fmt.Errorf("batch: rank %d (items [%d, %d) of %d): %s", r, h.Lo, h.Hi, n, h.Err)
		}
		if h.Lo == h.Hi || h.Lo == lo && h.Hi == hi {
			continue // empty, or this rank's own
		}
		failed := make(map[int]bool, len(h.Failed))
		for i, idx := range h.Failed {
			failed[idx] = true
			itemErrs = append(itemErrs, ItemError{Index: idx, Err: fmt.Errorf("rank %d: %s", r, h.Messages[i])})
		}
		for i := h.Lo; i < h.Hi; i++ {
			if failed[i] {
				continue
			}
			if err := dec.Decode(&out[i]); err != nil {
				return nil, fmt.Errorf("batch: share of rank %d, item %d: %w", r, i, err)
			}
		}
	}
	if next != n {
		return nil, fmt.Errorf("batch: the shares cover items [0, %d) of %d", next, n)
	}
	if len(itemErrs) > 0 {
		slices.SortFunc(itemErrs, func(a, b ItemError) int { return a.Index - b.Index })
		return out, itemErrs
	}
	return out, nil
}
