package contract

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzReadReturns reads any bytes as a TorchScript archive: never a panic,
// every method an identifier with at most MaxReturnKeys keys, and something
// to say about each; ReadDictKeys too.
func FuzzReadReturns(f *testing.F) {
	if data, err := os.ReadFile("testdata/maskrcnn_code.pt"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for m, ret := range ReadReturns(bytes.NewReader(data), int64(len(data))) {
			if !isIdentifier(m) || (len(ret.Keys) == 0 && !ret.Complete) || len(ret.Keys) > MaxReturnKeys {
				t.Fatalf("method %q returns %+v", m, ret)
			}
		}
		for m := range ReadDictKeys(bytes.NewReader(data), int64(len(data))) {
			if !isIdentifier(m) {
				t.Fatalf("method %q", m)
			}
		}
	})
}

// FuzzMethodReturns scans any code as a method: never a panic, no key
// twice, at most MaxReturnKeys keys, and a complete method's keys include
// every key its returns can hold.
func FuzzMethodReturns(f *testing.F) {
	f.Add("def f(self, x: Tensor) -> Dict[str, Tensor]:\n    d = {\"a\": x}\n    torch._set_item(d, \"b\", x)\n    return d")
	f.Fuzz(func(t *testing.T, code string) {
		ret := methodReturns(code)
		seen := map[string]bool{}
		for _, k := range ret.Keys {
			if seen[k.Name] {
				t.Fatalf("key %q twice", k.Name)
			}
			seen[k.Name] = true
		}
		if len(ret.Keys) > MaxReturnKeys {
			t.Fatalf("%d keys", len(ret.Keys))
		}
		if keys, ok := returnedKeys(code); ok != ret.Complete && len(keys) <= MaxReturnKeys {
			t.Fatalf("returnedKeys ok %v, Complete %v", ok, ret.Complete)
		} else if ok && ret.Complete {
			for _, k := range keys {
				if !seen[k] {
					t.Fatalf("complete, but returned key %q is not in Keys %v", k, ret.Keys)
				}
			}
		}
		classReturns(code, "M")
	})
}

// checkSignatures is the fuzz targets' oracle for ReadSignatures: methods
// sorted and distinct; each either a schema of that name with one return
// type and distinct argument names, or a *CodeError inside the class's
// file that names the method.
func checkSignatures(t *testing.T, s *Signatures, err error) {
	t.Helper()
	if err != nil {
		if s != nil {
			t.Fatalf("signatures %+v with error %v", s, err)
		}
		return
	}
	methods := s.Methods()
	for i, m := range methods {
		if !isIdentifier(m) || i > 0 && methods[i-1] >= m {
			t.Fatalf("methods %q", methods)
		}
		sc, err := s.Schema(m)
		if err != nil {
			var ce *CodeError
			if !errors.As(err, &ce) || ce.File != s.File || ce.Method != m || ce.Line < 1 || ce.Column < 1 || ce.Msg == "" {
				t.Fatalf("%s: error %#v", m, err)
			}
			continue
		}
		if sc.Name != m || len(sc.Returns) != 1 || sc.Returns[0] == "" {
			t.Fatalf("%s: schema %+v", m, sc)
		}
		seen := map[string]bool{}
		for _, a := range sc.Arguments {
			if !isIdentifier(a.Name) || seen[a.Name] || a.Type == "" || !a.HasDefault && a.Default != nil {
				t.Fatalf("%s: argument %+v", m, a)
			}
			seen[a.Name] = true
		}
	}
	if _, err := s.Schema("no such method"); err == nil {
		t.Fatal("a method that is not there has a schema")
	}
}

// FuzzReadSignatures reads any bytes as a TorchScript archive: never a
// panic, and what it reads passes checkSignatures. The kept corpus holds
// archives Python (1.13) and the engine (Module::define) wrote, and
// hostile ones.
func FuzzReadSignatures(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSignatures(bytes.NewReader(data), int64(len(data)))
		checkSignatures(t, s, err)
	})
}

