package contract

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Constants as torch.jit.save (PyTorch 1.13) pickles them: a tensor and
// the string "é"; a List[str] ["a", "b'\"\\\n\t\x01é"] with its type tag.
const (
	tensorAndString = "\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq\x01ctorch\nFloatStorage\nq\x02X\x01\x00\x00\x000q\x03X\x03\x00\x00\x00cpuq\x04K\x02tQq\x05K\x00(K\x02t(K\x01t\x89ccollections\nOrderedDict\nq\x06)RtRq\x07X\x02\x00\x00\x00\xc3\xa9q\x08\x86."
	taggedList      = "\x80\x02ctorch.jit._pickle\nrestore_type_tag\nq\x00](X\x01\x00\x00\x00aq\x01X\t\x00\x00\x00b'\"\\\n\t\x01\xc3\xa9q\x02eX\t\x00\x00\x00List[str]q\x03\x86Rq\x04\x85."
)

// sigCode is a class as torch.jit's code printer writes one, with hooks,
// every default form and a NamedTuple return.
const sigCode = `class Other(Module):
  def forward(self: __torch__.pkg.Other,
    y: int) -> int:
    return y
class Net(Module):
  __parameters__ = []
  __buffers__ = []
  __forward_pre_hooks__ = ["pre", ]
  __forward_hooks__ = ["post", ]
  training : bool
  sub : __torch__.pkg.Other
  def forward(self: __torch__.pkg.Net,
    prompt: str,
    x: Tensor,
    steps: int=2,
    scale: float=0.5,
    flag: bool=True,
    sizes: List[int]=[2, 3],
    weights: List[float]=[1., 2., 9.9999999999999995e-21, -0., inf],
    tags: List[str]=CONSTANTS.c1,
    o: Optional[Tensor]=None,
    t: Tuple[int, str]=(1, "x"),
    big: int=-9223372036854775807,
    whole: float=3,
    s: str="it\'s \"q\" \\ \n\t\001\177 end",
    dev: Device=torch.device("cuda:0"),
    z: Tensor=CONSTANTS.c0,
    e: List[int]=annotate(List[int], []),
    color: int=__torch__.pkg.Color.RED,
    ni: float=-inf,
    d: Dict[str, float]={"a": 1, "b": 2.5}) -> Dict[str, Tensor]:
    _0 = {"video": x}
    return _0
  def nothing(self: __torch__.pkg.Net) -> NoneType:
    return None
  def pair(self: __torch__.pkg.Net,
    u: Union[int, str]=3,
    w: Union[float, str]=2) -> __torch__.pkg.NT:
    return __torch__.pkg.NT(1, 2)
  def post(mod: __torch__.pkg.Net,
    inp: Tuple[Tensor],
    out: Tensor) -> NoneType:
    return None
  def pre(mod: __torch__.pkg.Net,
    inp: Tuple[Tensor]) -> NoneType:
    return None
  def broken(self: __torch__.pkg.Net,
    x: Tensor,
    y int) -> Tensor:
    return x
  def missing(self: __torch__.pkg.Net,
    z: Tensor=CONSTANTS.c7) -> Tensor:
    return z
`

func readSigs(t *testing.T, files map[string]string) (*Signatures, error) {
	t.Helper()
	data := archive(t, files)
	return ReadSignatures(bytes.NewReader(data), int64(len(data)))
}

