//go:build cgo

package torch

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// debianPython is Debian's interpreter, which has python3-torch and
// python3-torchvision (the python3 first on PATH may not).
const debianPython = "/usr/bin/python3"

type parityFixture struct {
	dir         string
	Model       string  `json:"model"`
	InputShape  []int64 `json:"input_shape"`
	OutputShape []int64 `json:"output_shape"`
	Torch       string  `json:"torch"`
}

// makeParityFixture runs testdata/parity.py, which scripts a torchvision
// classifier with random weights and saves reference input and output.
func makeParityFixture(t testing.TB) parityFixture {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import torch, torchvision").Run(); err != nil {
		t.Skipf("%s cannot import torch and torchvision (%v): install python3-torch python3-torchvision (scripts/setup.sh)", debianPython, err)
	}
	dir := t.TempDir()
	cmd := exec.Command(debianPython, filepath.Join("testdata", "parity.py"), dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("parity.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := parityFixture{dir: dir}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func readFloat32File(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// relErr is max|a-b| / max|b|.
func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i])-float64(b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / den
}

// The Go engine reproduces PyTorch's output for a scripted torchvision
// classifier (relative error ≤ 1e-5 in float32), also after compiling.
func TestParityWithPyTorch(t *testing.T) {
	f := makeParityFixture(t)
	input := readFloat32File(t, filepath.Join(f.dir, "input.bin"))
	want := readFloat32File(t, filepath.Join(f.dir, "output.bin"))
	m, err := Default().Load(filepath.Join(f.dir, "model.pt"), engine.LoadOptions{Device: "cpu", DType: tensor.Float32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.Schema("forward")
	if err != nil || len(s.Arguments) != 1 || s.Arguments[0].Type != "Tensor" || !reflect.DeepEqual(s.Returns, []string{"Tensor"}) {
		t.Fatalf("forward schema = %+v, %v", s, err)
	}
	out := call(t, m, "forward", map[string]any{s.Arguments[0].Name: tensor.FromFloat32(input, f.InputShape...)})
	tn := out.(*tensor.Tensor)
	if !reflect.DeepEqual(tn.Shape, f.OutputShape) {
		t.Fatalf("output shape %v, want %v", tn.Shape, f.OutputShape)
	}
	got := floats(t, tn)
	if e := relErr(got, want); e > 1e-5 {
		t.Errorf("%s: relative error %.3g > 1e-5 against torch %s", f.Model, e, f.Torch)
	} else {
		t.Logf("%s: relative error %.3g against torch %s", f.Model, e, f.Torch)
	}

	// Freezing folds batch norm into convolutions, which reorders float
	// arithmetic: a looser bound.
	on := true
	c, err := CompileModule(m, CompileOptions{Enabled: &on, CacheDir: "off", Strict: &on})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got = floats(t, call(t, c, "forward", map[string]any{s.Arguments[0].Name: tensor.FromFloat32(input, f.InputShape...)}))
	if e := relErr(got, want); e > 1e-4 {
		t.Errorf("%s compiled: relative error %.3g > 1e-4", f.Model, e)
	} else {
		t.Logf("%s compiled: relative error %.3g", f.Model, e)
	}
	// libtorch's full optimize_for_inference is refused (wrong on 1.13,
	// SIGFPE on 2.6 for this very model): strict is an error, non-strict
	// the module unchanged.
	if _, err := CompileModule(m, CompileOptions{Enabled: &on, CacheDir: "off", Strict: &on, Backend: "optimize_for_inference"}); err == nil || !strings.Contains(err.Error(), `backend "optimize_for_inference" is refused`) {
		t.Errorf("strict optimize_for_inference: %v", err)
	}
	off := false
	if same, err := CompileModule(m, CompileOptions{Enabled: &on, CacheDir: "off", Strict: &off, Backend: "mkldnn"}); err != nil || same != m {
		t.Errorf("non-strict mkldnn: %v, %v (want the module unchanged)", same, err)
	}
}
