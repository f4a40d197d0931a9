//go:build cgo

package torch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestRegisteredEngine(t *testing.T) {
	e, err := engine.DefaultEngine()
	if err != nil {
		t.Fatal(err)
	}
	if e != engine.Engine(Default()) || e.Name() != "libtorch" {
		t.Fatalf("registered engine = %v %q", e, e.Name())
	}
	if v := Default().LibtorchVersion(); e.Version() != v.String() || !v.AtLeast(1, 13) {
		t.Errorf("Version() = %q, LibtorchVersion() = %v: want the same release, 1.13 or later", e.Version(), v)
	}
	info, err := Default().ParallelInfo()
	if err != nil || !strings.Contains(info, "at::get_num_threads()") {
		t.Errorf("ParallelInfo() = %q, %v", info, err)
	}
	if Default().MaxConcurrentCalls() < 1 {
		t.Errorf("MaxConcurrentCalls() = %d", Default().MaxConcurrentCalls())
	}
}

const linearSource = `
def forward(self, x: Tensor, scale: float = 2.0, key: str = "y") -> Dict[str, Tensor]:
    return {key: torch.matmul(x, self.weight) * scale, "bias_sum": self.bias.sum().reshape([1])}
`

func linearModule(t testing.TB, opts engine.LoadOptions) (*Module, []float32) {
	w := seq(12, -1, 0.25) // [4,3]
	m := loadModule(t, ModuleSource{Source: linearSource, Parameters: map[string]*tensor.Tensor{
		"weight": tensor.FromFloat32(w, 4, 3),
		"bias":   tensor.FromFloat32([]float32{1, 2, 3}, 3),
	}}, opts)
	return m, w
}

func TestDefineLoadCall(t *testing.T) {
	m, w := linearModule(t, engine.LoadOptions{})
	if got := m.Methods(); !reflect.DeepEqual(got, []string{"forward"}) {
		t.Fatalf("Methods() = %v", got)
	}
	if m.Device() != "cpu" {
		t.Errorf("Device() = %q", m.Device())
	}
	x := seq(8, 0.5, 0.5) // [2,4]
	out := call(t, m, "forward", map[string]any{"x": tensor.FromFloat32(x, 2, 4), "scale": 3.0, "key": "z"})
	d, ok := out.(map[string]any)
	if !ok || len(d) != 2 {
		t.Fatalf("output = %#v, want a dict of two", out)
	}
	want := matmul(x, w, 2, 4, 3)
	for i := range want {
		want[i] *= 3
	}
	if got := floats(t, d["z"]); !closeTo(got, want, 1e-6) {
		t.Errorf("z = %v, want %v", got, want)
	}
	if got := d["z"].(*tensor.Tensor).Shape; !reflect.DeepEqual(got, []int64{2, 3}) {
		t.Errorf("shape = %v", got)
	}
	if got := floats(t, d["bias_sum"]); !reflect.DeepEqual(got, []float32{6}) {
		t.Errorf("bias_sum = %v", got)
	}
	// Defaults apply; an int is accepted for a float argument.
	out = call(t, m, "forward", map[string]any{"x": tensor.FromFloat32(x, 2, 4)})
	want2 := matmul(x, w, 2, 4, 3)
	for i := range want2 {
		want2[i] *= 2
	}
	if got := floats(t, out.(map[string]any)["y"]); !closeTo(got, want2, 1e-6) {
		t.Errorf("default scale: y = %v, want %v", got, want2)
	}
	out = call(t, m, "forward", map[string]any{"x": tensor.FromFloat32(x, 2, 4), "scale": int64(2)})
	if got := floats(t, out.(map[string]any)["y"]); !closeTo(got, want2, 1e-6) {
		t.Errorf("int scale: y = %v, want %v", got, want2)
	}
}

const schemaSource = `
def forward(self, x: Tensor, n: int = 3, s: str = "hi", l: List[float] = [1.0, 2.5], o: Optional[Tensor] = None, flag: bool = True, f: float = -0.5, names: List[str] = ["a", "b"]) -> Dict[str, Tensor]:
    return {"y": x * n}

def pair(self, a: int, b: Tuple[int, str]) -> Tuple[Tensor, str]:
    return torch.zeros([a]), b[1]
`