func TestReadSignatures(t *testing.T) {
	t.Parallel()
	s, err := readSigs(t, map[string]string{
		"net/data.pkl": pkl, "net/code/__torch__/pkg.py": sigCode,
		// (tensor, ["a", "b'\"\\\n\t\x01é"])
		"net/constants.pkl": tensorAndString[:strings.Index(tensorAndString, "X\x02")] + taggedList[2:len(taggedList)-2] + "\x86.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Class != "__torch__.pkg.Net" || s.File != "net/code/__torch__/pkg.py" {
		t.Errorf("class %q in %q", s.Class, s.File)
	}
	if got, want := s.Methods(), []string{"broken", "forward", "missing", "nothing", "pair"}; !cmp.Equal(got, want) {
		t.Errorf("methods %v, want %v (hooks are no methods)", got, want)
	}
	fwd, err := s.Schema("forward")
	if err != nil {
		t.Fatal(err)
	}
	want := engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{
		{Name: "prompt", Type: "str"},
		{Name: "x", Type: "Tensor"},
		{Name: "steps", Type: "int", HasDefault: true, Default: int64(2)},
		{Name: "scale", Type: "float", HasDefault: true, Default: 0.5},
		{Name: "flag", Type: "bool", HasDefault: true, Default: true},
		{Name: "sizes", Type: "List[int]", HasDefault: true, Default: []any{int64(2), int64(3)}},
		{Name: "weights", Type: "List[float]", HasDefault: true, Default: []any{1.0, 2.0, 1e-20, math.Copysign(0, -1), math.Inf(1)}},
		{Name: "tags", Type: "List[str]", HasDefault: true, Default: []any{"a", "b'\"\\\n\t\x01é"}},
		{Name: "o", Type: "Optional[Tensor]", HasDefault: true, Default: nil},
		{Name: "t", Type: "Tuple[int, str]", HasDefault: true, Default: []any{int64(1), "x"}},
		{Name: "big", Type: "int", HasDefault: true, Default: int64(-9223372036854775807)},
		{Name: "whole", Type: "float", HasDefault: true, Default: 3.0},
		{Name: "s", Type: "str", HasDefault: true, Default: "it's \"q\" \\ \n\t\x01\x7f end"},
		{Name: "dev", Type: "Device", HasDefault: true, Default: "cuda:0"},
		{Name: "z", Type: "Tensor", HasDefault: true, Default: Opaque{Code: "CONSTANTS.c0", Tensor: true}},
		{Name: "e", Type: "List[int]", HasDefault: true, Default: []any{}},
		{Name: "color", Type: "int", HasDefault: true, Default: Opaque{Code: "__torch__.pkg.Color.RED"}},
		{Name: "ni", Type: "float", HasDefault: true, Default: math.Inf(-1)},
		{Name: "d", Type: "Dict[str, float]", HasDefault: true, Default: map[string]any{"a": 1.0, "b": 2.5}},
	}, Returns: []string{"Dict[str, Tensor]"}}
	if diff := cmp.Diff(want, fwd); diff != "" {
		t.Errorf("forward (-want +got):\n%s", diff)
	}
	if got := fwd.Arguments[6].Default.([]any)[3].(float64); !math.Signbit(got) {
		t.Error("-0. lost its sign")
	}
	if p, err := s.Schema("pair"); err != nil || p.Arguments[0].Default != int64(3) || p.Arguments[1].Default != 2.0 || p.Returns[0] != "__torch__.pkg.NT" {
		t.Errorf("pair: %+v %v", p, err)
	}
	if n, err := s.Schema("nothing"); err != nil || len(n.Arguments) != 0 || n.Returns[0] != "NoneType" {
		t.Errorf("nothing: %+v %v", n, err)
	}
	// A signature that cannot be read is an error at its place, and only
	// for that method.
	for m, want := range map[string]string{
		"broken":  `net/code/__torch__/pkg.py:49:7: the signature of broken: expected "," or ")" after argument y, found "int"`,
		"missing": `net/code/__torch__/pkg.py:52:15: the signature of missing: default CONSTANTS.c7: constants.pkl holds 2 constants`,
		"pre":     `no method "pre" (its methods: broken, forward, missing, nothing, pair)`,
	} {
		_, err := s.Schema(m)
		var ce *CodeError
		if err == nil || err.Error() != want || (m != "pre") != errors.As(err, &ce) {
			t.Errorf("%s: %v\nwant %s", m, err, want)
		}
	}
	// Schema returns copies.
	fwd.Arguments[0].Name = "changed"
	if again, _ := s.Schema("forward"); again.Arguments[0].Name != "prompt" {
		t.Error("Schema shares its slices")
	}
}

