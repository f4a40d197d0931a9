// Package batch runs per-item inference in bounded, optionally shape-stable
// batches, with out-of-memory recovery that retries only the failed slice.
//
// Run is engine-independent: forward is any function that maps a batch of
// inputs to one output per input, in order. The package is pure Go and does
// not link libtorch. See docs/batching.md for the full semantics.
package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Forward maps a batch of inputs to exactly one output per input, in order.
// It must not keep the batch slice after returning: when padding is on, Run
// builds the padded batch in a fresh slice, otherwise the slice aliases the
// caller's items (with its capacity cut so append cannot overwrite them).
type Forward[In, Out any] func(ctx context.Context, batch []In) ([]Out, error)

// Stats are the running totals of one Run, passed to the WithStats hook.
type Stats struct {
	// Items is the number of items given to Run.
	Items int
	// Done is the number of items whose output is final (successful).
	Done int
	// Failed is the number of items that failed on their own (WithPerItemErrors).
	Failed int
	// Calls is the number of forward calls made, successful or not.
	Calls int
	// Batches is the number of forward calls that succeeded.
	Batches int
	// Retries is the number of out-of-memory failures after which the failed
	// slice was halved and run again.
	Retries int
	// Bisections is the number of non-memory failures after which the failed
	// slice was halved to find the failing items (WithPerItemErrors).
	Bisections int
	// Padded is the number of padding items sent to forward, over all calls
	// (failed ones included): the compute spent on shape stability.
	Padded int
	// Lanes is the number of lanes the run is making calls on (see
	// WithLanes): with WithAutoLanes, while Run measures, the lanes of the
	// part running now (one and more in turn), then the number it chose.
	Lanes int
}

// Call describes the forward call in progress. Run puts it in the context it
// passes to forward; read it with CallFrom.
type Call struct {
	// Offset is the index in Run's items of the batch's first item.
	Offset int
	// Items is the number of real items in the batch.
	Items int
	// Size is the batch length forward receives: Items plus padding.
	Size int
	// PersistentKey is the WithPersistentForward key, or "".
	PersistentKey string
	// Lane is the lane making the call, 0 ≤ Lane < Config.Lanes: calls of
	// one lane never overlap, so forward may keep a buffer per lane.
	Lane int
}

// Persistent reports whether the forward was declared persistent.
func (c Call) Persistent() bool { return c.PersistentKey != "" }

type callKey struct{}

// callContext carries a Call for one forward call. It is a single
// allocation per call, where context.WithValue would box the Call too.
type callContext struct {
	context.Context
	call Call
}

// Value returns the Call for the package's key and defers to the parent
// context otherwise.
func (c *callContext) Value(key any) any {
	if key == (callKey{}) {
		return c.call
	}
	return c.Context.Value(key)
}

// CallFrom returns the Call that Run attached to a forward call's context.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

// ItemError is the failure of one item under WithPerItemErrors.
type ItemError struct {
	// Index is the item's position in Run's items.
	Index int
	// Err is the error forward returned for a batch of that item alone.
	Err error
}

// Error names the item and its error.
func (e ItemError) Error() string { return fmt.Sprintf("item %d: %v", e.Index, e.Err) }

// Unwrap returns the forward's error.
func (e ItemError) Unwrap() error { return e.Err }

// ItemErrors lists the items that failed on their own, by ascending index.
// errors.Is and errors.As look through every item's error.
type ItemErrors []ItemError

