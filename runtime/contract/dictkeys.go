package contract

import (
	"io"
	"strings"
)

// DictKeys is what a method's TorchScript code tells about the keys of the
// dicts of tensors it returns inside a structure (a detector's
// Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]): the schema says
// Dict[str, Tensor], never which keys, but the methods of the module that
// build such dicts from literal keys do.
type DictKeys struct {
	// Returns are, by return type as Type.String prints it
	// ("Dict[str, Tensor]", "List[Dict[str, Tensor]]"), the keys of the
	// dicts built (methodReturnKeys) by the methods of the module's class
	// that the method calls on self and that declare that return type, in
	// order of first appearance. A key is Always when every literal of
	// every such method holds it (torchvision's postprocess_detections
	// builds every dict with "boxes", "scores" and "labels").
	Returns map[string][]ReturnKey
	// Empty says the method's own code builds an empty Dict[str, Tensor]
	// (annotate(Dict[str, Tensor], {})): what it returns may be such a
	// dict, which holds none of the keys (a torchvision detector's
	// losses in evaluation).
	Empty bool
	// Arguments are, by argument name, the string keys the method's own
	// code indexes the argument with (features["a"]), in order of first
	// appearance: the keys of a Dict[str, Tensor] argument. An argument
	// the body also uses otherwise (passes on, iterates, indexes with a
	// key that is no literal) is not listed: its code does not show every
	// key it reads.
	Arguments map[string][]string
}

// ReadDictKeys reads the DictKeys of each method of a TorchScript
// archive's root module class that calls such methods or builds such an
// empty dict. Anything it cannot read (not a zip, no code) yields nothing,
// never an error: the keys are a hint for wfgen import, which refuses what
// they do not tell.
func ReadDictKeys(r io.ReaderAt, size int64) map[string]DictKeys {
	a, err := openArchive(r, size)
	if err != nil {
		return nil
	}
	methods, _, _ := classMethods(a.code, a.class)
	byName := map[string]classMethod{}
	for _, m := range methods {
		byName[m.name] = m
	}
	var out map[string]DictKeys
	for _, m := range methods {
		d := DictKeys{Empty: strings.Contains(m.text, "annotate(Dict[str, Tensor], {})")}
		always := map[string]map[string]bool{}
		seen := map[string]bool{}
		toks := lex(m.text, false)
		for i := 0; i+5 < len(toks); i++ {
			// (self).NAME( — a call of another method of the class; lex
			// reads the '.' as an other token.
			if toks[i] != (token{'p', "("}) || toks[i+1] != (token{'i', "self"}) || toks[i+2] != (token{'p', ")"}) ||
				toks[i+3] != (token{'o', ""}) || toks[i+4].kind != 'i' || toks[i+5] != (token{'p', "("}) {
				continue
			}
			callee, ok := byName[toks[i+4].text]
			if !ok || seen[callee.name] {
				continue
			}
			seen[callee.name] = true
			ret, ok := declaredReturn(callee.text)
			if !ok || !strings.Contains(ret, "Dict[str, Tensor]") {
				continue
			}
			keys := methodReturnKeys(callee.text)
			if len(keys) == 0 {
				continue
			}
			if d.Returns == nil {
				d.Returns = map[string][]ReturnKey{}
			}
			g, first := always[ret], always[ret] == nil
			if first {
				g = map[string]bool{}
				always[ret] = g
			}
			have := map[string]bool{}
			for _, k := range keys {
				have[k.Name] = true
				if _, known := g[k.Name]; !known {
					// A key this method adds: Always only if no method
					// before built dicts without it.
					g[k.Name] = k.Always && first
					d.Returns[ret] = append(d.Returns[ret], ReturnKey{Name: k.Name})
					continue
				}
				g[k.Name] = g[k.Name] && k.Always
			}
			for k := range g {
				if !have[k] {
					g[k] = false
				}
			}
		}
		for ret, keys := range d.Returns {
			for i := range keys {
				keys[i].Always = always[ret][keys[i].Name]
			}
		}
		d.Arguments = argumentKeys(m.text)
		if d.Returns == nil && !d.Empty && d.Arguments == nil {
			continue
		}
		if out == nil {
			out = map[string]DictKeys{}
		}
		out[m.name] = d
	}
	return out
}

// declaredReturn reads the return type a serialized method declares
// ("def f(self: C, x: Tensor) -> List[Dict[str, Tensor]]:"), as
// Type.String prints it.
func declaredReturn(method string) (string, bool) {
	_, rest, ok := strings.Cut(method, ") -> ")
	if !ok {
		return "", false
	}
	ret, _, ok := strings.Cut(rest, ":\n")
	if !ok {
		ret = strings.TrimSuffix(strings.TrimSpace(rest), ":")
	}
	t, err := ParseType(strings.TrimSpace(ret))
	if err != nil {
		return "", false
	}
	return t.String(), true
}

// argumentKeys reads, for each argument of a serialized method whose
// annotated type is a dict keyed by str, the literal keys the body indexes
// it with (NAME["key"]), when those reads are its only uses.
func argumentKeys(method string) map[string][]string {
	head, body, ok := strings.Cut(method, ":\n")
	if !ok {
		return nil
	}
	// The signature: "def f(self: C,\n    features: Dict[str, Tensor]) -> T".
	var out map[string][]string
	sig := lex(head, false)
	for i := 0; i+3 < len(sig); i++ {
		if sig[i].kind != 'i' || sig[i+1] != (token{'p', ":"}) || sig[i+2] != (token{'i', "Dict"}) || sig[i+3] != (token{'p', "["}) ||
			i+4 >= len(sig) || sig[i+4] != (token{'i', "str"}) || i > 0 && sig[i-1] != (token{'p', "("}) && sig[i-1] != (token{'p', ","}) {
			continue
		}
		name := sig[i].text
		var keys []string
		seen := map[string]bool{}
		complete := true
		toks := lex(body, false)
		for j, t := range toks {
			if t != (token{'i', name}) {
				continue
			}
			if j+3 >= len(toks) || toks[j+1] != (token{'p', "["}) || toks[j+2].kind != 's' || toks[j+3] != (token{'p', "]"}) {
				complete = false
				break
			}
			if k := toks[j+2].text; !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if !complete || len(keys) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		out[name] = keys
	}
	return out
}
