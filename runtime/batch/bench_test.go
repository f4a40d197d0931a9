package batch

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The executor's overhead against a hand-written loop over the same chunks,
// with a forward cheap enough that the overhead is visible. Results are in
// docs/benchmarks-batch.md.

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

func directLoop(ctx context.Context, items []float64, maxSize int, fwd Forward[float64, float64]) ([]float64, error) {
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
		fwd  Forward[float64, float64]
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
					if _, err := Run(ctx, items, f.fwd, WithMaxBatchSize(maxSize)); err != nil {
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
			if _, err := Run(ctx, items, workForward, WithMaxBatchSize(64)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("padded", func(b *testing.B) {
		for b.Loop() {
			if _, err := Run(ctx, items, workForward, WithPadSizes(1, 2, 4, 8, 16, 32, 64)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkInterleaved times the direct loop and Run alternately inside one
// benchmark loop, so that load from other processes hits both alike, and
// reports both per-run times, the overhead in percent and the overhead per
// forward call.
func BenchmarkInterleaved(b *testing.B) {
	ctx := context.Background()
	items := benchItems(4096)
	for _, f := range []struct {
		name string
		fwd  Forward[float64, float64]
	}{{"cheap", cheapForward}, {"work64", workForward}} {
		for _, maxSize := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/max%d", f.name, maxSize), func(b *testing.B) {
				var direct, run time.Duration
				n := 0
				for b.Loop() {
					t0 := time.Now()
					if _, err := directLoop(ctx, items, maxSize, f.fwd); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, err := Run(ctx, items, f.fwd, WithMaxBatchSize(maxSize)); err != nil {
						b.Fatal(err)
					}
					run += time.Since(t1)
					direct += t1.Sub(t0)
					n++
				}
				calls := float64((len(items) + maxSize - 1) / maxSize)
				b.ReportMetric(float64(direct.Nanoseconds())/float64(n), "direct-ns/op")
				b.ReportMetric(float64(run.Nanoseconds())/float64(n), "run-ns/op")
				b.ReportMetric(100*(float64(run)/float64(direct)-1), "overhead-%")
				b.ReportMetric(float64((run-direct).Nanoseconds())/float64(n)/calls, "overhead-ns/call")
			})
		}
	}
}