func TestSchema(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: schemaSource}, engine.LoadOptions{})
	if got := m.Methods(); !reflect.DeepEqual(got, []string{"forward", "pair"}) {
		t.Fatalf("Methods() = %v", got)
	}
	s, err := m.Schema("forward")
	if err != nil {
		t.Fatal(err)
	}
	want := engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{
		{Name: "x", Type: "Tensor"},
		{Name: "n", Type: "int", HasDefault: true, Default: int64(3)},
		{Name: "s", Type: "str", HasDefault: true, Default: "hi"},
		{Name: "l", Type: "List[float]", HasDefault: true, Default: []any{1.0, 2.5}},
		{Name: "o", Type: "Optional[Tensor]", HasDefault: true, Default: nil},
		{Name: "flag", Type: "bool", HasDefault: true, Default: true},
		{Name: "f", Type: "float", HasDefault: true, Default: -0.5},
		{Name: "names", Type: "List[str]", HasDefault: true, Default: []any{"a", "b"}},
	}, Returns: []string{"Dict[str, Tensor]"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Schema(forward) =\n%#v\nwant\n%#v", s, want)
	}
	p, err := m.Schema("pair")
	if err != nil {
		t.Fatal(err)
	}
	wantP := engine.MethodSchema{Name: "pair", Arguments: []engine.Argument{
		{Name: "a", Type: "int"}, {Name: "b", Type: "Tuple[int, str]"},
	}, Returns: []string{"Tuple[Tensor, str]"}}
	if !reflect.DeepEqual(p, wantP) {
		t.Errorf("Schema(pair) = %#v, want %#v", p, wantP)
	}
	if _, err := m.Schema("nope"); err == nil || !strings.Contains(err.Error(), "forward, pair") {
		t.Errorf("Schema(nope) error = %v, want the methods listed", err)
	}
	// Schema returns copies.
	s.Arguments[0].Name = "changed"
	if s2, _ := m.Schema("forward"); s2.Arguments[0].Name != "x" {
		t.Error("Schema shares its slices with the module")
	}
	out := call(t, m, "pair", map[string]any{"a": 2, "b": []any{int64(7), "seven"}})
	tup, ok := out.([]any)
	if !ok || len(tup) != 2 || tup[1] != "seven" {
		t.Fatalf("pair output = %#v", out)
	}
	if z := tup[0].(*tensor.Tensor); !reflect.DeepEqual(z.Shape, []int64{2}) || z.DType != tensor.Float32 {
		t.Errorf("pair tensor = %+v", z)
	}
}

const kindsSource = `
def forward(self, s: str, i: int, f: float, b: bool, li: List[int], lf: List[float], ls: List[str], lt: List[Tensor], t: Tensor, d: Dict[str, float], o: Optional[int] = None) -> Tuple[str, int, float, bool, List[int], float, str, int, Tensor, Optional[int], float, List[str], None]:
    total = 0.0
    for v in lf:
        total += v
    dsum = 0.0
    for k, v in d.items():
        dsum += v
    return s + "!", i * 2, f / 2.0, not b, li + [len(li)], total, ",".join(ls), len(lt), t + lt[0], o, dsum, list(d.keys()), None
`

func TestArgumentAndOutputKinds(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: kindsSource}, engine.LoadOptions{})
	out := call(t, m, "forward", map[string]any{
		"s": "hey", "i": int64(21), "f": 3.0, "b": false,
		"li": []int64{1, 2}, "lf": []float64{0.5, 0.25}, "ls": []string{"a", "b"},
		"lt": []*tensor.Tensor{tensor.FromFloat32([]float32{1, 1}, 2)},
		"t":  tensor.FromFloat32([]float32{2, 3}, 2),
		"o":  int64(9),
		"d":  map[string]any{"p": 1.5, "q": int64(2)},
	})
	tup, ok := out.([]any)
	if !ok || len(tup) != 13 {
		t.Fatalf("output = %#v", out)
	}
	if tup[0] != "hey!" || tup[1] != int64(42) || tup[2] != 1.5 || tup[3] != true {
		t.Errorf("scalars = %#v", tup[:4])
	}
	if !reflect.DeepEqual(tup[4], []any{int64(1), int64(2), int64(2)}) || tup[5] != 0.75 || tup[6] != "a,b" || tup[7] != int64(1) {
		t.Errorf("lists = %#v", tup[4:8])
	}
	if got := floats(t, tup[8]); !reflect.DeepEqual(got, []float32{3, 4}) {
		t.Errorf("tensor = %v", got)
	}
	if tup[9] != int64(9) || tup[10] != 3.5 || tup[12] != nil {
		t.Errorf("optional/dict/None = %#v %#v %#v", tup[9], tup[10], tup[12])
	}
	keys := tup[11].([]any)
	if len(keys) != 2 {
		t.Errorf("dict keys = %#v", keys)
	}
	// Optional given as nil, empty typed lists, defaults for the rest.
	out = call(t, m, "forward", map[string]any{
		"s": "", "i": 0, "f": 0, "b": true, "li": []any{}, "lf": []any{}, "ls": []any{},
		"lt": []any{tensor.FromFloat32([]float32{0}, 1)}, "t": tensor.FromFloat32([]float32{5}, 1), "d": map[string]any{},
	})
	tup = out.([]any)
	if tup[0] != "!" || tup[9] != nil || !reflect.DeepEqual(tup[4], []any{int64(0)}) || tup[10] != 0.0 {
		t.Errorf("second call = %#v", tup)
	}
}

