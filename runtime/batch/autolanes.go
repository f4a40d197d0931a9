package batch

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"
)

// With WithAutoLanes, Run chooses the number of lanes itself: small models,
// whose calls leave cores idle, run faster with more lanes, and models whose
// calls already use every core run slower (docs/batching.md has figures).
// Neither the model's size nor libtorch's thread count tells which ahead of
// time, so Run measures: after warmBatches batches on one lane, it times a
// probe of batches on one lane, then the same number of batches per lane on
// twice as many lanes, and goes on with the faster, doubling again while
// doubling pays, up to autoLaneCap or GOMAXPROCS. The probes are batches of
// the run itself (nothing is computed twice), and every lane runs whole
// batches of the max size, so the batches, their padding and the outputs are
// those of one lane whatever Run chooses.
const (
	// warmBatches run first, on one lane, untimed: a TorchScript module's
	// first calls profile and optimise the graph.
	warmBatches = 2
	// probeBatches is the fewest batches per lane a probe times, and
	// probeTime the least time the one-lane probe lasts (it then sets how
	// many batches each lane of the next probe runs).
	probeBatches = 4
	probeTime    = 20 * time.Millisecond
	// autoShare: the probes take at most 1/autoShare of the batches, so that
	// a probe on too many lanes costs the run little.
	autoShare = 8
	// autoGain is how much faster (items per second) more lanes must be to be
	// chosen: less is within the noise of a shared machine.
	autoGain = 1.10
	// autoLaneCap bounds the lanes Run tries by itself.
	autoLaneCap = 8
)

// autoLanes is the most lanes WithAutoLanes may choose: 1 when one P leaves
// nothing to overlap. Tests replace it.
var autoLanes = func() int { return min(runtime.GOMAXPROCS(0), autoLaneCap) }

// chosenLanes remembers, per persistent forward (WithPersistentForward's
// key and the max batch size), the lanes a probe chose, so that later runs
// of the same forward start with them.
var chosenLanes sync.Map // laneKey → int

type laneKey struct {
	key  string
	size int
}

// runAuto is runLanes with the lane count chosen by measuring (see above)
// when cfg.LanesAuto is set and the run has enough batches to spare a
// probe.
func runAuto[In, Out any](ctx context.Context, items []In, base, total int, forward Forward[In, Out], cfg Config) ([]Out, error) {
	if !cfg.LanesAuto || cfg.Lanes <= 1 {
		return runLanes(ctx, items, base, total, forward, cfg)
	}
	if cfg.PersistentKey != "" {
		if k, ok := chosenLanes.Load(laneKey{cfg.PersistentKey, cfg.MaxBatchSize}); ok {
			cfg.Lanes = k.(int)
			return runLanes(ctx, items, base, total, forward, cfg)
		}
	}
	chunks := (len(items) + cfg.MaxBatchSize - 1) / cfg.MaxBatchSize
	if chunks < autoShare*(warmBatches+3*probeBatches) {
		// Too short to measure without the probes weighing on the run.
		cfg.Lanes = 1
		return runLanes(ctx, items, base, total, forward, cfg)
	}
	p := &phases[In, Out]{ctx: ctx, items: items, base: base, total: total, forward: forward, cfg: cfg, out: make([]Out, len(items))}
	budget := chunks / autoShare // batches the probes may take
	if err := p.run(warmBatches, 1); err != nil {
		return nil, err
	}
	// The one-lane probe: batch by batch until it has lasted probeTime.
	n, start := 0, time.Now()
	for n < probeBatches || time.Since(start) < probeTime && n < budget/3 {
		if err := p.run(1, 1); err != nil {
			return nil, err
		}
		n++
	}
	best, rate := 1, float64(n)/time.Since(start).Seconds()
	spent := warmBatches + n
	for lanes := 2; lanes <= cfg.Lanes && spent+lanes*n <= budget+warmBatches; lanes *= 2 {
		start := time.Now()
		if err := p.run(lanes*n, lanes); err != nil {
			return nil, err
		}
		spent += lanes * n
		r := float64(lanes*n) / time.Since(start).Seconds()
		if r < rate*autoGain {
			break
		}
		best, rate = lanes, r
	}
	if cfg.PersistentKey != "" {
		chosenLanes.Store(laneKey{cfg.PersistentKey, cfg.MaxBatchSize}, best)
	}
	if err := p.run(chunks, best); err != nil {
		return nil, err
	}
	if len(p.itemErrs) > 0 {
		return p.out, p.itemErrs
	}
	return p.out, nil
}

// phases runs a run's batches in consecutive parts, each on its own number
// of lanes, and puts their outputs, item errors and stats together as one
// run's.
type phases[In, Out any] struct {
	ctx         context.Context
	items       []In
	base, total int
	forward     Forward[In, Out]
	cfg         Config
	out         []Out
	itemErrs    ItemErrors
	next        int   // the first item not run yet
	done        Stats // the totals of the parts run so far
}

// run runs the next batches (at most the batches left) on lanes lanes.
func (p *phases[In, Out]) run(batches, lanes int) error {
	lo := p.next
	hi := min(lo+batches*p.cfg.MaxBatchSize, len(p.items))
	if lo >= hi {
		return nil
	}
	cfg := p.cfg
	cfg.Lanes = lanes
	if p.cfg.OnStats != nil {
		prior := p.done
		cfg.OnStats = func(s Stats) {
			t := sumStats([]Stats{prior, s})
			t.Items = len(p.items)
			t.Lanes = lanes
			p.cfg.OnStats(t)
		}
	}
	var last Stats
	if p.cfg.OnStats != nil {
		inner := cfg.OnStats
		cfg.OnStats = func(s Stats) { last = s; inner(s) }
	}
	res, err := runLanes(p.ctx, p.items[lo:hi:hi], p.base+lo, p.total, p.forward, cfg)
	var ie ItemErrors
	if errors.As(err, &ie) {
		p.itemErrs = append(p.itemErrs, ie...)
	} else if err != nil {
		return err
	}
	copy(p.out[lo:hi], res)
	p.done = sumStats([]Stats{p.done, last})
	p.next = hi
	return nil
}
