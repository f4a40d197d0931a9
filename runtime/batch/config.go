package batch

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// DefaultMaxBatchSize is the largest batch Run sends to forward when neither
// WithMaxBatchSize nor WithPadSizes says otherwise.
const DefaultMaxBatchSize = 8

// Config is the resolved configuration of one Run. Build it with NewConfig;
// the zero value is not valid.
type Config struct {
	// MaxBatchSize bounds the real items (padding excluded) in one forward call.
	MaxBatchSize int
	// PadSizes are the static batch sizes, strictly increasing, the largest
	// equal to MaxBatchSize; empty means batches are not padded.
	PadSizes []int
	// PersistentKey, when non-empty, declares the forward reused across Run
	// calls under this key (see WithPersistentForward).
	PersistentKey string
	// PerItemErrors turns an item's own (non-memory) failure into an error for
	// that item alone (see WithPerItemErrors).
	PerItemErrors bool
	// OnStats, when set, is called after every forward call.
	OnStats func(Stats)
	// Sharder, when set, spreads the run over the ranks of a distributed
	// job (see WithSharding).
	Sharder Sharder
	// MinBatchSize is the smallest batch forward takes: a shorter batch is
	// padded up to it (see WithBatchRange); 0 or 1 pads nothing.
	MinBatchSize int
	// Lanes is how many forward calls may run at once (see WithLanes); 1
	// runs them one after another. With LanesAuto it is the most Run may
	// choose.
	Lanes int
	// LanesAuto says Run chooses how many lanes, up to Lanes, by measuring
	// (without WithLanes; see WithLanes).
	LanesAuto bool
	// Invariant sends every batch at a size whose outputs are the max
	// batch size's (see WithInvariant).
	Invariant bool
	// Equivalent are the batch sizes measured to give every row the bits
	// the max batch size gives it, ascending (see WithEquivalentSizes);
	// with Invariant, a batch is padded to the smallest of them that holds
	// it. Empty: the max batch size alone.
	Equivalent []int

	maxSet        bool
	rangeMax      int // WithBatchRange's max (0: none)
	equivalentMax int // the max batch size Equivalent was measured for
}

// Option sets one part of a Config.
type Option func(*Config)

// WithMaxBatchSize bounds the number of real items per forward call.
func WithMaxBatchSize(n int) Option {
	return func(c *Config) { c.MaxBatchSize, c.maxSet = n, true }
}

// WithPadSizes makes batches shape-stable: a batch shorter than one of sizes
// is padded up to the next size by repeating its final real item, and the
// outputs of the padding are dropped. The sizes follow the rules of a
// manifest's pad_to_batch_sizes (spec.BatchSizeProblems): each at least
// 1, strictly increasing (they are not sorted for you), none above the max
// batch size, and the largest equal to it. Without WithMaxBatchSize the
// largest size is the max batch size.
func WithPadSizes(sizes ...int) Option {
	return func(c *Config) { c.PadSizes = slices.Clone(sizes) }
}

// WithBatchRange says forward takes batches of min to max items (max 0: no
// bound), as a compiled model exported with a dynamic batch dimension does
// (runtime/contract.BatchRange). It narrows the other options: a max batch
// size above max becomes max, pad sizes above it are dropped (and max ends
// the list, so every batch still has a static size), and a batch shorter
// than min is padded up to min by repeating its final item.
func WithBatchRange(min, max int) Option {
	return func(c *Config) { c.MinBatchSize, c.rangeMax = min, max }
}

// WithPersistentForward declares that the forward passed to Run is reused
// across many Run calls and is identified by key (for example
// "family/variant/task"). It changes nothing in how Run splits or retries:
// it is data that the forward and the engine behind it can read (from
// Config.PersistentKey, or per call from CallFrom) to keep one compiled
// module for the key instead of compiling per call. It does not compile
// anything by itself. An empty key leaves the forward non-persistent.
func WithPersistentForward(key string) Option {
	return func(c *Config) { c.PersistentKey = key }
}

// WithPerItemErrors makes an item that fails on its own (a forward error
// other than out-of-memory and context cancellation) yield its own error
// while every other item's output is returned. The failing item is found by
// bisecting the failing batch; see Run for the cost. Run then returns all
// outputs (zero values at failed positions) and an ItemErrors error.
func WithPerItemErrors() Option {
	return func(c *Config) { c.PerItemErrors = true }
}

// WithStats registers fn to be called after every forward call with the
// running totals, one call at a time (on Run's goroutine, or with lanes on
// the lane's); use it for progress bars and logs.
func WithStats(fn func(Stats)) Option {
	return func(c *Config) { c.OnStats = fn }
}