const nestedSource = `
def forward(self, n: int) -> Dict[str, List[Tuple[int, Tensor]]]:
    out: Dict[str, List[Tuple[int, Tensor]]] = {}
    items: List[Tuple[int, Tensor]] = []
    for i in range(n):
        items.append((i, torch.full([i], float(i)).long()))
    out["items"] = items
    empty: List[Tuple[int, Tensor]] = []
    out["empty"] = empty
    return out
`

func TestNestedOutput(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: nestedSource}, engine.LoadOptions{})
	out := call(t, m, "forward", map[string]any{"n": 3}).(map[string]any)
	items := out["items"].([]any)
	if len(items) != 3 || len(out["empty"].([]any)) != 0 {
		t.Fatalf("output = %#v", out)
	}
	for i, it := range items {
		pair := it.([]any)
		if pair[0] != int64(i) {
			t.Errorf("item %d index = %v", i, pair[0])
		}
		v, err := pair[1].(*tensor.Tensor).Int64s()
		if err != nil || len(v) != i {
			t.Fatalf("item %d tensor = %v %v", i, v, err)
		}
		for _, x := range v {
			if x != int64(i) {
				t.Errorf("item %d tensor = %v", i, v)
			}
		}
	}
}

func TestTensorDTypesRoundTrip(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: `
def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    return x, x.flip([0])
`}, engine.LoadOptions{})
	cases := []struct {
		dt   tensor.DType
		data []byte
		flip []byte
	}{
		{tensor.Float32, tensor.FromFloat32([]float32{1.5, -2}, 2).Data, tensor.FromFloat32([]float32{-2, 1.5}, 2).Data},
		{tensor.Float16, []byte{0x00, 0x3c, 0x00, 0xc0}, []byte{0x00, 0xc0, 0x00, 0x3c}}, // 1.0, -2.0
		{tensor.BFloat16, bf16([]float32{1, -2}), bf16([]float32{-2, 1})},
		{tensor.Int64, tensor.FromInt64([]int64{1 << 40, -7}, 2).Data, tensor.FromInt64([]int64{-7, 1 << 40}, 2).Data},
		{tensor.Int32, []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}},
		{tensor.Uint8, []byte{0, 255}, []byte{255, 0}},
		{tensor.Bool, []byte{1, 0}, []byte{0, 1}},
	}
	for _, c := range cases {
		in := &tensor.Tensor{DType: c.dt, Shape: []int64{2}, Data: c.data}
		out := call(t, m, "forward", map[string]any{"x": in}).([]any)
		same, flip := out[0].(*tensor.Tensor), out[1].(*tensor.Tensor)
		if same.DType != c.dt || !reflect.DeepEqual(same.Data, c.data) || !reflect.DeepEqual(same.Shape, []int64{2}) {
			t.Errorf("%s identity = %+v", c.dt, same)
		}
		if flip.DType != c.dt || !reflect.DeepEqual(flip.Data, c.flip) {
			t.Errorf("%s flip = %+v, want %v", c.dt, flip, c.flip)
		}
	}
	// Scalars (rank 0) and empty tensors cross too.
	scalar := &tensor.Tensor{DType: tensor.Int64, Data: tensor.FromInt64([]int64{5}).Data}
	out := call(t, m, "forward", map[string]any{"x": tensor.FromFloat32(nil, 0, 3)}).([]any)
	if e := out[0].(*tensor.Tensor); len(e.Data) != 0 || !reflect.DeepEqual(e.Shape, []int64{0, 3}) {
		t.Errorf("empty = %+v", e)
	}
	m2 := loadModule(t, ModuleSource{Source: "def forward(self, x: Tensor) -> Tensor:\n    return x * 2\n"}, engine.LoadOptions{})
	s := call(t, m2, "forward", map[string]any{"x": scalar}).(*tensor.Tensor)
	if v, _ := s.Int64s(); len(s.Shape) != 0 || !reflect.DeepEqual(v, []int64{10}) {
		t.Errorf("scalar = %+v", s)
	}
}