// TestReadSignaturesRefuses checks that archives that are not TorchScript,
// or hold more than the reader reads, are errors that say so.
func TestReadSignaturesRefuses(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("# padding\n", MaxCodeBytes/10+1)
	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no root":       {map[string]string{"data.pkl": pkl}, "no <folder>/data.pkl entry"},
		"no code":       {map[string]string{"net/data.pkl": pkl}, "the code of class __torch__.pkg.Net: no entry net/code/__torch__/pkg.py"},
		"other pickle":  {map[string]string{"net/data.pkl": "\x80\x04\x95", "net/code/__torch__/pkg.py": sigCode}, "net/data.pkl does not start with a TorchScript module class"},
		"foreign class": {map[string]string{"net/data.pkl": "\x80\x02cos\nsystem\n", "net/code/os.py": sigCode}, "does not start with a TorchScript module class"},
		"no class":      {map[string]string{"net/data.pkl": "\x80\x02c__torch__.pkg\nGone\n", "net/code/__torch__/pkg.py": sigCode}, "net/code/__torch__/pkg.py does not define class Gone"},
		"huge code":     {map[string]string{"net/data.pkl": pkl, "net/code/__torch__/pkg.py": huge}, "more than the 8388608 this reader reads"},
	} {
		_, err := readSigs(t, c.files)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := ReadSignatures(bytes.NewReader([]byte("not a zip")), 9); err == nil || !strings.Contains(err.Error(), "not a TorchScript archive (a zip file)") {
		t.Errorf("not a zip: %v", err)
	}

	// A zip bomb: a code entry whose header says 100 bytes, deflating to
	// 64 MiB. Reading stops past the size the header says (which the
	// reader refuses beyond MaxCodeBytes: "huge code" above).
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	crc := crc32.NewIEEE()
	for range 64 {
		fw.Write(zeros)
		crc.Write(zeros)
	}
	fw.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.Create("net/data.pkl")
	w.Write([]byte(pkl))
	rw, err := zw.CreateRaw(&zip.FileHeader{Name: "net/code/__torch__/pkg.py", Method: zip.Deflate, CRC32: crc.Sum32(),
		CompressedSize64: uint64(raw.Len()), UncompressedSize64: 100})
	if err != nil {
		t.Fatal(err)
	}
	rw.Write(raw.Bytes())
	zw.Close()
	if _, err := ReadSignatures(bytes.NewReader(b.Bytes()), int64(b.Len())); err == nil || !strings.Contains(err.Error(), "net/code/__torch__/pkg.py: corrupt, or holds more than the 100 bytes its header says") {
		t.Errorf("zip bomb: %v", err)
	}
}

func TestSignatureErrorsAreLocated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ sig, want string }{
		{"def f(self: M, x: Tensor = ) -> Tensor:", "3:30: the signature of f: missing default after \"=\""},
		{"def f(self: M, x: Tensor, x: int) -> Tensor:", "3:29: the signature of f: argument x declared twice"},
		{"def f(self: M, x: List[int) -> Tensor:", "3:29: the signature of f: argument x: \")\" closes \"[\" in the type"},
		{"def f(self: M, x: ) -> Tensor:", "3:21: the signature of f: argument x: missing type"},
		{"def f(self: M,\n    x: str=\"abc\n", "4:12: the signature of f: a string literal that does not end on its line"},
		{"def f(self: M, x: str=\"\\q\") -> str:", "3:25: the signature of f: an unknown escape \\q in a string literal"},
		{"def f(self: M) -> Tensor", "3:21: the signature of f: the return type: the type does not end (with \":\")"},
		{"def f(self: M) Tensor:", "3:18: the signature of f: expected \":\" after the signature, found \"Tensor\""},
		{"def f(self: M, 3) -> Tensor:", "3:18: the signature of f: expected an argument name, found the number 3"},
	} {
		code := "class M(Module):\n  training : bool\n  " + c.sig + "\n    return x\n"
		s, err := readSigs(t, map[string]string{"m/data.pkl": "\x80\x02c__torch__\nM\n", "m/code/__torch__.py": code})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Schema("f")
		if err == nil || err.Error() != "m/code/__torch__.py:"+c.want {
			t.Errorf("%q:\n got %v\nwant m/code/__torch__.py:%s", c.sig, err, c.want)
		}
	}
}