// FuzzSignatureCode reads any code and constants as the code and
// constants.pkl of an archive whose root class is M: never a panic, and
// checkSignatures holds; a located error is inside the code.
func FuzzSignatureCode(f *testing.F) {
	f.Add("class M(Module):\n  def forward(self: __torch__.M,\n    x: Tensor,\n    k: List[str]=CONSTANTS.c0,\n    n: Optional[float]=2.) -> Dict[str, Tensor]:\n    return {\"y\": x}\n", []byte(taggedList))
	f.Add("class M(Module):\n  __forward_hooks__ = [\"h\", ]\n  def h(mod: __torch__.M,\n    i: Tuple[Tensor]) -> NoneType:\n    return None\n  def forward(self: __torch__.M,\n    z: Tensor=CONSTANTS.c0,\n    s: str=CONSTANTS.c1,\n    d: Device=torch.device(\"cpu\"),\n    e: List[int]=annotate(List[int], [])) -> __torch__.NT:\n    return z\n", []byte(tensorAndString))
	for _, sig := range []string{
		`def f(self: M, x: str="\777", y: str="\x4", z: str='a\'b') -> str:`,
		`def f(self: M, x: List[int]=CONSTANTS.c99999999999999999999, y: int=- -1, z: float=-) -> int:`,
		"def f(self: M, x: " + strings.Repeat("List[", 100) + "int" + strings.Repeat("]", 100) + "=" + strings.Repeat("[", 100) + strings.Repeat("]", 100) + ") -> int:",
		`def f(self: M, x: Dict[str, int]={"a": 1, 2: 3}, y: Tuple[()]=(), z: int=0x10) -> Tuple[()]:`,
		"def f(self: M,\n    x: int=1,\n    ) -> \\\n  int:",
	} {
		f.Add("class M(Module):\n  "+sig+"\n    return x\n", []byte(nil))
	}
	f.Fuzz(func(t *testing.T, code string, constants []byte) {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for name, data := range map[string][]byte{"m/data.pkl": []byte("\x80\x02c__torch__\nM\n"), "m/code/__torch__.py": []byte(code), "m/constants.pkl": constants} {
			w, err := zw.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(data)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSignatures(bytes.NewReader(b.Bytes()), int64(b.Len()))
		checkSignatures(t, s, err)
		if s == nil {
			return
		}
		lines := strings.Count(code, "\n") + 1
		for _, m := range s.Methods() {
			var ce *CodeError
			if _, err := s.Schema(m); errors.As(err, &ce) && ce.Line > lines {
				t.Fatalf("%s: error at line %d of %d: %v", m, ce.Line, lines, err)
			}
		}
	})
}

// FuzzReadConstants unpickles any bytes: never a panic, and a tuple's
// values only in the engine's value form or Opaque.
func FuzzReadConstants(f *testing.F) {
	f.Add([]byte(tensorAndString))
	f.Add([]byte(taggedList))
	f.Fuzz(func(t *testing.T, data []byte) {
		vals, err := readConstants(data)
		if err != nil {
			return
		}
		var check func(v any, depth int)
		check = func(v any, depth int) {
			if depth > maxPickleDepth+1 {
				t.Fatalf("nested deeper than %d", maxPickleDepth)
			}
			switch x := v.(type) {
			case nil, bool, int64, float64, string, Opaque:
			case []any:
				for _, e := range x {
					check(e, depth+1)
				}
			case map[string]any:
				for _, e := range x {
					check(e, depth+1)
				}
			default:
				t.Fatalf("value %#v (%T)", v, v)
			}
		}
		for _, v := range vals {
			check(v, 0)
		}
	})
}

// FuzzReadCallSpec reads any bytes as an AOTInductor package: never a
// panic, and a spec it returns passes CallSpec.Check.
func FuzzReadCallSpec(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ReadCallSpec(bytes.NewReader(data), int64(len(data)))
		if err == nil {
			if err := spec.Check(); err != nil {
				t.Fatalf("returned a spec that fails its check: %v", err)
			}
		}
	})
}

// FuzzDictKeysCode evaluates any code as the root class's file and a
// submodule's (dictflow.go): never a panic, no key twice, at most
// MaxReturnKeys keys, and a value that is not Complete says why.
func FuzzDictKeysCode(f *testing.F) {
	f.Add(detectorCode, "")
	f.Add(rcnnCode, roiHeadsCode)
	f.Add(rcnnCode, transformCode)
	f.Add("class Net(Module):\n  def forward(self: __torch__.pkg.Net) -> Dict[str, Tensor]:\n    d, e, = (annotate(Dict[str, Tensor], {}), 1)\n    while True:\n      torch._set_item(d, \"a\", 1)\n      break\n    return d\n", "")
	f.Fuzz(func(t *testing.T, root, sub string) {
		files := map[string]string{
			"code/__torch__/pkg.py":                             root,
			"code/__torch__/pkg/roi_heads/___torch_mangle_7.py": sub,
			"code/__torch__/pkg/transform.py":                   sub,
		}
		read := func(p string) (string, bool) {
			s, ok := files[p]
			return s, ok
		}
		for m, d := range dictKeys(read, "__torch__.pkg", "Net") {
			for _, v := range d.Values {
				seen := map[string]bool{}
				for _, k := range v.Keys {
					if seen[k.Name] {
						t.Fatalf("%s: key %q twice: %+v", m, k.Name, v)
					}
					seen[k.Name] = true
				}
				if len(v.Keys) > MaxReturnKeys || !v.Complete && v.Why == "" {
					t.Fatalf("%s: %+v", m, v)
				}
			}
		}
	})
}