func TestUnsupportedOutputDType(t *testing.T) {
	m := loadModule(t, ModuleSource{Source: `
def forward(self) -> Tensor:
    return torch.zeros([2]).double()
`}, engine.LoadOptions{})
	_, err := m.Call(context.Background(), "forward", nil, engine.CallOptions{})
	if err == nil || !strings.Contains(err.Error(), "Double") || !strings.Contains(err.Error(), "cast it in the module") {
		t.Errorf("float64 output error = %v", err)
	}
}

func TestLoadDTypeCastsOnlyFloating(t *testing.T) {
	src := ModuleSource{
		Source: `
def forward(self, x: Tensor) -> Tensor:
    return x * self.w

def state(self) -> Tuple[Tensor, Tensor, Tensor]:
    return self.w, self.idx, self.scale
`,
		Parameters: map[string]*tensor.Tensor{"w": tensor.FromFloat32([]float32{2, 4}, 2)},
		Buffers: map[string]*tensor.Tensor{
			"idx":   tensor.FromInt64([]int64{3, 1}, 2),
			"scale": tensor.FromFloat32([]float32{0.5}, 1),
		},
	}
	m := loadModule(t, src, engine.LoadOptions{DType: tensor.BFloat16})
	if m.DType() != tensor.BFloat16 {
		t.Errorf("DType() = %q", m.DType())
	}
	st := call(t, m, "state", nil).([]any)
	w, idx, scale := st[0].(*tensor.Tensor), st[1].(*tensor.Tensor), st[2].(*tensor.Tensor)
	if w.DType != tensor.BFloat16 || scale.DType != tensor.BFloat16 {
		t.Errorf("floating parameter/buffer dtypes = %s, %s, want bfloat16", w.DType, scale.DType)
	}
	if got := fromBF16(w.Data); !reflect.DeepEqual(got, []float32{2, 4}) {
		t.Errorf("w = %v", got)
	}
	if v, err := idx.Int64s(); err != nil || !reflect.DeepEqual(v, []int64{3, 1}) {
		t.Errorf("integer buffer = %+v (%v), want int64 [3 1]", idx, err)
	}
	// Floating inputs are cast to the load dtype.
	y := call(t, m, "forward", map[string]any{"x": tensor.FromFloat32([]float32{1.5, -1}, 2)}).(*tensor.Tensor)
	if y.DType != tensor.BFloat16 || !reflect.DeepEqual(fromBF16(y.Data), []float32{3, -4}) {
		t.Errorf("forward = %+v", y)
	}
	if _, err := Default().Load(m.Path(), engine.LoadOptions{DType: tensor.Int64}); err == nil {
		t.Error("Load with an integer dtype succeeded")
	}
}

