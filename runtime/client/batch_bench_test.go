//go:build cgo

package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// The batch benchmarks' job: batchItems items of batchLength token ids,
// through the tiny encoder in batches of 8 (its manifest's max).
const (
	batchItems  = 10_000
	batchLength = 32
	batchSize   = 8
)

// batchTokens is item i's token ids, as testdata/batch_peer.py builds them.
func batchTokens(i int) []int64 {
	ids := make([]int64, batchLength)
	for j := range ids {
		ids[j] = int64((i*31 + j*7) % 1000)
	}
	return ids
}

func batchJob() []tinyencoder.EmbedParams {
	ps := make([]tinyencoder.EmbedParams, batchItems)
	for i := range ps {
		ps[i] = tinyencoder.DefaultEmbedParams()
		ps[i].Tokens = tensor.FromInt64(batchTokens(i), batchLength)
	}
	return ps
}

// BenchmarkEmbedBatch runs 10,000 items through the generated tiny-encoder
// client's EmbedBatch (batches of 8): the batch path from typed params to
// typed results, with one lane and with two (batch.WithLanes).
func BenchmarkEmbedBatch(b *testing.B) {
	c := newTinyEncoder(b)
	ps := batchJob()
	if _, err := c.EmbedBatch(context.Background(), ps[:8]); err != nil {
		b.Fatal(err)
	}
	for _, lanes := range []int{1, 2} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				res, err := c.EmbedBatch(context.Background(), ps, batch.WithLanes(lanes))
				if err != nil || len(res) != batchItems {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batchItems)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// BenchmarkEmbedBatchInterleaved compares the same job, in a new order
// each round (enginetest.RoundOrder; b.N rounds), across:
//
//   - go: the generated EmbedBatch with default settings, typed params in,
//     typed per-item results out (the lanes batch.WithAutoLanes chose in
//     its first run: two here on a 2-core machine);
//   - go-slice: Module.Call on 8-item slices of one pre-stacked tensor, the
//     output kept whole (Go's floor for the job);
//   - py-stack: Python stacking each batch from per-item tensors and
//     splitting the output per item (what EmbedBatch does);
//   - py-slice: Python slicing one pre-stacked tensor, the output kept whole
//     (Python's fastest form of the job);
//   - go-1lane: the generated EmbedBatch with batch.WithLanes(1), one
//     forward call at a time.
//
// Metrics: items/s of each (total over rounds), and the medians over
// rounds of go's and go-1lane's throughput over each Python column's
// (target: go ≥ 1.2 × py-slice).
func BenchmarkEmbedBatchInterleaved(b *testing.B) {
	c := newTinyEncoder(b)
	path := filepath.Join(tiny.Dir(b), tinymodels.Files["tiny-encoder"])
	py := startBatchPeer(b, path)
	ctx := context.Background()
	ps := batchJob()
	mod, err := c.Backend().(*client.Client).Module()
	if err != nil {
		b.Fatal(err)
	}
	all := make([]int64, 0, batchItems*batchLength)
	for i := range batchItems {
		all = append(all, batchTokens(i)...)
	}
	stacked := tensor.FromInt64(all, batchItems, batchLength)
	step := batchSize * batchLength * 8
	embed := func(opts ...batch.Option) func() time.Duration {
		return func() time.Duration {
			t0 := time.Now()
			res, err := c.EmbedBatch(ctx, ps, opts...)
			if err != nil || len(res) != batchItems {
				b.Fatal(err)
			}
			return time.Since(t0)
		}
	}
	// go: default settings (batch.WithAutoLanes: the lanes its first run
	// chose); go-1lane: batch.WithLanes(1).
	runGo, runGo1 := embed(), embed(batch.WithLanes(1))
	runGoSlice := func() time.Duration {
		t0 := time.Now()
		outs := make([]any, 0, batchItems/batchSize)
		for lo := 0; lo < batchItems; lo += batchSize {
			x := &tensor.Tensor{DType: tensor.Int64, Shape: []int64{batchSize, batchLength}, Data: stacked.Data[lo/batchSize*step : (lo/batchSize+1)*step]}
			out, err := mod.Call(ctx, "forward", map[string]any{"tokens": x, "normalize": true}, engine.CallOptions{})
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, out)
		}
		return time.Since(t0)
	}
	runPy := func(job string) func() time.Duration {
		return func() time.Duration {
			d, err := py.run(job)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	names := []string{"go", "go-slice", "py-stack", "py-slice", "go-1lane"}
	runs := []func() time.Duration{runGo, runGoSlice, runPy("stack"), runPy("slice"), runGo1}
	runGo()
	runGo1()
	runGoSlice()
	total := make([]time.Duration, len(runs))
	ratios := map[string][]float64{}
	b.ResetTimer()
	for r := range b.N {
		d := make([]time.Duration, len(runs))
		for _, i := range enginetest.RoundOrder(r, len(runs)) {
			runs[i]() // untimed: pays for what the previous column left behind
			d[i] = runs[i]()
			total[i] += d[i]
		}
		ratios["go/py-stack"] = append(ratios["go/py-stack"], float64(d[2])/float64(d[0]))
		ratios["go/py-slice"] = append(ratios["go/py-slice"], float64(d[3])/float64(d[0]))
		ratios["go-slice/py-slice"] = append(ratios["go-slice/py-slice"], float64(d[3])/float64(d[1]))
		ratios["go-1lane/py-slice"] = append(ratios["go-1lane/py-slice"], float64(d[3])/float64(d[4]))
	}
	for i, name := range names {
		b.ReportMetric(float64(batchItems*b.N)/total[i].Seconds(), name+"-items/s")
	}
	for name, v := range ratios {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name+"-x")
	}
	var st batch.Stats
	if _, err := c.EmbedBatch(ctx, ps, batch.WithStats(func(s batch.Stats) { st = s })); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Lanes), "go-lanes")
}

// batchPeer is a testdata/batch_peer.py process.
type batchPeer struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// debianPython is the interpreter that imports Debian's python3-torch.
const debianPython = "/usr/bin/python3"

func startBatchPeer(b *testing.B, model string) *batchPeer {
	b.Helper()
	if err := exec.Command(debianPython, "-c", "import torch").Run(); err != nil {
		b.Skipf("%s cannot import torch: install python3-torch for the Python columns", debianPython)
	}
	threads := 1
	if info, err := torch.Default().ParallelInfo(); err == nil {
		if m := regexp.MustCompile(`at::get_num_threads\(\) : (\d+)`).FindStringSubmatch(info); m != nil {
			threads, _ = strconv.Atoi(m[1])
		}
	}
	cmd := exec.Command(debianPython, filepath.Join("testdata", "batch_peer.py"), model,
		strconv.Itoa(threads), strconv.Itoa(batchItems), strconv.Itoa(batchLength), strconv.Itoa(batchSize))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	p := &batchPeer{in: in, out: bufio.NewScanner(out)}
	if !p.out.Scan() || p.out.Text() != "ready" {
		b.Fatalf("batch_peer.py did not start: %q %v", p.out.Text(), p.out.Err())
	}
	return p
}

// run runs the job once in Python and returns its time.
func (p *batchPeer) run(job string) (time.Duration, error) {
	if _, err := fmt.Fprintln(p.in, job); err != nil {
		return 0, err
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("batch_peer.py: %v", p.out.Err())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
	return time.Duration(ns), err
}
