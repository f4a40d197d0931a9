package worldmodel

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/pypeer"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// stepsPeer is the Python side of BenchmarkSteps: it loads the same
// checkpoint and, for each line "B N" it reads, calls steps N times on a
// batch of B sessions (one frame each, no control pressed, every session
// one step past the checkpoint's start, as in Go) and prints the
// nanoseconds they took.
const stepsPeer = `
import sys, time, torch
torch.set_num_threads(1)
m = torch.jit.load(sys.argv[1])
with torch.inference_mode():
    one = m.steps(1, torch.zeros(1, 4))["state"]
print("ready", flush=True)
for line in sys.stdin:
    b, n = (int(v) for v in line.split())
    controls = torch.zeros(b, 4)
    state = one.expand(b, 2, 32, 32, 3).contiguous()
    with torch.inference_mode():
        m.steps(1, controls, None, state)
        t = time.perf_counter_ns()
        for _ in range(n):
            m.steps(1, controls, None, state)
        print(time.perf_counter_ns() - t, flush=True)
`

// BenchmarkSteps times one forward of the world model's steps — the call
// session batching makes — at batch sizes 1 to 8 in Go through the
// libtorch engine, and the same calls in Python torch right after, in one
// run (each on one intra-op thread: set WORLDFOUNDRY_TORCH_THREADS=1). It
// reports the time per call (ns/op), per session (ms/session) and
// Python's time per call (py-ms/call). docs/benchmarks/README.md, "Many
// players", has the figures; the issue sized the players benchmark from
// Python's.
func BenchmarkSteps(b *testing.B) {
	ckpt := filepath.Join(modelRoot(b), "checkpoints", "worldmodel.pt")
	e, err := engine.DefaultEngine()
	if err != nil {
		b.Skip(err)
	}
	m, err := e.Load(ckpt, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()

	py := pypeer.Start(b, "the Python peer", "-c", stepsPeer, ckpt)

	ctx := context.Background()
	for _, batch := range []int64{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			args := map[string]any{
				"num_frames": int64(1),
				"controls":   tensor.Zeros(tensor.Float32, batch, 4),
				"state":      startStates(b, m, batch),
			}
			if _, err := m.Call(ctx, "steps", args, engine.CallOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := m.Call(ctx, "steps", args, engine.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perCall := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perCall)/1e6/float64(batch), "ms/session")
			d, err := py.Time(fmt.Sprint(batch, " ", b.N))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d)/1e6/float64(b.N), "py-ms/call")
		})
	}
}

// startStates is batch copies of the checkpoint's start frames, the state
// steps takes: uint8 [batch, 2, 32, 32, 3].
func startStates(b *testing.B, m engine.Module, batch int64) *tensor.Tensor {
	b.Helper()
	out, err := m.Call(context.Background(), "steps", map[string]any{
		"num_frames": int64(1), "controls": tensor.Zeros(tensor.Float32, 1, 4),
	}, engine.CallOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// The state after one step from the start: two frames of the game.
	one := out.(map[string]any)["state"].(*tensor.Tensor)
	all := make([]uint8, 0, int(batch)*len(one.Data))
	for range batch {
		all = append(all, one.Data...)
	}
	return tensor.FromUint8(all, batch, 2, 32, 32, 3)
}