func TestCallErrors(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	ctx := context.Background()
	x := tensor.FromFloat32(seq(8, 0, 1), 2, 4)
	cases := []struct {
		name   string
		method string
		kwargs map[string]any
		want   []string
	}{
		{"unknown method", "nope", nil, []string{`no method "nope"`, "forward"}},
		{"unknown kwarg", "forward", map[string]any{"x": x, "bogus": 1}, []string{"unexpected keyword argument 'bogus'", "x, scale, key"}},
		{"missing", "forward", map[string]any{"scale": 1.0}, []string{"missing argument 'x' of type Tensor"}},
		{"wrong type", "forward", map[string]any{"x": x, "key": 5}, []string{"argument 'key'", "expected a value of type str, found int"}},
		{"tensor for float", "forward", map[string]any{"x": x, "scale": x}, []string{"argument 'scale'", "found Tensor"}},
		{"go type", "forward", map[string]any{"x": x, "scale": struct{}{}}, []string{`argument "scale"`, "struct {}"}},
		{"bad tensor", "forward", map[string]any{"x": &tensor.Tensor{DType: tensor.Float32, Shape: []int64{3}, Data: make([]byte, 4)}}, []string{"needs 12 bytes, has 4"}},
		{"bad dtype", "forward", map[string]any{"x": &tensor.Tensor{DType: "complex64", Shape: []int64{1}, Data: make([]byte, 8)}}, []string{"complex64"}},
		{"shape mismatch", "forward", map[string]any{"x": tensor.FromFloat32(seq(6, 0, 1), 2, 3)}, []string{"torch: call forward", "mat1 and mat2 shapes cannot be multiplied"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Call(ctx, c.method, c.kwargs, engine.CallOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "Exception raised from") || strings.Contains(err.Error(), "frame #") {
				t.Errorf("error carries a C++ backtrace: %q", err)
			}
			if errors.Is(err, engine.ErrOutOfMemory) {
				t.Errorf("error %q is classified as out of memory", err)
			}
		})
	}
	// The module keeps working after every error.
	call(t, m, "forward", map[string]any{"x": x})
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pt")
	if err := os.WriteFile(garbage, []byte("not a zip archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := buildModule(t, ModuleSource{Source: "def forward(self) -> int:\n    return 1\n"})
	cases := []struct {
		name, path string
		opts       engine.LoadOptions
		want       string
	}{
		{"missing", filepath.Join(dir, "none.pt"), engine.LoadOptions{}, "no such file"},
		{"directory", dir, engine.LoadOptions{}, "is a directory"},
		{"garbage", garbage, engine.LoadOptions{}, "torch: load " + garbage + ": not a TorchScript archive"},
		{"bad device", good, engine.LoadOptions{Device: "gpu7"}, "torch: load"},
		{"cuda on cpu build", good, engine.LoadOptions{Device: "cuda:0"}, "torch: load"},
		{"bad dtype", good, engine.LoadOptions{DType: "float64"}, "want float32, float16 or bfloat16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Default().Load(c.path, c.opts)
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "Exception raised from") {
				t.Errorf("error carries a C++ backtrace: %q", err)
			}
		})
	}
}

func TestDefineErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.pt")
	err := DefineModule("def forward(self) -> Tensor:\n    return self.missing\n", nil, path)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("undefined attribute: error = %v", err)
	}
	err = BuildModule(ModuleSource{Source: "def forward(self) -> int:\n    return 1\n",
		Parameters: map[string]*tensor.Tensor{"a": tensor.FromFloat32([]float32{1}, 1)},
		Buffers:    map[string]*tensor.Tensor{"a": tensor.FromFloat32([]float32{1}, 1)}}, path)
	if err == nil || !strings.Contains(err.Error(), "both a parameter and a buffer") {
		t.Errorf("duplicate name: error = %v", err)
	}
	err = DefineModule("def forward(self) -> int:\n    return 1\n",
		map[string]*tensor.Tensor{"w": {DType: tensor.Float32, Shape: []int64{2}}}, path)
	if err == nil || !strings.Contains(err.Error(), "needs 8 bytes") {
		t.Errorf("short tensor: error = %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("failed defines left files: %v", entries)
	}
}

func TestCloseAndContext(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	x := tensor.FromFloat32(seq(8, 0, 1), 2, 4)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Call(ctx, "forward", map[string]any{"x": x}, engine.CallOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: error = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := m.Call(context.Background(), "forward", map[string]any{"x": x}, engine.CallOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("call after Close: error = %v", err)
	}
}

// CUDA autocast is a no-op on CPU modules, whatever the dtype asked for.
func TestAutocastIsNoOpOnCPU(t *testing.T) {
	m, _ := linearModule(t, engine.LoadOptions{})
	x := tensor.FromFloat32(seq(8, 0, 1), 2, 4)
	plain := call(t, m, "forward", map[string]any{"x": x})
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16, "int64"} {
		out, err := m.Call(context.Background(), "forward", map[string]any{"x": x},
			engine.CallOptions{Autocast: true, AutocastDType: dt})
		if err != nil {
			t.Fatalf("autocast %s: %v", dt, err)
		}
		y := out.(map[string]any)["y"].(*tensor.Tensor)
		if y.DType != tensor.Float32 || !reflect.DeepEqual(y.Data, plain.(map[string]any)["y"].(*tensor.Tensor).Data) {
			t.Errorf("autocast %s changed the CPU output: %+v", dt, y)
		}
	}
}
