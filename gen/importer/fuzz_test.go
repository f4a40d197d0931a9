package importer

import (
	"errors"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

// FuzzSkeleton imports a method with one argument of any name, type and
// default and any return type: the skeleton always validates and passes
// the contract check against the method (Skeleton checks both), unless
// the method name is refused or a position no manifest can type is (an
// *UntypedError).
func FuzzSkeleton(f *testing.F) {
	// structured arguments: a dict whose keys the code shows, a tuple
	f.Add("forward", "features", "Dict[str, Tensor]", 0, "", int64(1), 0.0, "Tensor", "a")
	f.Add("forward", "features", "Optional[Dict[str, Tensor]]", 6, "", int64(0), 0.0, "Tensor", "a.b")
	f.Add("forward", "pair", "Tuple[Tensor, Tensor]", 0, "", int64(1), 0.0, "Tensor", "y")
	f.Fuzz(func(t *testing.T, method, arg, typ string, def int, sval string, ival int64, fval float64, ret, key string) {
		a := engine.Argument{Name: arg, Type: typ}
		switch def % 7 {
		case 1:
			a.HasDefault, a.Default = true, sval
		case 2:
			a.HasDefault, a.Default = true, ival
		case 3:
			a.HasDefault, a.Default = true, fval
		case 4:
			a.HasDefault, a.Default = true, ival%2 == 0
		case 5:
			a.HasDefault, a.Default = true, []any{ival, fval, sval}
		case 6:
			a.HasDefault = true // None
		}
		ck := Checkpoint{Path: "m.pt", ReturnKeys: map[string][]contract.ReturnKey{method: {{Name: key, Always: ival > 0}}},
			DictKeys: map[string]contract.DictKeys{method: {Arguments: map[string][]string{arg: {key, sval}}}}}
		_, err := Skeleton(ck, []engine.MethodSchema{{Name: method, Arguments: []engine.Argument{a}, Returns: []string{ret}}}, Options{})
		var untyped *UntypedError
		if err != nil && (isIdent(method) && !errors.As(err, &untyped) || strings.Contains(err.Error(), "bug")) {
			t.Fatalf("method %q arg %+v return %q key %q: %v", method, a, ret, key, err)
		}
	})
}

// FuzzFieldKind maps any type text: never a panic, and a kind only from
// the runtime's kinds.
func FuzzFieldKind(f *testing.F) {
	f.Fuzz(func(t *testing.T, typ string) {
		kind, _, ok := FieldKind(typ)
		if ok {
			found := false
			for _, k := range spec.FieldKinds {
				found = found || k == kind
			}
			if !found {
				t.Fatalf("FieldKind(%q) = %q", typ, kind)
			}
		}
		returnOf([]string{typ})
	})
}

// FuzzSkeletonExamples imports a method with one Tensor argument given an
// example of any dtype and shape, batched or not, whose run returned a
// tensor of any shape: the skeleton always validates (Skeleton checks it)
// unless the examples are refused with a message about them.
func FuzzSkeletonExamples(f *testing.F) {
	f.Add("x", "Tensor", []byte{4, 3, 8}, []byte{4, 10}, true, true, uint8(0), "y")
	f.Add("x", "Optional[Tensor]", []byte{}, []byte{1}, true, false, uint8(3), "output")
	f.Fuzz(func(t *testing.T, arg, typ string, in, out []byte, batched, required bool, dt uint8, key string) {
		shape := func(b []byte) []int64 {
			s := make([]int64, min(len(b), 6))
			for i := range s {
				s[i] = int64(b[i] % 9)
			}
			return s
		}
		tensor := func(d wftensor.DType, s []int64) *wftensor.Tensor {
			t := &wftensor.Tensor{DType: d, Shape: s}
			t.Data = make([]byte, t.NumElements()*int64(d.Size()))
			return t
		}
		d := wftensor.DTypes[int(dt)%len(wftensor.DTypes)]
		a := engine.Argument{Name: arg, Type: typ, HasDefault: !required}
		ck := Checkpoint{Path: "m.pt",
			ReturnKeys: map[string][]contract.ReturnKey{"forward": {{Name: key, Always: true}}},
			Outputs:    map[string]Output{"forward": {key: tensor(d, shape(out))}},
		}
		m := engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{a}, Returns: []string{"Dict[str, Tensor]"}}
		opts := Options{Examples: map[string]Example{arg: {File: "x.npy", Tensor: tensor(d, shape(in))}}, Batched: batched}
		_, err := Skeleton(ck, []engine.MethodSchema{m}, opts)
		if err != nil && (!strings.HasPrefix(err.Error(), "--") || strings.Contains(err.Error(), "bug")) {
			t.Fatalf("arg %+v example %v%v batched %v output %q %v: %v", a, d, shape(in), batched, key, shape(out), err)
		}
	})
}