// WithLanes lets Run make up to n forward calls at once, each lane
// running a contiguous part of the items (whole batches of the max size) in
// its own goroutine: the batches are the ones a single lane makes, so
// padding and outputs do not change, and forward must be safe for
// concurrent use (Call.Lane tells the lanes apart). On a CPU whose cores a
// single forward call leaves partly idle — small models, whose operations
// libtorch runs on one thread — two lanes nearly double throughput; a model
// whose calls already use every core gains nothing and holds n batches in
// memory at once. Out-of-memory halving, per-item errors, cancellation and
// sharding work per lane as they do for one; the first lane to fail for
// another reason stops the others. n ≤ 1 means one lane (the default).
// WithLanes overrides an earlier WithAutoLanes.
func WithLanes(n int) Option {
	return func(c *Config) { c.Lanes, c.LanesAuto = n, false }
}

// WithAutoLanes lets Run choose how many lanes (see WithLanes) to use, by
// measuring: forward must be safe for concurrent use. Run times batches of
// the run itself on one lane and on two (nothing is computed twice, the
// batches stay those of one lane) and goes on with the faster, where more
// lanes must run at least 10 % more batches per second; once each side has
// run 50 ms the choice is settled, and two lanes are compared with four
// the same way, up to GOMAXPROCS (at most 8). A run of at least 112
// batches long enough for it alternates segments of at least 20 ms on each
// side within an eighth of its batches; a shorter run of a persistent
// forward (WithPersistentForward) is itself one sample, run whole on the
// side with less evidence. The measurements of a persistent forward add up
// across its runs (per key and max batch size), so a long-lived client
// settles within its first runs and then stops measuring; its first run
// only warms up. Until settled, a run that does not measure uses what the
// measurements so far favour (one lane without any). Stats.Lanes tells
// what Run is using. The generated <Task>Batch methods pass it; a later
// WithLanes(n) forces n.
func WithAutoLanes() Option {
	return func(c *Config) { c.LanesAuto = true }
}

// WithInvariant makes every forward call give the bits the max batch size
// gives (the max is also the largest pad size): a shorter batch is padded,
// by repeating its final item, up to the max — or, with
// WithEquivalentSizes, up to the smallest size measured to give the max's
// bits. An item's output then never depends on how many items it was
// batched with, nor on where the batch was cut: libtorch on the CPU gives
// an item bit-identical outputs at one batch size whatever its neighbours
// and its position, but batches of other sizes may run other kernels (a
// batch of one usually does; on mobilenet_v3_small sizes 2–15 agree with
// each other and not with 16). The cost is the padding: without equivalent
// sizes a lone item costs a full batch (docs/batching.md has figures).
// Out-of-memory halving helps only where the halves pad to a smaller size;
// otherwise an out-of-memory error is returned as is, at once; per-item
// errors (WithPerItemErrors) still bisect, each half padded as a batch of
// its size. A task's batching block asks for it with invariant: true.
func WithInvariant() Option {
	return func(c *Config) { c.Invariant = true }
}

// WithEquivalentSizes gives the batch sizes at which forward gives every
// row the bits the max batch size gives it, as measured on this machine
// for this model (runtime/client measures them when it loads a model in
// invariant mode): with WithInvariant a batch is padded only up to the
// smallest of them that holds it. Sizes are taken in any order; those
// outside 1 to the max batch size, and every size when the max batch size
// is not max, are ignored — the sizes are the max's class — so a run that
// changes the max batch size pads to the max as before.
func WithEquivalentSizes(max int, sizes ...int) Option {
	return func(c *Config) {
		c.Equivalent = c.Equivalent[:0:0]
		c.equivalentMax = max
		for _, n := range sizes {
			if n >= 1 && n <= max {
				c.Equivalent = append(c.Equivalent, n)
			}
		}
		slices.Sort(c.Equivalent)
		c.Equivalent = slices.Compact(c.Equivalent)
	}
}

// WithSharding makes Run run only this rank's share of the items, a
// contiguous range that s chooses, and gather every rank's outputs (see
// Sharder). Package runtime/dist gives the Sharder of a process group
// (dist.Sharded). A nil s leaves the run unsharded.
func WithSharding(s Sharder) Option {
	return func(c *Config) { c.Sharder = s }
}

// TaskOptions returns the options a task's batching block asks for: the max
// batch size, the static pad sizes and invariance (WithInvariant). A task without a batching block, or
// one that breaks a rule of spec.InferenceTaskProfile.BatchingProblems
// (no required tensor-like input to stack, a stream task, pad sizes that do
// not fit the max), is an error listing every problem: such a task is never
// batched.
func TaskOptions(task *spec.InferenceTaskProfile) ([]Option, error) {
	if task == nil {
		return nil, errors.New("batch: nil task")
	}
	if task.Batching == nil {
		return nil, errors.New("task is not batchable (the manifest gives it no batching settings)")
	}
	if ps := task.BatchingProblems(); len(ps) > 0 {
		return nil, fmt.Errorf("task cannot be batched: %s", spec.JoinProblems(ps))
	}
	opts := []Option{WithMaxBatchSize(task.Batching.MaxBatchSize)}
	if len(task.Batching.PadToBatchSizes) > 0 {
		opts = append(opts, WithPadSizes(task.Batching.PadToBatchSizes...))
	}
	if task.Batching.Invariant {
		opts = append(opts, WithInvariant())
	}
	return opts, nil
}

