//go:build cgo

package torch

import (
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/pypeer"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// benchCase is one "small module" the benchmarks time: a two-layer MLP.
type benchCase struct {
	name          string
	batch, width  int64
	hidden        int64
	outputElems   int64
	source        string
	params        map[string]*tensor.Tensor
	input         *tensor.Tensor
	expectedShape []int64
}

const mlpSource = `
def forward(self, x: Tensor) -> Tensor:
    h = torch.relu(torch.matmul(x, self.w1) + self.b1)
    return torch.matmul(h, self.w2) + self.b2
`

func newBenchCase(name string, batch, width, hidden int64) benchCase {
	n := batch * width
	in := make([]float32, n)
	for i := range in {
		in[i] = 0.001 * float32(i) // the values bench_server.py builds
	}
	return benchCase{
		name: name, batch: batch, width: width, hidden: hidden, outputElems: batch * width,
		source: mlpSource,
		params: map[string]*tensor.Tensor{
			"w1": tensor.FromFloat32(seq(int(width*hidden), -0.5, 1/float32(width*hidden)), width, hidden),
			"b1": tensor.FromFloat32(seq(int(hidden), 0, 0.01), hidden),
			"w2": tensor.FromFloat32(seq(int(hidden*width), 0.5, -1/float32(width*hidden)), hidden, width),
			"b2": tensor.FromFloat32(seq(int(width), 0, -0.01), width),
		},
		input: tensor.FromFloat32(in, batch, width),
	}
}

// benchCases: "tiny" is all per-call overhead (a few µs), "small" a small
// module doing some work (tens of µs), "medium" hundreds of µs.
func benchCases() []benchCase {
	return []benchCase{
		newBenchCase("tiny-1x16", 1, 16, 16),
		newBenchCase("small-4x128", 4, 128, 128),
		newBenchCase("medium-8x256", 8, 256, 256),
	}
}

func (c benchCase) load(tb testing.TB) (*Module, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), c.name+".pt")
	if err := BuildModule(ModuleSource{Source: c.source, Parameters: c.params}, path); err != nil {
		tb.Fatal(err)
	}
	m, err := Default().load(path, engine.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m, path
}

// pinnedKwargs encodes the case's kwargs for direct shim calls, pinned until
// the benchmark ends.
func (c benchCase) pinnedKwargs(b *testing.B) *encoder {
	b.Helper()
	enc, err := encodeKwargs(c.kwargs())
	if err != nil {
		b.Fatal(err)
	}
	var pin runtime.Pinner
	enc.pin(&pin)
	b.Cleanup(func() { pin.Unpin(); enc.release() })
	return enc
}

// callsPerRun is how many calls of call fill runLength, from 50 timed calls
// after 20 to warm up.
func callsPerRun(call func()) int {
	for i := 0; i < 20; i++ {
		call()
	}
	start := time.Now()
	for i := 0; i < 50; i++ {
		call()
	}
	return max(20, int(runLength/(time.Since(start)/50)))
}

func (c benchCase) kwargs() map[string]any { return map[string]any{"x": c.input} }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runLength is how long each run of back-to-back calls in
// BenchmarkInterleaved lasts: longer than the Go runtime's 10 ms
// forced-preemption period, as in a batch loop or a stream, so that the
// steady state of back-to-back calls is what is measured.
const runLength = 30 * time.Millisecond

// startPython starts testdata/bench_server.py, which times calls of a model
// (TorchScript, or an AOTInductor package on torch ≥ 2.6) in Python on an
// input of shape, with as many intra-op threads as the engine: each request
// is the number of calls. It skips the benchmark when Debian's Python
// cannot import torch.
func startPython(b *testing.B, model string, shape []int64) *pypeer.Peer {
	b.Helper()
	args := []string{filepath.Join("testdata", "bench_server.py"), model, strconv.Itoa(engineThreads()), "x"}
	for _, d := range shape {
		args = append(args, strconv.FormatInt(d, 10))
	}
	return pypeer.Start(b, "bench_server.py "+model, args...)
}

// engineThreads is the engine's intra-op thread count (1 when unknown).
func engineThreads() int {
	if info, err := Default().ParallelInfo(); err == nil {
		if m := regexp.MustCompile(`at::get_num_threads\(\) : (\d+)`).FindStringSubmatch(info); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil {
				return n
			}
		}
	}
	return 1
}