// Error counts the failed items and lists the first eight.
func (e ItemErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch: %d item(s) failed", len(e))
	for i, ie := range e {
		if i == 8 {
			fmt.Fprintf(&b, "; and %d more", len(e)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(ie.Error())
	}
	return b.String()
}

// Unwrap returns every item's error.
func (e ItemErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, ie := range e {
		out[i] = ie.Err
	}
	return out
}

// Indexes returns the failed items' positions.
func (e ItemErrors) Indexes() []int {
	out := make([]int, len(e))
	for i, ie := range e {
		out[i] = ie.Index
	}
	return out
}

type span struct{ lo, hi int }

// Run calls forward on consecutive batches of items and returns one output
// per item, in input order.
//
//   - Batches hold at most the max batch size of real items.
//   - When forward fails with an error matching engine.ErrOutOfMemory, only
//     that slice is retried, split in two halves (the first half gets the
//     extra item of an odd slice), depth first; slices that succeeded are
//     never run again, and later batches start again at the max size. An
//     out-of-memory failure of a single real item, or of a batch whose
//     halves would be sent at its size too (WithInvariant), is returned as
//     is: the error value forward returned, not wrapped.
//   - With pad sizes, a batch is padded to the next size by repeating its
//     final real item (also for the halves of a retried slice), and the
//     padding's outputs are dropped. With WithInvariant every batch is
//     padded to the smallest size that gives the max batch size's bits
//     (the max, without WithEquivalentSizes).
//   - forward must return exactly one output per item it was given (padding
//     included); any other count is an error naming both counts.
//   - ctx is checked before every forward call; once it is done Run returns
//     an error matching ctx.Err().
//   - Any other forward error stops Run with that error, wrapped with the
//     item range (errors.Is still matches it) — unless WithPerItemErrors is
//     given: then the failed slice is bisected until single items fail, those
//     items get their own ItemError, and every other item's output is
//     returned together with an ItemErrors error. Bisection costs, for each
//     failing item, about 2·log2(batch size) extra forward calls (each level
//     re-runs both halves of the slice that failed); k failing items in one
//     batch cost at most 2·k·log2(batch size).
//
// On any error other than ItemErrors the outputs are nil: nothing
// half-done is returned.
//
// With WithLanes(n), up to n of these loops run at once over contiguous
// parts of the items (see WithLanes): the same batches, the same outputs.
//
// With WithSharding, Run runs only this rank's share of the items and
// gathers the outputs of every rank (see Sharder).
func Run[In, Out any](ctx context.Context, items []In, forward Forward[In, Out], opts ...Option) ([]Out, error) {
	cfg, err := NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	if forward == nil {
		return nil, errors.New("batch: nil forward")
	}
	if cfg.Sharder != nil {
		return runSharded(ctx, items, forward, cfg)
	}
	return runAuto(ctx, items, 0, len(items), forward, cfg)
}

// runLanes is run over cfg.Lanes contiguous parts of items at once, each a
// whole number of max-size batches (the last part ends with the short
// batch, if any), with the outputs, item errors and stats put together as
// one run's.
func runLanes[In, Out any](ctx context.Context, items []In, base, total int, forward Forward[In, Out], cfg Config) ([]Out, error) {
	chunks := (len(items) + cfg.MaxBatchSize - 1) / cfg.MaxBatchSize
	k := min(cfg.Lanes, chunks)
	if k <= 1 {
		return run(ctx, items, base, total, forward, cfg, 0)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	out := make([]Out, len(items))
	errs := make([]error, k)
	var mu sync.Mutex
	// Lane l runs items [bound(l), bound(l+1)). Every lane's item count is
	// in stats before any lane starts: the stats hook sums them all.
	bound := func(l int) int { return min(l*chunks/k*cfg.MaxBatchSize, len(items)) }
	stats := make([]Stats, k)
	for lane := range k {
		stats[lane].Items = bound(lane+1) - bound(lane)
	}
	var wg sync.WaitGroup
	for lane := range k {
		lo, hi := bound(lane), bound(lane+1)
		lcfg := cfg
		if cfg.OnStats != nil {
			lcfg.OnStats = func(s Stats) {
				mu.Lock()
				defer mu.Unlock()
				stats[lane] = s
				cfg.OnStats(sumStats(stats))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := run(lctx, items[lo:hi:hi], base+lo, total, forward, lcfg, lane)
			copy(out[lo:hi], res)
			var itemErrs ItemErrors
			if err != nil && !errors.As(err, &itemErrs) {
				stop() // the run has failed: the other lanes stop too
			}
			errs[lane] = err
		}()
	}
	wg.Wait()
	var itemErrs ItemErrors
	var failed error
	for _, err := range errs {
		var ie ItemErrors
		switch {
		case err == nil:
		case errors.As(err, &ie):
			itemErrs = append(itemErrs, ie...)
		case failed == nil, ctx.Err() == nil && errors.Is(failed, context.Canceled) && !errors.Is(err, context.Canceled):
			// The first failure, unless it is a lane that another lane's
			// failure stopped.
			failed = err
		}
	}
	if failed != nil {
		return nil, failed
	}
	if len(itemErrs) > 0 {
		return out, itemErrs
	}
	return out, nil
}

// sumStats adds up the stats of the lanes.
func sumStats(lanes []Stats) Stats {
	var t Stats
	for _, s := range lanes {
		t.Items += s.Items
		t.Done += s.Done
		t.Failed += s.Failed
		t.Calls += s.Calls
		t.Batches += s.Batches
		t.Retries += s.Retries
		t.Bisections += s.Bisections
		t.Padded += s.Padded
	}
	t.Lanes = len(lanes)
	return t
}

// run is Run without sharding over items, which start at index base of the
// caller's total items: batch offsets, item errors and messages give
// indexes into those.
func run[In, Out any](ctx context.Context, items []In, base, total int, forward Forward[In, Out], cfg Config, lane int) ([]Out, error) {
	out := make([]Out, len(items))
	st := Stats{Items: len(items), Lanes: 1}
	report := func() {
		if cfg.OnStats != nil {
			cfg.OnStats(st)
		}
	}

	// pending is a stack: the next slice to run is at the end. Batches are
	// aligned to the start: all are full but the last.
	chunks := (len(items) + cfg.MaxBatchSize - 1) / cfg.MaxBatchSize
	pending := make([]span, 0, chunks+16)
	for i := chunks - 1; i >= 0; i-- {
		lo := i * cfg.MaxBatchSize
		pending = append(pending, span{lo, min(lo+cfg.MaxBatchSize, len(items))})
	}

	var itemErrs ItemErrors
	var slab []callContext
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("batch: stopped after %d of %d items: %w", st.Done, st.Items, err)
		}
		s := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		n := s.hi - s.lo
		size := cfg.PaddedSize(n)

		in := items[s.lo:s.hi:s.hi]
		if size > n {
			// A fresh slice per call: forward may keep what it was given
			// only until it returns, but a pooled buffer would still make a
			// misbehaving forward see its input change.
			padBuf := make([]In, size)
			copy(padBuf, in)
			last := in[n-1]
			for i := n; i < size; i++ {
				padBuf[i] = last
			}
			in = padBuf
		}

		// Each call gets its own context value (a forward may keep it), cut
		// from a slab so that a call does not cost an allocation.
		if len(slab) == 0 {
			slab = make([]callContext, max(len(pending)+1, 8))
		}
		cctx := &slab[0]
		slab = slab[1:]
		*cctx = callContext{ctx, Call{Offset: base + s.lo, Items: n, Size: size, PersistentKey: cfg.PersistentKey, Lane: lane}}
		res, ferr := forward(cctx, in)
		st.Calls++
		st.Padded += size - n

		if ferr == nil {
			if len(res) != size {
				report()
				return nil, countError(span{base + s.lo, base + s.hi}, n, size, len(res))
			}
			copy(out[s.lo:s.hi], res[:n])
			st.Batches++
			st.Done += n
			report()
			continue
		}

		switch {
		case errors.Is(ferr, engine.ErrOutOfMemory):
			if n == 1 || cfg.Invariant && cfg.PaddedSize((n+1)/2) == size {
				// Alone, or halves that would be sent at this size too
				// (invariant mode): halving cannot help.
				report()
				return nil, ferr
			}
			st.Retries++
			pending = pushHalves(pending, s)
		case ctx.Err() != nil || errors.Is(ferr, context.Canceled) || errors.Is(ferr, context.DeadlineExceeded):
			report()
			return nil, fmt.Errorf("batch: items [%d, %d) of %d: %w", base+s.lo, base+s.hi, total, ferr)
		case !cfg.PerItemErrors:
			report()
			return nil, fmt.Errorf("batch: items [%d, %d) of %d: %w", base+s.lo, base+s.hi, total, ferr)
		case n == 1:
			itemErrs = append(itemErrs, ItemError{Index: base + s.lo, Err: ferr})
			st.Failed++
		default:
			st.Bisections++
			pending = pushHalves(pending, s)
		}
		report()
	}
	if len(itemErrs) > 0 {
		return out, itemErrs
	}
	return out, nil
}

// pushHalves pushes the two halves of s so that the first half runs next.
func pushHalves(pending []span, s span) []span {
	mid := s.lo + (s.hi-s.lo+1)/2
	return append(pending, span{mid, s.hi}, span{s.lo, mid})
}

func countError(s span, n, size, got int) error {
	if size > n {
		return fmt.Errorf("batch: forward returned %d outputs for a batch of %d inputs (%d items + %d padding; items [%d, %d))",
			got, size, n, size-n, s.lo, s.hi)
	}
	return fmt.Errorf("batch: forward returned %d outputs for a batch of %d inputs (items [%d, %d))", got, size, s.lo, s.hi)
}
