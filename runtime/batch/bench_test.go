package batch_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/batch"
)

// The executor's overhead against a hand-written loop over the same chunks,
// with a forward cheap enough that the overhead is visible. Results are in
// docs/benchmarks/batch.md.

// cheapForward squares each item (nanoseconds per item).
func cheapForward(_ context.Context, b []float64) ([]float64, error) {
	out := make([]float64, len(b))
	for i, x := range b {
		out[i] = x * x
	}
	return out, nil
}

// workForward does about 64 multiply-adds per item, a stand-in for a small
// per-item computation.
func workForward(_ context.Context, b []float64) ([]float64, error) {
	out := make([]float64, len(b))
	for i, x := range b {
		acc := x
		for range 64 {
			acc = acc*0.999 + 0.5
		}
		out[i] = acc
	}
	return out, nil
}

func directLoop(ctx context.Context, items []float64, maxSize int, fwd batch.Forward[float64, float64]) ([]float64, error) {
	out := make([]float64, len(items))
	for lo := 0; lo < len(items); lo += maxSize {
		hi := min(lo+maxSize, len(items))
		res, err := fwd(ctx, items[lo:hi])
		if err != nil {
			return nil, err
		}
		copy(out[lo:hi], res)
	}
	return out, nil
}

func benchItems(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i)
	}
	return s
}

func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	items := benchItems(4096)
	for _, f := range []struct {
		name string
		fwd  batch.Forward[float64, float64]
	}{{"cheap", cheapForward}, {"work64", workForward}} {
		for _, maxSize := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/max%d/direct", f.name, maxSize), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := directLoop(ctx, items, maxSize, f.fwd); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/max%d/run", f.name, maxSize), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := batch.Run(ctx, items, f.fwd, batch.WithMaxBatchSize(maxSize)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPadded runs 4095 items (the last batch short) with and without
// static pad sizes: the padding copy and the wasted padded items.
func BenchmarkPadded(b *testing.B) {
	ctx := context.Background()
	items := benchItems(4095)
	b.Run("dynamic", func(b *testing.B) {
		for b.Loop() {
			if _, err := batch.Run(ctx, items, workForward, batch.WithMaxBatchSize(64)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("padded", func(b *testing.B) {
		for b.Loop() {
			if _, err := batch.Run(ctx, items, workForward, batch.WithPadSizes(1, 2, 4, 8, 16, 32, 64)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInterleaved times the direct loop and Run alternately (see
// interleave) and reports the overhead in percent and per forward call.
func BenchmarkInterleaved(b *testing.B) {
	ctx := context.Background()
	items := benchItems(4096)
	for _, f := range []struct {
		name string
		fwd  batch.Forward[float64, float64]
	}{{"cheap", cheapForward}, {"work64", workForward}} {
		for _, maxSize := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/max%d", f.name, maxSize), func(b *testing.B) {
				d, r := interleave(b, "direct", "run",
					timed(func() error { _, err := directLoop(ctx, items, maxSize, f.fwd); return err }),
					timed(func() error { _, err := batch.Run(ctx, items, f.fwd, batch.WithMaxBatchSize(maxSize)); return err }))
				calls := float64((len(items) + maxSize - 1) / maxSize)
				b.ReportMetric((r-d)/calls, "overhead-ns/call")
			})
		}
	}
}

// interleave times a and c alternately in one benchmark loop (swapping
// which goes first every iteration), so that load from other processes hits
// both alike. It reports the median time of each (µs per pass over all
// items) and the median of the per-iteration ratios c/a as a percentage
// difference, which bursts of load distort far less than a ratio of sums.
// It returns the two medians in ns.
func interleave(b *testing.B, nameA, nameC string, a, c func() (time.Duration, error)) (medA, medC float64) {
	var ta, tc []float64
	var ratios []float64
	i := 0
	for b.Loop() {
		var da, dc time.Duration
		var err error
		if i%2 == 0 {
			if da, err = a(); err == nil {
				dc, err = c()
			}
		} else {
			if dc, err = c(); err == nil {
				da, err = a()
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		ta = append(ta, float64(da.Nanoseconds()))
		tc = append(tc, float64(dc.Nanoseconds()))
		ratios = append(ratios, float64(dc)/float64(da))
		i++
	}
	b.ReportMetric(median(ta)/1e3, nameA+"-us/op")
	b.ReportMetric(median(tc)/1e3, nameC+"-us/op")
	b.ReportMetric(100*(median(ratios)-1), nameC+"-vs-"+nameA+"-%")
	return median(ta), median(tc)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// timed returns the wall time of f.
func timed(f func() error) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t0 := time.Now()
		err := f()
		return time.Since(t0), err
	}
}
