//go:build cgo

package torch

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/examples/aoti"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/internal/pypeer"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// BenchmarkAOTIMobileNetInterleaved times one call of torchvision's
// mobilenet_v3_small (examples/aoti), batch 1 and 8, four ways, in a new
// order each round (enginetest.RoundOrder) so that machine noise hits all
// alike:
//
//   - go-aoti: the AOTInductor package through AOTIModule.Call;
//   - py-aoti: the same package from Python (torch._inductor.aoti_load_package,
//     m(x) under inference_mode);
//   - go-ts: the same model as a TorchScript archive through Module.Call;
//   - py-ts: that archive from Python (torch.jit.load).
//
// b.N counts rounds of about runLength per column, each column run once
// untimed before its timed run (a column otherwise pays for the state the
// previous one left: caches, idle threads). Metrics: the median
// over rounds of µs per call of each, and of the ratios go-aoti/py-aoti,
// go-aoti/go-ts and py-aoti/py-ts. Needs libtorch ≥ 2.6 (the 2.x lane).
func BenchmarkAOTIMobileNetInterleaved(b *testing.B) {
	if v := Default().LibtorchVersion(); !v.AtLeast(2, 6) {
		b.Skipf("AOTInductor packages need libtorch ≥ 2.6 (this engine: %s); run it in the lane (scripts/libtorch2-lane.sh run go test -bench ...)", v)
	}
	f, err := aoti.Cached(context.Background(), aoti.MobileNet)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int64{1, 8} {
		b.Run(fmt.Sprintf("batch-%d", n), func(b *testing.B) {
			shape := []int64{n, 3, 224, 224}
			vals := make([]float32, n*3*224*224)
			for i := range vals {
				vals[i] = 0.001 * float32(i)
			}
			x := tensor.FromFloat32(vals, shape...)
			kw := map[string]any{"x": x}
			am, err := Default().Load(f.Package, engine.LoadOptions{Device: "cpu"})
			if err != nil {
				b.Fatal(err)
			}
			defer am.Close()
			tm, err := Default().Load(f.TorchScript, engine.LoadOptions{Device: "cpu"})
			if err != nil {
				b.Fatal(err)
			}
			defer tm.Close()
			ctx := context.Background()
			call := func(m engine.Module) {
				if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			chunk := callsPerRun(func() { call(am) })
			goRun := func(m engine.Module) func() time.Duration {
				call(m) // warm
				return func() time.Duration {
					start := time.Now()
					for range chunk {
						call(m)
					}
					return time.Since(start)
				}
			}
			pyRun := func(p *pypeer.Peer) func() time.Duration {
				return func() time.Duration {
					d, err := p.Time(strconv.Itoa(chunk))
					if err != nil {
						b.Fatal(err)
					}
					return d
				}
			}
			pyA, pyT := pyRun(startPython(b, f.Package, shape)), pyRun(startPython(b, f.TorchScript, shape))
			names := []string{"go-aoti", "py-aoti", "go-ts", "py-ts"}
			runs := []func() time.Duration{goRun(am), pyA, goRun(tm), pyT}
			perCall := make([][]float64, len(runs))
			ratios := map[string][]float64{}
			b.ResetTimer()
			for r := 0; r < b.N; r++ {
				var us [4]float64
				for _, i := range enginetest.RoundOrder(r, len(runs)) {
					runs[i]() // untimed: pays for what the previous column left behind
					us[i] = float64(runs[i]().Nanoseconds()) / float64(chunk) / 1e3
					perCall[i] = append(perCall[i], us[i])
				}
				ratios["go-aoti/py-aoti"] = append(ratios["go-aoti/py-aoti"], us[0]/us[1])
				ratios["go-aoti/go-ts"] = append(ratios["go-aoti/go-ts"], us[0]/us[2])
				ratios["py-aoti/py-ts"] = append(ratios["py-aoti/py-ts"], us[1]/us[3])
			}
			for i, name := range names {
				b.ReportMetric(median(perCall[i]), name+"-µs/call")
			}
			for name, v := range ratios {
				b.ReportMetric(median(v), name)
			}
			b.ReportMetric(float64(chunk), "calls/run")
		})
	}
}

// BenchmarkAOTILoad times Load and Close of each exported model as an
// AOTInductor package (libtorch unpacks the zip into a temporary folder and
// dlopens the compiled model) and as a TorchScript archive.
func BenchmarkAOTILoad(b *testing.B) {
	if v := Default().LibtorchVersion(); !v.AtLeast(2, 6) {
		b.Skipf("AOTInductor packages need libtorch ≥ 2.6 (this engine: %s)", v)
	}
	for _, model := range []string{aoti.Encoder, aoti.MobileNet} {
		f, err := aoti.Cached(context.Background(), model)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct{ name, path string }{{"aoti", f.Package}, {"torchscript", f.TorchScript}} {
			b.Run(model+"/"+c.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					m, err := Default().Load(c.path, engine.LoadOptions{Device: "cpu"})
					if err != nil {
						b.Fatal(err)
					}
					m.Close()
				}
			})
		}
	}
}
