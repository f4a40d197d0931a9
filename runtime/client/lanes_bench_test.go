//go:build cgo

package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// BenchmarkAutoLanesInterleaved measures the lanes the batch path chooses by
// itself (batch.WithAutoLanes, which the generated <Task>Batch methods pass)
// against forced lane counts, on a model whose calls leave a core idle (the
// tiny encoder through the generated EmbedBatch: 10,000 items in batches of
// 8) and on one whose calls keep every core busy (mobilenet_v3_small through
// RunBatch: 512 images in batches of 2). Columns, in a new order in each of
// b.N rounds, each run once untimed before it is timed:
//
//   - default: the method with default settings; the client's runs add up
//     their measurements and stop measuring once settled, as a long-lived
//     client's do;
//   - cold: the same, choosing afresh in every run (WithPersistentForward("")
//     drops the key the choice is kept under), so the probe's own cost is in
//     the figure: a client's first run;
//   - 1lane, 2lanes: batch.WithLanes(1), batch.WithLanes(2).
//
// Metrics: items/s of each column, and the medians over rounds of
// default ÷ 1lane, cold ÷ 1lane and default ÷ 2lanes (throughput).
func BenchmarkAutoLanesInterleaved(b *testing.B) {
	ctx := context.Background()
	type job func(opts ...batch.Option) func() int
	models := []struct {
		name string
		make func(b *testing.B) job
	}{
		{"tiny-encoder", func(b *testing.B) job {
			c := newTinyEncoder(b)
			ps := batchJob()
			return func(opts ...batch.Option) func() int {
				return func() int {
					res, err := c.EmbedBatch(ctx, ps, opts...)
					if err != nil {
						b.Fatal(err)
					}
					return len(res)
				}
			}
		}},
		{"mobilenet_v3_small", func(b *testing.B) job {
			md := invModels[3]
			c, err := client.New(invariantSpec(md, false), client.WithCheckpointPath(md.path(b)), client.WithDevice("cpu"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			items := make([]map[string]any, 512)
			for i := range items {
				items[i] = map[string]any{md.arg: md.item(i % 16)}
			}
			return func(opts ...batch.Option) func() int {
				opts = append([]batch.Option{batch.WithBatchRange(0, 2)}, opts...)
				return func() int {
					res, err := c.RunBatch(ctx, "embed", items, opts...)
					if err != nil {
						b.Fatal(err)
					}
					return len(res)
				}
			}
		}},
	}
	for _, md := range models {
		b.Run(md.name, func(b *testing.B) {
			run := md.make(b)
			names := []string{"default", "cold", "1lane", "2lanes"}
			cols := []func() int{run(), run(batch.WithPersistentForward("")), run(batch.WithLanes(1)), run(batch.WithLanes(2))}
			var lanes batch.Stats
			run(batch.WithStats(func(s batch.Stats) { lanes = s }))() // the first run measures
			b.Logf("lanes after the first run: %d", lanes.Lanes)
			total := make([]time.Duration, len(cols))
			items := 0
			ratios := map[string][]float64{}
			b.ResetTimer()
			for r := range b.N {
				d := make([]time.Duration, len(cols))
				// A new order every round, so that no column always follows
				// the same one (mobilenet's two-lane column leaves state that
				// an untimed run does not quite clear).
				for _, i := range enginetest.RoundOrder(r, len(cols)) {
					cols[i]() // untimed: pays for what the previous column left behind
					t0 := time.Now()
					n := cols[i]()
					d[i] = time.Since(t0)
					total[i] += d[i]
					if i == 0 {
						items += n
					}
				}
				ratios["default/1lane"] = append(ratios["default/1lane"], float64(d[2])/float64(d[0]))
				ratios["cold/1lane"] = append(ratios["cold/1lane"], float64(d[2])/float64(d[1]))
				ratios["default/2lanes"] = append(ratios["default/2lanes"], float64(d[3])/float64(d[0]))
			}
			for i, name := range names {
				b.ReportMetric(float64(items)/total[i].Seconds(), name+"-items/s")
			}
			for name, v := range ratios {
				slices.Sort(v)
				b.ReportMetric(v[len(v)/2], name+"-x")
			}
			run(batch.WithStats(func(s batch.Stats) { lanes = s }))()
			b.ReportMetric(float64(lanes.Lanes), "lanes")
		})
	}
}
