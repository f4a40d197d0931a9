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
// time, so Run measures, with batches of the run itself (nothing is computed
// twice; every lane runs whole batches of the max size, so the batches,
// their padding and the outputs are those of one lane whatever Run
// chooses), and adds what it measures to the evidence: the time and
// batches run on each lane count. Once each side of a comparison has
// evidenceTime of it, more lanes win if they run at least autoGain times as
// many batches per second; then two lanes are compared with four the same
// way, and so on up to the lane limit.
//
// A run long enough for it alternates segments of at least segmentTime on
// one side and the other, within 1/autoShare of its batches. Segments must
// be that long: over a millisecond or two the machine's speed drifts, a
// new lane's thread is cold and the garbage collector's work for one
// segment's allocations lands in the next (segments of 1–2 ms put two
// lanes at 0.7–1.1× one on the tiny encoder, which two lanes run 1.4× as
// fast). A shorter run of a persistent forward (WithPersistentForward) is
// itself one sample: it runs, timed, on the side with less evidence. The
// evidence of a persistent forward adds up across its runs (keyed by the
// key and the max batch size), so a long-lived client settles within its
// first runs and then stops measuring; the first run of a key only warms
// up. Until settled, a run that does not measure goes on with the side the
// evidence so far favours (one lane without any).
const (
	// warmBatches run first, on one lane, untimed: a TorchScript module's
	// first calls profile and optimise the graph.
	warmBatches = 2
	// A segment has at least probeBatches batches per lane, and the first
	// one-lane segment of a run lasts at least segmentTime (which sets the
	// run's segment length).
	probeBatches = 4
	segmentTime  = 20 * time.Millisecond
	// evidenceTime is how long each side of a comparison must have run
	// before it is settled.
	evidenceTime = 50 * time.Millisecond
	// autoShare: a run spends at most 1/autoShare of its batches measuring.
	autoShare = 8
	// autoMinBatches is the shortest run that measures: a shorter one runs
	// on the lanes the evidence so far favours (one without any).
	autoMinBatches = autoShare * (warmBatches + 3*probeBatches)
	// autoGain is how much faster (batches per second) more lanes must be to
	// be chosen: less is within the noise of a shared machine.
	autoGain = 1.10
	// autoLaneCap bounds the lanes Run tries by itself.
	autoLaneCap = 8
)

// autoLanes is the most lanes WithAutoLanes may choose: 1 when one P leaves
// nothing to overlap. Tests replace it.
var autoLanes = func() int { return min(runtime.GOMAXPROCS(0), autoLaneCap) }

// laneEvidence is the time and batches run on each lane count.
type laneEvidence struct {
	mu      sync.Mutex
	secs    map[int]float64
	batches map[int]int
	warm    bool // a run of the forward has warmed it up
}

// evidence holds, per persistent forward (WithPersistentForward's key and
// the max batch size), the laneEvidence of its runs.
var evidence sync.Map // laneKey → *laneEvidence

type laneKey struct {
	key  string
	size int
}

// warmUp reports whether the forward was warmed up by an earlier run, and
// marks it warm.
func (e *laneEvidence) warmUp() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.warm
	e.warm = true
	return was
}

// thinner returns whichever of lo and hi has less evidence (lo on a tie).
func (e *laneEvidence) thinner(lo, hi int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.secs[hi] < e.secs[lo] {
		return hi
	}
	return lo
}

func (e *laneEvidence) add(lanes, batches int, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secs[lanes] += d.Seconds()
	e.batches[lanes] += batches
}

// plan returns the settled choice (lo, 0) or the comparison to measure
// next (lo, hi), and which of its two sides leads: hi when it already runs
// autoGain times as fast on the evidence so far.
func (e *laneEvidence) plan(limit int) (lo, hi, lead int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rate := func(k int) float64 { return float64(e.batches[k]) / e.secs[k] }
	lo = 1
	for hi = 2; hi <= limit; hi *= 2 {
		faster := e.secs[hi] > 0 && e.secs[lo] > 0 && rate(hi) >= rate(lo)*autoGain
		if e.secs[lo] < evidenceTime.Seconds() || e.secs[hi] < evidenceTime.Seconds() {
			if faster {
				return lo, hi, hi
			}
			return lo, hi, lo
		}
		if !faster {
			return lo, 0, lo
		}
		lo = hi
	}
	return lo, 0, lo
}

