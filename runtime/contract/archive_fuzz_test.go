package contract

import (
	"bytes"
	"testing"
)

// FuzzReadReturns reads any bytes as a TorchScript archive: never a panic,
// every method an identifier with at most MaxReturnKeys keys, and something
// to say about each.
func FuzzReadReturns(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for m, ret := range ReadReturns(bytes.NewReader(data), int64(len(data))) {
			if !isIdentifier(m) || (len(ret.Keys) == 0 && !ret.Complete) || len(ret.Keys) > MaxReturnKeys {
				t.Fatalf("method %q returns %+v", m, ret)
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
