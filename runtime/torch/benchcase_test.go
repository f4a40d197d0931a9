//go:build cgo

package torch

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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

// pythonPeer is a testdata/bench_server.py process timing calls of a model
// (TorchScript, or an AOTInductor package on torch ≥ 2.6) in Python on
// request, with as many intra-op threads as the engine.
type pythonPeer struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// startPython starts the peer for model on an input of shape; it skips the
// benchmark when Debian's Python cannot import torch.
func startPython(b *testing.B, model string, shape []int64) *pythonPeer {
	b.Helper()
	if err := exec.Command(debianPython, "-c", "import torch").Run(); err != nil {
		b.Skipf("%s cannot import torch: install python3-torch for the Python column", debianPython)
	}
	args := []string{filepath.Join("testdata", "bench_server.py"), model, strconv.Itoa(engineThreads()), "x"}
	for _, d := range shape {
		args = append(args, strconv.FormatInt(d, 10))
	}
	cmd := exec.Command(debianPython, args...)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &pythonPeer{in: in, out: bufio.NewScanner(outPipe)}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	if !p.out.Scan() || p.out.Text() != "ready" {
		b.Fatalf("bench_server.py %s did not start: %q %v", model, p.out.Text(), p.out.Err())
	}
	return p
}

// run times n calls in Python.
func (p *pythonPeer) run(n int) (time.Duration, error) {
	if _, err := fmt.Fprintln(p.in, n); err != nil {
		return 0, err
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("bench_server.py: %v", p.out.Err())
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
	return time.Duration(ns), err
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
