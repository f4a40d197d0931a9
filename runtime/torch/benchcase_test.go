//go:build cgo

package torch

import (
	"path/filepath"
	goruntime "runtime"
	"sort"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime"
)

// benchCase is one "small module" the benchmarks time: a two-layer MLP.
type benchCase struct {
	name          string
	batch, width  int64
	hidden        int64
	outputElems   int64
	source        string
	params        map[string]*runtime.Tensor
	input         *runtime.Tensor
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
		params: map[string]*runtime.Tensor{
			"w1": runtime.FromFloat32(seq(int(width*hidden), -0.5, 1/float32(width*hidden)), width, hidden),
			"b1": runtime.FromFloat32(seq(int(hidden), 0, 0.01), hidden),
			"w2": runtime.FromFloat32(seq(int(hidden*width), 0.5, -1/float32(width*hidden)), hidden, width),
			"b2": runtime.FromFloat32(seq(int(width), 0, -0.01), width),
		},
		input: runtime.FromFloat32(in, batch, width),
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
	m, err := Default().load(path, runtime.LoadOptions{})
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
	var pin goruntime.Pinner
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
