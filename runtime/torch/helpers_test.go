//go:build cgo

package torch

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// buildModule builds src into a file under t.TempDir and returns its path.
func buildModule(t testing.TB, src ModuleSource) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.pt")
	if err := BuildModule(src, path); err != nil {
		t.Fatalf("BuildModule: %v", err)
	}
	return path
}

// loadModule builds and loads src on CPU with opts.
func loadModule(t testing.TB, src ModuleSource, opts engine.LoadOptions) *Module {
	t.Helper()
	path := buildModule(t, src)
	m, err := Default().load(path, opts)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func call(t testing.TB, m engine.Module, method string, kwargs map[string]any) any {
	t.Helper()
	out, err := m.Call(context.Background(), method, kwargs, engine.CallOptions{})
	if err != nil {
		t.Fatalf("call %s: %v", method, err)
	}
	return out
}

func floats(t testing.TB, v any) []float32 {
	t.Helper()
	tn, ok := v.(*tensor.Tensor)
	if !ok {
		t.Fatalf("got %T, want *tensor.Tensor", v)
	}
	f, err := tn.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// seq returns n float32 values start, start+step, ...
func seq(n int, start, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)*step
	}
	return v
}

// matmul computes [n,k]x[k,m] in float64 for reference values.
func matmul(a []float32, b []float32, n, k, m int) []float32 {
	out := make([]float32, n*m)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*k+p]) * float64(b[p*m+j])
			}
			out[i*m+j] = float32(s)
		}
	}
	return out
}

func closeTo(a, b []float32, rel float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > rel*math.Max(1, math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}

// bf16 converts float32 values to bfloat16 bits (truncating; exact for the
// small integers tests use).
func bf16(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
	}
	return b
}

// fromBF16 converts bfloat16 bits to float32.
func fromBF16(b []byte) []float32 {
	v := make([]float32, len(b)/2)
	for i := range v {
		v[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
	return v
}

// inGoroutines runs f(0), ..., f(n-1) in n goroutines at once and reports
// every error they return.
func inGoroutines(t *testing.T, n int, f func(g int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f(g)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
