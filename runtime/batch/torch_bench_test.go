//go:build cgo

package batch_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/pypeer"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A small TorchScript encoder: [n, 256] → tanh(x·W1 + b1)·W2 → [n, 128].
const encoderSource = `
def forward(self, x: Tensor) -> Tensor:
    return torch.matmul(torch.tanh(torch.matmul(x, self.w1) + self.b1), self.w2)
`

const (
	encIn, encHidden, encOut = 256, 512, 128
	encItems                 = 1000 // 15 batches of 64 and one of 40
	encMax                   = 64
)

func buildEncoder(b *testing.B) string {
	b.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	path := filepath.Join(b.TempDir(), "encoder.pt")
	params := map[string]*tensor.Tensor{
		"w1": tensor.FromFloat32(randomFloats(rng, encIn*encHidden, 0.06), encIn, encHidden),
		"b1": tensor.FromFloat32(randomFloats(rng, encHidden, 0.1), encHidden),
		"w2": tensor.FromFloat32(randomFloats(rng, encHidden*encOut, 0.04), encHidden, encOut),
	}
	if err := torch.DefineModule(encoderSource, params, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func encoderItems() [][]byte {
	rng := rand.New(rand.NewPCG(13, 14))
	items := make([][]byte, encItems)
	for i := range items {
		items[i] = rowBytes(randomFloats(rng, encIn, 1))
	}
	return items
}

// direct runs fwd over consecutive chunks of items with a plain loop.
func direct(ctx context.Context, items [][]byte, fwd batch.Forward[[]byte, []byte]) error {
	out := make([][]byte, len(items))
	for lo := 0; lo < len(items); lo += encMax {
		hi := min(lo+encMax, len(items))
		res, err := fwd(ctx, items[lo:hi])
		if err != nil {
			return err
		}
		copy(out[lo:hi], res)
	}
	return nil
}

// startPython starts testdata/encoder_bench.py, which times one pass of
// the encoder over the benchmark's items in Python for each (empty)
// request; its ready line says its torch thread count.
func startPython(b *testing.B, model string) *pypeer.Peer {
	b.Helper()
	return pypeer.Start(b, "encoder_bench.py", "testdata/encoder_bench.py", model,
		strconv.Itoa(encItems), strconv.Itoa(encIn), strconv.Itoa(encMax))
}

// BenchmarkTorchEncoder measures, over a real TorchScript encoder on
// libtorch (CPU): the executor against a direct loop of the same forward
// calls; padded static sizes against unpadded dynamic sizes, both on the
// compiled (frozen + fused) module; and the same loop in Python with
// Debian's torch. Figures are in docs/benchmarks/batch.md.
func BenchmarkTorchEncoder(b *testing.B) {
	ctx := context.Background()
	path := buildEncoder(b)
	items := encoderItems()
	m, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	fwd := tensorForward(m, "forward", encIn, encOut)
	for range 3 { // warm up the profiling executor
		if err := direct(ctx, items, fwd); err != nil {
			b.Fatal(err)
		}
	}

	run := func(f batch.Forward[[]byte, []byte], opts ...batch.Option) func() error {
		return func() error {
			_, err := batch.Run(ctx, items, f, opts...)
			return err
		}
	}

	b.Run("executor_vs_direct", func(b *testing.B) {
		interleave(b, "direct", "executor",
			timed(func() error { return direct(ctx, items, fwd) }),
			timed(run(fwd, batch.WithMaxBatchSize(encMax))))
	})

	b.Run("padded_vs_dynamic_compiled", func(b *testing.B) {
		b.Setenv(torch.EnvCompileCacheDir, "off")
		on := true
		cm, err := torch.CompileModule(m, torch.CompileOptions{Enabled: &on, Strict: &on})
		if err != nil {
			b.Fatal(err)
		}
		defer cm.Close()
		cfwd := tensorForward(cm, "forward", encIn, encOut)
		padded := run(cfwd, batch.WithPadSizes(1, 2, 4, 8, 16, 32, 64), batch.WithPersistentForward("bench/encoder"))
		for range 3 {
			if err := padded(); err != nil {
				b.Fatal(err)
			}
		}
		interleave(b, "dynamic", "padded", timed(run(cfwd, batch.WithMaxBatchSize(encMax))), timed(padded))
	})

	b.Run("go_vs_python", func(b *testing.B) {
		py := startPython(b, path)
		b.Logf("python torch threads: %s", py.Ready)
		pass := func() (time.Duration, error) { return py.Time("") }
		interleave(b, "python", "go", pass, timed(run(fwd, batch.WithMaxBatchSize(encMax))))
	})
}
