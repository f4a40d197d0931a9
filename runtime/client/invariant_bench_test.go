//go:build cgo

package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// BenchmarkInvariantInterleaved measures what batch-invariant mode costs:
// the same job — k items in one RunBatch (the batches a batching server
// forms from k requests) — padded to the next pad size as usual and padded
// to the max batch size (batch.WithInvariant), the two columns in rotating
// order within each of b.N rounds, each run once untimed before it is timed
// and repeated until a timing lasts about 20 ms. Models: the tiny encoder
// through the generated EmbedBatch (32 tokens, pad sizes 1, 2, 4, 8), the
// attention encoder and mobilenet_v3_small through RunBatch (pad sizes 1,
// 2, 4, 8). Metrics per item count k: items/s of each column, and the
// median over rounds of invariant ÷ padded throughput (1 is free, 0.25 is
// four times the cost).
func BenchmarkInvariantInterleaved(b *testing.B) {
	counts := []int{1, 2, 3, 5, 8, 64}
	ctx := context.Background()
	type job func(k int, opts ...batch.Option) func()
	models := []struct {
		name string
		make func(b *testing.B) job
	}{
		{"tiny-encoder", func(b *testing.B) job {
			c := newTinyEncoder(b)
			ps := batchJob()[:64]
			return func(k int, opts ...batch.Option) func() {
				return func() {
					if _, err := c.EmbedBatch(ctx, ps[:k], opts...); err != nil {
						b.Fatal(err)
					}
				}
			}
		}},
	}
	for _, md := range invModels[1:] {
		models = append(models, struct {
			name string
			make func(b *testing.B) job
		}{md.name, func(b *testing.B) job {
			c, err := client.New(invariantSpec(md, false), client.WithCheckpointPath(md.path(b)), client.WithDevice("cpu"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			items := make([]map[string]any, 64)
			for i := range items {
				items[i] = map[string]any{md.arg: md.item(i)}
			}
			return func(k int, opts ...batch.Option) func() {
				return func() {
					if _, err := c.RunBatch(ctx, "embed", items[:k], opts...); err != nil {
						b.Fatal(err)
					}
				}
			}
		}})
	}
	for _, md := range models {
		b.Run(md.name, func(b *testing.B) {
			run := md.make(b)
			type column struct {
				name string
				fn   func()
				reps int
			}
			var cols [][2]column
			for _, k := range counts {
				pair := [2]column{{name: "padded", fn: run(k)}, {name: "invariant", fn: run(k, batch.WithInvariant())}}
				for i := range pair {
					pair[i].fn()
					t0 := time.Now()
					pair[i].fn()
					pair[i].reps = max(1, int(20*time.Millisecond/max(time.Since(t0), time.Microsecond)))
				}
				cols = append(cols, pair)
			}
			total := make([][2]time.Duration, len(counts))
			ratios := make([][]float64, len(counts))
			timed := func(c column) time.Duration {
				c.fn() // untimed: pays for what the previous column left behind
				t0 := time.Now()
				for range c.reps {
					c.fn()
				}
				return time.Since(t0) / time.Duration(c.reps)
			}
			b.ResetTimer()
			for r := range b.N {
				for i := range cols {
					var d [2]time.Duration
					for j := range 2 {
						c := (j + r + i) % 2
						d[c] = timed(cols[i][c])
						total[i][c] += d[c]
					}
					ratios[i] = append(ratios[i], float64(d[0])/float64(d[1]))
				}
			}
			for i, k := range counts {
				for c, name := range []string{"padded", "invariant"} {
					b.ReportMetric(float64(k*b.N)/total[i][c].Seconds(), fmt.Sprintf("k%d-%s-items/s", k, name))
				}
				v := slices.Clone(ratios[i])
				slices.Sort(v)
				b.ReportMetric(v[len(v)/2], fmt.Sprintf("k%d-invariant/padded-x", k))
			}
		})
	}
}