// NewConfig applies opts over the defaults and checks the result with the
// rules of a manifest's batching block (spec.BatchSizeProblems), with the
// same messages: an error names the max batch size and pad sizes in force
// and every rule they break. Later options win: a WithPadSizes given after
// a task's options replaces the task's pad sizes, and must then fit the
// task's max batch size (or come with a WithMaxBatchSize of its own).
func NewConfig(opts ...Option) (Config, error) {
	var c Config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if !c.maxSet {
		c.MaxBatchSize = DefaultMaxBatchSize
		if len(c.PadSizes) > 0 {
			c.MaxBatchSize = slices.Max(c.PadSizes)
		}
	}
	if c.rangeMax > 0 && c.MaxBatchSize > c.rangeMax {
		c.MaxBatchSize = c.rangeMax
		if len(c.PadSizes) > 0 {
			c.PadSizes = slices.DeleteFunc(slices.Clone(c.PadSizes), func(n int) bool { return n >= c.rangeMax })
			c.PadSizes = append(c.PadSizes, c.rangeMax)
		}
	}
	if c.LanesAuto {
		c.Lanes = autoLanes()
	}
	c.Lanes = max(c.Lanes, 1)
	if c.equivalentMax != c.MaxBatchSize {
		c.Equivalent = nil // measured for another max
	}
	if c.Invariant {
		// The sizes a batch is padded to: the equivalent ones that are
		// pad sizes (when the task has some) and reach the min, and the
		// max.
		c.Equivalent = slices.DeleteFunc(slices.Clone(c.Equivalent), func(n int) bool {
			return n < c.MinBatchSize || n > c.MaxBatchSize || len(c.PadSizes) > 0 && !slices.Contains(c.PadSizes, n)
		})
		if !slices.Contains(c.Equivalent, c.MaxBatchSize) {
			c.Equivalent = append(c.Equivalent, c.MaxBatchSize)
		}
	}
	if c.MinBatchSize < 0 || c.rangeMax > 0 && c.MinBatchSize > c.rangeMax {
		return Config{}, fmt.Errorf("batch: batch range [%d, %d]: want 0 ≤ min ≤ max", c.MinBatchSize, c.rangeMax)
	}
	if ps := spec.BatchSizeProblems(c.MaxBatchSize, c.PadSizes); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.Message
		}
		return Config{}, fmt.Errorf("batch: max batch size %d, pad sizes %v: %s", c.MaxBatchSize, c.PadSizes, strings.Join(msgs, "; "))
	}
	return c, nil
}

// PaddedSize returns the size a batch of n real items is sent at: the
// smallest pad size ≥ n, or n when there are no pad sizes, and at least
// the min batch size; with WithInvariant, the smallest equivalent size ≥ n
// (the max batch size without WithEquivalentSizes). Run never asks for an
// n above the largest pad size (it is the max batch size); for such an n
// PaddedSize returns n.
func (c *Config) PaddedSize(n int) int {
	if c.Invariant {
		for _, s := range c.Equivalent {
			if s >= n {
				return s
			}
		}
		return max(n, c.MaxBatchSize)
	}
	size := n
	for _, s := range c.PadSizes {
		if s >= n {
			size = s
			break
		}
	}
	return max(size, c.MinBatchSize)
}

// WarmupSizes returns the batch sizes a warm-up should run forward at,
// ascending: the sizes Run sends batches at. With WithInvariant those are
// the equivalent sizes (the max batch size alone without
// WithEquivalentSizes); with pad sizes, each pad size (raised to the min
// batch size); without pad sizes, where a batch is sent at its own size,
// each power of two below the max batch size and the max itself (sizes in
// between take the same kernels as their neighbours on most models, and a
// warm-up of every size would cost max calls).
func (c *Config) WarmupSizes() []int {
	if c.Invariant {
		sizes := []int{}
		for n := 1; n <= c.MaxBatchSize; n++ {
			sizes = append(sizes, c.PaddedSize(n))
		}
		return slices.Compact(sizes)
	}
	var sizes []int
	if len(c.PadSizes) > 0 {
		sizes = slices.Clone(c.PadSizes)
	} else {
		for n := 1; n < c.MaxBatchSize; n *= 2 {
			sizes = append(sizes, n)
		}
		sizes = append(sizes, c.MaxBatchSize)
	}
	for i, n := range sizes {
		sizes[i] = c.PaddedSize(n)
	}
	return slices.Compact(sizes)
}
