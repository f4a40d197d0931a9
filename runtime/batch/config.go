package batch

import (
	"fmt"
	"slices"

	"github.com/worldfoundry/wfgen/runtime"
)

// DefaultMaxBatchSize is the largest batch Run sends to forward when neither
// WithMaxBatchSize nor WithPadSizes says otherwise.
const DefaultMaxBatchSize = 8

// Config is the resolved configuration of one Run. Build it with NewConfig;
// the zero value is not valid.
type Config struct {
	// MaxBatchSize bounds the real items (padding excluded) in one forward call.
	MaxBatchSize int
	// PadSizes are the static batch sizes, ascending and without duplicates;
	// empty means batches are not padded.
	PadSizes []int
	// PersistentKey, when non-empty, declares the forward reused across Run
	// calls under this key (see WithPersistentForward).
	PersistentKey string
	// PerItemErrors turns an item's own (non-memory) failure into an error for
	// that item alone (see WithPerItemErrors).
	PerItemErrors bool
	// OnStats, when set, is called after every forward call.
	OnStats func(Stats)

	maxSet bool
}

// Option sets one part of a Config.
type Option func(*Config)

// WithMaxBatchSize bounds the number of real items per forward call.
func WithMaxBatchSize(n int) Option {
	return func(c *Config) { c.MaxBatchSize, c.maxSet = n, true }
}

// WithPadSizes makes batches shape-stable: a batch shorter than one of sizes
// is padded up to the next size by repeating its final real item, and the
// outputs of the padding are dropped. Order does not matter. Without
// WithMaxBatchSize the largest size is the max batch size; with it, the max
// must not exceed the largest size.
func WithPadSizes(sizes ...int) Option {
	return func(c *Config) { c.PadSizes = slices.Clone(sizes) }
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

// WithStats registers fn to be called, on Run's goroutine, after every
// forward call with the running totals; use it for progress bars and logs.
func WithStats(fn func(Stats)) Option {
	return func(c *Config) { c.OnStats = fn }
}

// SpecOptions returns the options a manifest's batching settings ask for:
// the max batch size and the static pad sizes. A nil spec gives none.
func SpecOptions(spec *runtime.BatchingSpec) []Option {
	if spec == nil {
		return nil
	}
	opts := []Option{WithMaxBatchSize(spec.MaxBatchSize)}
	if len(spec.PadToBatchSizes) > 0 {
		opts = append(opts, WithPadSizes(spec.PadToBatchSizes...))
	}
	return opts
}

// NewConfig applies opts over the defaults and checks the result: the max
// batch size is at least 1, every pad size is at least 1, and the max does
// not exceed the largest pad size (a batch could not be padded otherwise).
func NewConfig(opts ...Option) (Config, error) {
	var c Config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	for _, s := range c.PadSizes {
		if s < 1 {
			return Config{}, fmt.Errorf("batch: pad size %d is not positive (pad sizes %v)", s, c.PadSizes)
		}
	}
	slices.Sort(c.PadSizes)
	c.PadSizes = slices.Compact(c.PadSizes)
	if !c.maxSet {
		c.MaxBatchSize = DefaultMaxBatchSize
		if len(c.PadSizes) > 0 {
			c.MaxBatchSize = c.PadSizes[len(c.PadSizes)-1]
		}
	}
	if c.MaxBatchSize < 1 {
		return Config{}, fmt.Errorf("batch: max batch size %d is not positive", c.MaxBatchSize)
	}
	if n := len(c.PadSizes); n > 0 && c.MaxBatchSize > c.PadSizes[n-1] {
		return Config{}, fmt.Errorf("batch: max batch size %d exceeds the largest pad size %d (pad sizes %v)",
			c.MaxBatchSize, c.PadSizes[n-1], c.PadSizes)
	}
	return c, nil
}

// PaddedSize returns the size a batch of n real items is sent at: the
// smallest pad size ≥ n, or n when there are no pad sizes. Run never asks
// for an n above the largest pad size (NewConfig forbids it); for such an n
// PaddedSize returns n.
func (c *Config) PaddedSize(n int) int {
	for _, s := range c.PadSizes {
		if s >= n {
			return s
		}
	}
	return n
}
