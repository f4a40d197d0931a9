//go:build cgo

package torch

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// BenchmarkCompileInterleaved times one module uncompiled and compiled by
// each kind of backend, in a new order each round (enginetest.RoundOrder;
// b.N rounds of about runLength of back-to-back calls per column), so that
// the choice of the compile default rests on one comparable run:
//
//   - eager: the module as loaded;
//   - freeze: backend "freeze" (parameters become constants);
//   - optimize: backend "inductor", the default (freeze, batch norms folded,
//     conv-add-relu fusion, frozen linear transposes).
//
// Modules: torchvision's mobilenet_v3_small (random weights, [2,3,224,224];
// needs python3-torchvision, else skipped) and the two-layer MLPs of the
// engine benchmarks. Metrics: µs per call of each column (mean), and the
// median over rounds of each compiled column's time over eager's (below 1
// is a speedup).
func BenchmarkCompileInterleaved(b *testing.B) {
	type module struct {
		name  string
		path  string
		input map[string]any
	}
	var mods []module
	for _, c := range benchCases()[1:] {
		_, path := c.load(b)
		mods = append(mods, module{c.name, path, c.kwargs()})
	}
	if f := makeParityFixture(b); f.dir != "" {
		in := readFloat32File(b, filepath.Join(f.dir, "input.bin"))
		mods = append(mods, module{f.Model, filepath.Join(f.dir, "model.pt"), map[string]any{"x": tensor.FromFloat32(in, f.InputShape...)}})
	}
	columns := []struct{ name, backend string }{{"eager", ""}, {"freeze", "freeze"}, {"optimize", "inductor"}}
	for _, md := range mods {
		b.Run(md.name, func(b *testing.B) {
			ctx := context.Background()
			eager, err := Default().Load(md.path, engine.LoadOptions{Device: "cpu"})
			if err != nil {
				b.Fatal(err)
			}
			defer eager.Close()
			name := "x"
			if s, err := eager.Schema("forward"); err == nil && len(s.Arguments) == 1 {
				name = s.Arguments[0].Name
			}
			kw := map[string]any{name: md.input["x"]}
			ms := []engine.Module{eager}
			on := true
			for _, col := range columns[1:] {
				c, err := CompileModule(eager, CompileOptions{Enabled: &on, Strict: &on, Backend: col.backend, CacheDir: "off"})
				if err != nil {
					b.Fatalf("%s: %v", col.name, err)
				}
				defer c.Close()
				ms = append(ms, c)
			}
			calls := make([]int, len(ms))
			for i, m := range ms {
				calls[i] = callsPerRun(func() {
					if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
						b.Fatal(err)
					}
				})
			}
			total := make([]time.Duration, len(ms))
			n := make([]int, len(ms))
			ratios := make([][]float64, len(ms))
			b.ResetTimer()
			for r := range b.N {
				per := make([]float64, len(ms))
				for _, i := range enginetest.RoundOrder(r, len(ms)) {
					t0 := time.Now()
					for range calls[i] {
						if _, err := ms[i].Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					d := time.Since(t0)
					total[i] += d
					n[i] += calls[i]
					per[i] = float64(d) / float64(calls[i])
				}
				for i := range ms[1:] {
					ratios[i+1] = append(ratios[i+1], per[i+1]/per[0])
				}
			}
			for i, col := range columns {
				b.ReportMetric(float64(total[i].Microseconds())/float64(n[i]), col.name+"-µs/call")
				if i > 0 {
					b.ReportMetric(median(ratios[i]), col.name+"/eager")
				}
			}
		})
	}
}