func TestReadConstants(t *testing.T) {
	t.Parallel()
	got, err := readConstants([]byte(tensorAndString))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{Opaque{Code: "<object>", Tensor: true}, "é"}, got); diff != "" {
		t.Errorf("tensor and string (-want +got):\n%s", diff)
	}
	got, err = readConstants([]byte(taggedList))
	if err != nil || !cmp.Equal(got, []any{[]any{"a", "b'\"\\\n\t\x01é"}}) {
		t.Errorf("tagged list: %#v %v", got, err)
	}
	// Integers of every width, a float, a dict, a tuple, None and bools.
	p := "\x80\x02(K\x07M\x00\x01J\xff\xff\xff\xff\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x02\x00\xffG\x3f\xf8\x00\x00\x00\x00\x00\x00}(X\x01\x00\x00\x00kK\x01u)N\x88\x89t."
	got, err = readConstants([]byte(p))
	want := []any{int64(7), int64(256), int64(-1), int64(math.MinInt64), int64(-256), 1.5, map[string]any{"k": int64(1)}, []any{}, nil, true, false}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("scalars: %#v %v", got, err)
	}
	for name, c := range map[string]struct{ pickle, want string }{
		"empty":        {"", "no STOP opcode"},
		"truncated":    {"\x80\x02X\xff\x00\x00\x00ab", "truncated: 255 bytes wanted"},
		"not a tuple":  {"\x80\x02K\x01.", "the constants are a int64, not a tuple"},
		"unknown":      {"\x80\x02\xff", "an opcode torch.jit's pickler does not write"},
		"no mark":      {"\x80\x02t", "no MARK"},
		"empty pop":    {"\x80\x02(.", "pop from an empty stack"},
		"memo":         {"\x80\x02h\x05", "memo entry 5 is not set"},
		"huge integer": {"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01", "a 9-byte integer"},
		// A list appended to itself nests without end.
		"cycle": {"\x80\x02]q\x00h\x00a\x85.", "nested deeper than 64"},
		// 40 lists, each holding the one before twice: 2^40 values.
		"blowup": {"\x80\x02]" + blowup(40) + "\x85.", "more than 1048576 values"},
	} {
		if _, err := readConstants([]byte(c.pickle)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// blowup pickles n nested lists, each holding the previous one twice
// (through the memo), after an empty list on the stack.
func blowup(n int) string {
	var b strings.Builder
	for range n {
		// memoize the top, make a new list holding it twice
		b.WriteString("q\x00](h\x00h\x00e")
	}
	return b.String()
}

func TestReadCallSpec(t *testing.T) {
	t.Parallel()
	spec := `{"version": 1, "inputs": [{"name": "features", "dtype": "float32", "shape": ["batch", 32]}, {"name": "normalize", "keyword": true, "constant": true, "value": true}], "outputs": [{"name": "embedding", "dtype": "float32", "shape": ["batch", 16]}], "returns": "dict", "dims": {"batch": {"min": 1, "max": 16}}}`
	meta := func(s string) string {
		b, _ := json.Marshal(s)
		return `{"AOTI_DEVICE_KEY": "cpu", "wfgen.call_spec": ` + string(b) + `}`
	}
	read := func(files map[string]string) (engine.CallSpec, error) {
		data := archive(t, files)
		return ReadCallSpec(bytes.NewReader(data), int64(len(data)))
	}
	got, err := read(map[string]string{"version": "1", "data/aotinductor/model/cabc_metadata.json": meta(spec), "data/aotinductor/model/cabc.so": ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Inputs) != 2 || got.Inputs[0].Shape.String() != "[batch,32]" || !got.Inputs[1].Constant || got.Returns != "dict" || got.Dims["batch"].Max != 16 {
		t.Errorf("spec %+v", got)
	}
	if got, err := read(map[string]string{"pkg/data/aotinductor/model/x_metadata.json": meta(spec)}); err != nil || len(got.Outputs) != 1 {
		t.Errorf("under a folder: %+v %v", got, err)
	}
	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"no metadata": {map[string]string{"data/aotinductor/model/x.so": ""}, "no data/aotinductor/<model>/<name>_metadata.json entry"},
		"no key":      {map[string]string{"data/aotinductor/model/x_metadata.json": `{"AOTI_DEVICE_KEY": "cpu"}`}, "has no wfgen call spec in its metadata"},
		"not json":    {map[string]string{"data/aotinductor/model/x_metadata.json": `{`}, "x_metadata.json: unexpected end of JSON input"},
		"not a str":   {map[string]string{"data/aotinductor/model/x_metadata.json": `{"wfgen.call_spec": 1}`}, "wfgen.call_spec is not a string"},
		"version":     {map[string]string{"data/aotinductor/model/x_metadata.json": meta(strings.Replace(spec, `"version": 1`, `"version": 9`, 1))}, "has version 9; this wfgen reads version 1"},
		"dtype":       {map[string]string{"data/aotinductor/model/x_metadata.json": meta(strings.Replace(spec, `"float32"`, `"float64"`, 1))}, `input "features": dtype "float64" is not one the engine passes`},
		"dims":        {map[string]string{"data/aotinductor/model/x_metadata.json": meta(strings.Replace(spec, `"dims": {"batch"`, `"dims": {"n"`, 1))}, "dimension batch has no range"},
		"two models":  {map[string]string{"data/aotinductor/a/x_metadata.json": meta(spec), "data/aotinductor/b/x_metadata.json": meta(spec)}, `the package holds the models a, b, none of them "model"`},
		"two files":   {map[string]string{"data/aotinductor/model/x_metadata.json": meta(spec), "data/aotinductor/model/y_metadata.json": meta(spec)}, "model model of the package has 2 metadata files"},
	} {
		if _, err := read(c.files); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := ReadCallSpec(bytes.NewReader([]byte("PK")), 2); err == nil || !strings.Contains(err.Error(), "not an AOTInductor package (a zip file)") {
		t.Errorf("not a zip: %v", err)
	}
}

// TestReadSignaturesNamedTuple: a NamedTuple class in a type is the Tuple
// of its fields' types (nested, in another module's file, under
// Optional), as the engine prints it, and ReturnNames gives a returned
// one's field names; a class that is no NamedTuple stays a class.
func TestReadSignaturesNamedTuple(t *testing.T) {
	t.Parallel()
	s, err := readSigs(t, map[string]string{
		"net/data.pkl": pkl,
		"net/code/__torch__/pkg.py": `class Net(Module):
  __parameters__ = []
  def forward(self: __torch__.pkg.Net,
    x: Tensor) -> __torch__.pkg.Outputs:
    return __torch__.pkg.Outputs(x, None)
  def maybe(self: __torch__.pkg.Net,
    x: Tensor) -> Optional[__torch__.pkg.Outputs]:
    return None
  def inner(self: __torch__.pkg.Net,
    x: Tensor) -> List[__torch__.other.Inner]:
    return []
  def obj(self: __torch__.pkg.Net,
    x: Tensor) -> __torch__.pkg.Net:
    return self
class Outputs(NamedTuple):
  logits : Tensor
  aux : Optional[__torch__.other.Inner]
`,
		"net/code/__torch__/other.py": `class Inner(NamedTuple):
  a : Tensor
  b : int
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, ret string
		names       []string
	}{
		{"forward", "Tuple[Tensor, Optional[Tuple[Tensor, int]]]", []string{"logits", "aux"}},
		{"maybe", "Optional[Tuple[Tensor, Optional[Tuple[Tensor, int]]]]", []string{"logits", "aux"}},
		{"inner", "List[Tuple[Tensor, int]]", nil},
		{"obj", "__torch__.pkg.Net", nil},
	} {
		sc, err := s.Schema(c.method)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Returns[0] != c.ret {
			t.Errorf("%s returns %q, want %q", c.method, sc.Returns[0], c.ret)
		}
		if got := s.ReturnNames(c.method); !cmp.Equal(got, c.names) {
			t.Errorf("%s: names %q, want %q", c.method, got, c.names)
		}
	}
}
