package client_test

import (
	"context"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// BenchmarkEmbedBatch runs 10,000 items through the generated tiny-encoder
// client's EmbedBatch (batches of 8, padded): the batch path from typed
// params to typed results. docs/benchmarks.md compares it with Python.
func BenchmarkEmbedBatch(b *testing.B) {
	dir := checkpoints(b)
	c, err := tinyencoder.New(client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const n = 10_000
	ps := make([]tinyencoder.EmbedParams, n)
	for i := range ps {
		ps[i] = tinyencoder.DefaultEmbedParams()
		ids := make([]int64, 32)
		for j := range ids {
			ids[j] = int64((i*31 + j*7) % 1000)
		}
		ps[i].Tokens = runtime.FromInt64(ids, 32)
	}
	if _, err := c.EmbedBatch(context.Background(), ps[:8]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := c.EmbedBatch(context.Background(), ps)
		if err != nil || len(res) != n {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
}
