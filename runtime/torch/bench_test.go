//go:build cgo && wfbench

// The benchmarks of this file compare the engine with plain C++ loops run
// by the shim, which only a build with -tags wfbench has (make bench).

package torch

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"
)

// BenchmarkCall is the Go engine's per-call time: kwargs in, output tensor
// out, one cgo call each; "-buffer" puts the outputs in a reused
// tensor.OutputBuffer instead of fresh memory.
func BenchmarkCall(b *testing.B) {
	for _, c := range benchCases() {
		for _, buffered := range []bool{false, true} {
			name := c.name
			var opts engine.CallOptions
			if buffered {
				name += "-buffer"
				opts.Outputs = new(tensor.OutputBuffer)
			}
			b.Run(name, func(b *testing.B) {
				m, _ := c.load(b)
				ctx, kw := context.Background(), c.kwargs()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := m.Call(ctx, "forward", kw, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCallRawCpp is the same call in a plain C++ loop (the limit).
func BenchmarkCallRawCpp(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			m, _ := c.load(b)
			b.ResetTimer()
			d, err := m.benchRaw("forward", c.kwargs(), b.N, int(c.outputElems*4))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpp-ns/call")
		})
	}
}

// BenchmarkInterleaved runs, on the same module and input, in a new order
// each round (enginetest.RoundOrder), a run of about runLength of
// back-to-back calls of each of these, so that machine noise hits all alike:
//
//   - go: Module.Call from Go (kwargs in, Go-owned output out);
//   - go-buffer: the same with the outputs in a reused tensor.OutputBuffer,
//     as the C++ loop reuses its output buffer;
//   - go-noyield: Module.Call without its periodic yield (yield.go);
//   - go-unlocked: Module.Call without holding its OS thread during the
//     libtorch call (keepThread in yield.go);
//   - shim: the shim's own call path in a C++ loop (no Go crossing), which
//     does the same work as cpp: shim/cpp is the control that shows the
//     method's own bias (it should be 1);
//   - cpp: a plain C++ loop (host input copied into a tensor, forward,
//     output copied to a host buffer) — the limit;
//   - py: Python with Debian's torch, m(x) under inference_mode — the peer.
//
// b.N counts rounds. Metrics: mean ns per call of each; the medians over
// rounds of go/cpp (target ≤ 1.05), go-buffer/cpp, go/py (target < 1),
// go-noyield/cpp, go-unlocked/cpp, go-buffer/py and shim/cpp; and go/cpp and go/py of each column's fastest
// run ("-min"). The machine's speed drifts by up to ±30 % over tens of
// milliseconds, so single rounds are noisy; the fastest runs are each column
// in the machine's quiet phases.
func BenchmarkInterleaved(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			m, path := c.load(b)
			py := startPython(b, path, []int64{c.batch, c.width})
			ctx, kw := context.Background(), c.kwargs()
			chunk := callsPerRun(func() {
				if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
					b.Fatal(err)
				}
			})
			outBytes := int(c.outputElems*4) + 1024
			enc := c.pinnedKwargs(b)
			runGo := func() time.Duration {
				start := time.Now()
				for i := 0; i < chunk; i++ {
					if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			var buf tensor.OutputBuffer
			runGoBuffer := func() time.Duration {
				start := time.Now()
				for i := 0; i < chunk; i++ {
					if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{Outputs: &buf}); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			runGoNoYield := func() time.Duration {
				saved := yieldEvery
				yieldEvery = 0
				defer func() { yieldEvery = saved }()
				return runGo()
			}
			runGoUnlocked := func() time.Duration {
				keepThread = false
				defer func() { keepThread = true }()
				return runGo()
			}
			runShim := func() time.Duration {
				ns, res := shim.BenchCall(m.h, "forward", enc.buf, enc.ptrs, chunk, make([]byte, outBytes))
				if ns < 0 {
					b.Fatalf("shim loop: %s", res.Payload)
				}
				return time.Duration(ns)
			}
			runCpp := func() time.Duration {
				d, err := m.benchRaw("forward", kw, chunk, outBytes)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			runPy := func() time.Duration {
				d, err := py.Time(strconv.Itoa(chunk))
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			const goCol, shimCol, cppCol, pyCol, noYieldCol, bufCol, unlockedCol = 0, 1, 2, 3, 4, 5, 6
			runs := []func() time.Duration{runGo, runShim, runCpp, runPy, runGoNoYield, runGoBuffer, runGoUnlocked}
			var total, best [7]time.Duration
			ratios := map[string][]float64{}
			b.ResetTimer()
			for r := 0; r < b.N; r++ {
				var d [7]time.Duration
				for _, i := range enginetest.RoundOrder(r, len(runs)) {
					d[i] = runs[i]()
					total[i] += d[i]
					if best[i] == 0 || d[i] < best[i] {
						best[i] = d[i]
					}
				}
				ratio := func(name string, a, b int) { ratios[name] = append(ratios[name], float64(d[a])/float64(d[b])) }
				ratio("go/cpp", goCol, cppCol)
				ratio("go-buffer/cpp", bufCol, cppCol)
				ratio("go/py", goCol, pyCol)
				ratio("go-noyield/cpp", noYieldCol, cppCol)
				ratio("shim/cpp", shimCol, cppCol)
				ratio("go-unlocked/cpp", unlockedCol, cppCol)
				ratio("go-buffer/py", bufCol, pyCol)
			}
			calls := float64(b.N * chunk)
			for i, name := range []string{"go", "shim", "cpp", "py", "go-noyield", "go-buffer", "go-unlocked"} {
				b.ReportMetric(float64(total[i].Nanoseconds())/calls, name+"-ns/call")
			}
			for name, v := range ratios {
				b.ReportMetric(median(v), name)
			}
			// keepThread's effect, paired round by round, with the spread
			// of the rounds: the quartiles of go ÷ go-unlocked.
			q := make([]float64, 0, b.N)
			for r := range ratios["go/cpp"] {
				q = append(q, ratios["go/cpp"][r]/ratios["go-unlocked/cpp"][r])
			}
			slices.Sort(q)
			b.ReportMetric(q[len(q)/4], "go/go-unlocked-q1")
			b.ReportMetric(q[len(q)/2], "go/go-unlocked")
			b.ReportMetric(q[len(q)*3/4], "go/go-unlocked-q3")
			b.ReportMetric(float64(best[goCol])/float64(best[cppCol]), "go/cpp-min")
			b.ReportMetric(float64(best[bufCol])/float64(best[cppCol]), "go-buffer/cpp-min")
			b.ReportMetric(float64(best[goCol])/float64(best[pyCol]), "go/py-min")
		})
	}
}

// BenchmarkCallParts splits Go's per-call cost into its parts, interleaved
// like BenchmarkInterleaved (b.N rounds of about runLength per part). Each
// metric is the median over rounds of µs per call:
//
//   - cpp: the plain C++ loop (the limit);
//   - shim-loop: wf_call in a C++ loop (blob in, blob out, no Go);
//   - shim-call: one cgo call of wf_call per call, into a reused output
//     buffer (adds the crossing);
//   - fresh-out: the same into a freshly allocated output buffer, decoded
//     into a Go tensor (adds Go-owned output memory);
//   - go: Module.Call (adds kwargs encoding, the call slot, the yield).
func BenchmarkCallParts(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			m, _ := c.load(b)
			ctx, kw := context.Background(), c.kwargs()
			enc := c.pinnedKwargs(b)
			out := make([]byte, int(c.outputElems*4)+1024)
			chunk := callsPerRun(func() { shim.Call(m.h, "forward", enc.buf, enc.ptrs, 0, out) })
			timed := func(call func()) func() time.Duration {
				return func() time.Duration {
					start := time.Now()
					for i := 0; i < chunk; i++ {
						call()
						yieldIfDue()
					}
					return time.Since(start)
				}
			}
			parts := []struct {
				name string
				run  func() time.Duration
			}{
				{"cpp", func() time.Duration {
					d, err := m.benchRaw("forward", kw, chunk, len(out))
					if err != nil {
						b.Fatal(err)
					}
					return d
				}},
				{"shim-loop", func() time.Duration {
					ns, res := shim.BenchCall(m.h, "forward", enc.buf, enc.ptrs, chunk, out)
					if ns < 0 {
						b.Fatalf("shim loop: %s", res.Payload)
					}
					return time.Duration(ns)
				}},
				{"shim-call", timed(func() {
					if res := shim.Call(m.h, "forward", enc.buf, enc.ptrs, 0, out); res.Status != statusOK {
						b.Fatalf("call: %s", res.Payload)
					}
				})},
				{"fresh-out", timed(func() {
					res := shim.Call(m.h, "forward", enc.buf, enc.ptrs, 0, make([]byte, len(out)))
					if _, err := decodeValue(res.Payload, false); err != nil || res.Status != statusOK {
						b.Fatalf("call: %s %v", res.Payload, err)
					}
				})},
				{"go", func() time.Duration {
					start := time.Now()
					for i := 0; i < chunk; i++ {
						if _, err := m.Call(ctx, "forward", kw, engine.CallOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					return time.Since(start)
				}},
			}
			perCall := make([][]float64, len(parts))
			b.ResetTimer()
			for r := 0; r < b.N; r++ {
				for _, i := range enginetest.RoundOrder(r, len(parts)) {
					perCall[i] = append(perCall[i], float64(parts[i].run().Nanoseconds())/float64(chunk)/1e3)
				}
			}
			for i, p := range parts {
				b.ReportMetric(median(perCall[i]), p.name+"-µs/call")
			}
		})
	}
}
