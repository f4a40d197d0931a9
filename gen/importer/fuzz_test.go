package importer

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/contract"
)

// FuzzSkeleton imports a method with one argument of any name, type and
// default and any return type: the skeleton always validates (Skeleton
// checks it) unless the method name is refused.
func FuzzSkeleton(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, arg, typ string, def int, sval string, ival int64, fval float64, ret, key string) {
		a := runtime.Argument{Name: arg, Type: typ}
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
		ck := Checkpoint{Path: "m.pt", ReturnKeys: map[string][]contract.ReturnKey{method: {{Name: key, Always: ival > 0}}}}
		_, err := Skeleton(ck, []runtime.MethodSchema{{Name: method, Arguments: []runtime.Argument{a}, Returns: []string{ret}}}, Options{})
		if err != nil && (isIdent(method) || strings.Contains(err.Error(), "bug")) {
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
			for _, k := range runtime.FieldKinds {
				found = found || k == kind
			}
			if !found {
				t.Fatalf("FieldKind(%q) = %q", typ, kind)
			}
		}
		returnOf([]string{typ})
	})
}