// runAuto is runLanes with the lane count chosen by measuring (see above)
// when cfg.LanesAuto is set.
func runAuto[In, Out any](ctx context.Context, items []In, base, total int, forward Forward[In, Out], cfg Config) ([]Out, error) {
	chunks := (len(items) + cfg.MaxBatchSize - 1) / cfg.MaxBatchSize
	if !cfg.LanesAuto || cfg.Lanes <= 1 || chunks <= 1 {
		// Nothing to choose (one batch runs on one lane whatever the
		// choice), nor anything to learn from a run this short.
		return runLanes(ctx, items, base, total, forward, cfg)
	}
	ev := &laneEvidence{secs: map[int]float64{}, batches: map[int]int{}}
	if cfg.PersistentKey != "" {
		v, _ := evidence.LoadOrStore(laneKey{cfg.PersistentKey, cfg.MaxBatchSize}, ev)
		ev = v.(*laneEvidence)
	}
	lo, hi, lead := ev.plan(cfg.Lanes)
	if hi == 0 || chunks < autoMinBatches {
		cfg.Lanes = lead
		return runLanes(ctx, items, base, total, forward, cfg)
	}
	p := &phases[In, Out]{ctx: ctx, items: items, base: base, total: total, forward: forward, cfg: cfg, out: make([]Out, len(items))}
	if cfg.PersistentKey != "" && !ev.warmUp() {
		// The forward's first run: its first calls are slow (a TorchScript
		// module optimises its graph, new threads are cold), so it is not
		// evidence.
		cfg.Lanes = lead
		return runLanes(ctx, items, base, total, forward, cfg)
	}
	if err := p.run(warmBatches, 1); err != nil {
		return nil, err
	}
	budget := chunks/autoShare - warmBatches
	// The first segment is on one lane, batch by batch until it has lasted
	// segmentTime: its batch count n is every segment's, per lane.
	n, start := 0, time.Now()
	for n < probeBatches || time.Since(start) < segmentTime && (n+1)*(1+lo+hi) <= budget {
		if err := p.run(1, 1); err != nil {
			return nil, err
		}
		n++
	}
	if d := time.Since(start); d < segmentTime {
		// Too short a run for segments: a persistent forward's run is one
		// sample of the side with less evidence; another goes on with the
		// side that leads.
		if cfg.PersistentKey == "" {
			lead = lo
		} else {
			lead = ev.thinner(lo, hi)
			start := time.Now()
			left := chunks - warmBatches - n
			if err := p.run(left, lead); err != nil {
				return nil, err
			}
			ev.add(lead, left, time.Since(start))
		}
	} else {
		ev.add(1, n, d)
		budget -= n
		for first := lo == 1; hi > 0; first = false {
			if !first {
				if (lo+hi)*n > budget {
					break
				}
				if err := p.segment(ev, lo, n); err != nil {
					return nil, err
				}
				budget -= lo * n
			} else if hi*n > budget {
				break
			}
			if err := p.segment(ev, hi, n); err != nil {
				return nil, err
			}
			budget -= hi * n
			lo, hi, lead = ev.plan(cfg.Lanes)
		}
	}
	if err := p.run(chunks, lead); err != nil {
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

// segment runs n batches per lane on lanes lanes and adds their time to
// ev.
func (p *phases[In, Out]) segment(ev *laneEvidence, lanes, n int) error {
	start := time.Now()
	if err := p.run(lanes*n, lanes); err != nil {
		return err
	}
	ev.add(lanes, lanes*n, time.Since(start))
	return nil
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
	var last Stats // this part's totals, added to p.done after it
	if p.cfg.OnStats != nil {
		prior := p.done
		cfg.OnStats = func(s Stats) {
			last = s
			t := sumStats([]Stats{prior, s})
			t.Items = len(p.items)
			t.Lanes = lanes
			p.cfg.OnStats(t)
		}
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
