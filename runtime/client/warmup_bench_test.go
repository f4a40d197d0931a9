//go:build cgo

package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/client"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// warmupProbeEnv carries one measurement of BenchmarkWarmup to
// TestWarmupProbe in a fresh process: "MODEL WARM SIZE CHECKPOINT".
const warmupProbeEnv = "WFGEN_WARMUP_PROBE"

// warmupRequests is how many requests at one batch size a probe times.
const warmupRequests = 10

// probeResult is what one probe measured.
type probeResult struct {
	Load     time.Duration   // client.Load, or the warm-up's load
	Warmup   time.Duration   // the warm-up's calls (0 without warm-up)
	Requests []time.Duration // the first warmupRequests requests, in order
}

type warmupModel struct {
	name      string
	inv       int  // index in invModels; -1 for the tiny encoder's manifest
	length    int  // token count of a tiny-encoder request
	invariant bool // client.WithBatchInvariant: one batch size, warmed up three times
}

// warmupModels are the models BenchmarkWarmup measures: the tiny encoder
// through its manifest (warm-up at L = 16), with requests of 16 tokens and
// of 32 (a length the warm-up did not run), and the attention encoder and
// mobilenet_v3_small with warmup: {} — the attention encoder also with
// invariant batching (every request padded to 8, the warm-up three calls at
// 8).
var warmupModels = []warmupModel{
	{"tiny-encoder", -1, 16, false},
	{"tiny-encoder-L32", -1, 32, false},
	{"attention", 1, 0, false},
	{"attention-invariant", 1, 0, true},
	{"mobilenet_v3_small", 2, 0, false},
}

// TestWarmupProbe is BenchmarkWarmup's measurement in a fresh process, so
// that nothing of an earlier call is warm in libtorch (kernels, the
// profiling executor, the allocator): it loads the model, warms it up when
// asked, and times the first requests at one batch size, each a RunBatch of
// that many items. It is skipped unless the benchmark runs it.
func TestWarmupProbe(t *testing.T) {
	t.Parallel()
	arg := os.Getenv(warmupProbeEnv)
	if arg == "" {
		t.Skip("run by BenchmarkWarmup in a fresh process")
	}
	var name, path string
	var warm bool
	var size int
	if _, err := fmt.Sscan(arg, &name, &warm, &size, &path); err != nil {
		t.Fatalf("%s=%q: %v", warmupProbeEnv, arg, err)
	}
	i := slices.IndexFunc(warmupModels, func(m warmupModel) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("no model %q", name)
	}
	wm := warmupModels[i]
	var spec *wfspec.ModelInferenceSpec
	var item func(int) *tensor.Tensor
	arg = "tokens"
	if wm.inv < 0 {
		spec = loadSpec(t, "tiny-encoder")
		item = func(i int) *tensor.Tensor {
			v := make([]int64, wm.length)
			for j := range v {
				v[j] = int64((i*31 + j*7) % 1000)
			}
			return tensor.FromInt64(v, int64(wm.length))
		}
	} else {
		md := invModels[wm.inv]
		spec = invariantSpec(md, false)
		spec.Tasks[0].Warmup = &wfspec.WarmupSpec{}
		item, arg = md.item, md.arg
	}
	opts := []client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}
	if wm.invariant {
		opts = append(opts, client.WithBatchInvariant())
	}
	c, err := client.New(spec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var res probeResult
	if warm {
		rep, err := c.Warmup(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res.Load, res.Warmup = rep.Load, rep.Total()-rep.Load
	} else {
		t0 := time.Now()
		if _, _, err := c.Load(); err != nil {
			t.Fatal(err)
		}
		res.Load = time.Since(t0)
	}
	for r := range warmupRequests {
		items := make([]map[string]any, size)
		for k := range items {
			items[k] = map[string]any{arg: item(r*size + k)}
		}
		t0 := time.Now()
		if _, err := c.RunBatch(ctx, "embed", items); err != nil {
			t.Fatal(err)
		}
		res.Requests = append(res.Requests, time.Since(t0))
	}
	b, _ := json.Marshal(res)
	fmt.Printf("WARMUP-PROBE %s\n", b)
}

// runProbe runs TestWarmupProbe in a fresh process of this test binary.
func runProbe(b *testing.B, name string, warm bool, size int, path string) probeResult {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWarmupProbe$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %v %d %s", warmupProbeEnv, name, warm, size, path))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("probe %s warm=%v size=%d: %v\n%s", name, warm, size, err, out.Bytes())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "WARMUP-PROBE "); ok {
			var r probeResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				b.Fatal(err)
			}
			return r
		}
	}
	b.Fatalf("probe %s warm=%v size=%d printed no result:\n%s", name, warm, size, out.Bytes())
	return probeResult{}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkWarmup measures what warm-up buys: for each model and each pad
// size n (1, 2, 4, 8), a fresh process loads the model — and warms it up
// (Client.Warmup), or not — then times its first warmupRequests requests,
// each a RunBatch of n items (one forward call at n). Per size, medians over
// b.N rounds:
//
//   - nN-p50-µs: the steady latency, the median of requests 5 to 10 of
//     both processes;
//   - nN-cold-first-x: the first request without warm-up ÷ that p50;
//   - nN-warm-first-x: the first request after warm-up ÷ that p50;
//   - nN-warm-max10-x: the slowest of the first 10 after warm-up ÷ p50;
//
// and warmup-ms, the time of one process's warm-up calls (all four sizes,
// the load excluded).
// The target: every warm ratio within 2.
func BenchmarkWarmup(b *testing.B) {
	sizes := []int{1, 2, 4, 8}
	for _, wm := range warmupModels {
		b.Run(wm.name, func(b *testing.B) {
			var path string
			if wm.inv < 0 {
				path = filepath.Join(tiny.Dir(b), tinymodels.Files["tiny-encoder"])
			} else {
				path = invModels[wm.inv].path(b)
			}
			metrics := map[string][]float64{}
			add := func(k string, v float64) { metrics[k] = append(metrics[k], v) }
			b.ResetTimer()
			for range b.N {
				var warmup time.Duration
				for _, n := range sizes {
					cold := runProbe(b, wm.name, false, n, path)
					warm := runProbe(b, wm.name, true, n, path)
					warmup += warm.Warmup
					var steady []float64
					for _, r := range [][]time.Duration{cold.Requests, warm.Requests} {
						for _, d := range r[4:] {
							steady = append(steady, float64(d.Microseconds()))
						}
					}
					p50 := median(steady)
					us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
					add(fmt.Sprintf("n%d-p50-µs", n), p50)
					add(fmt.Sprintf("n%d-cold-first-x", n), us(cold.Requests[0])/p50)
					add(fmt.Sprintf("n%d-warm-first-x", n), us(warm.Requests[0])/p50)
					add(fmt.Sprintf("n%d-warm-max10-x", n), us(slices.Max(warm.Requests))/p50)
				}
				add("warmup-ms", float64(warmup.Microseconds())/1000/float64(len(sizes)))
			}
			for k, v := range metrics {
				b.ReportMetric(median(v), k)
			}
		})
	}
}
