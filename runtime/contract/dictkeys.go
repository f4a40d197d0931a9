package contract

import (
	"io"
	"maps"
	"slices"
	"strings"
)

// DictKeys is what a method's TorchScript code tells about the keys of the
// dicts of tensors it returns inside a structure (a detector's
// Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]): the schema says
// Dict[str, Tensor], never which keys, but the code that builds the dicts,
// in the method, in the methods of the module and its submodules it calls
// and in the archive's functions, does.
type DictKeys struct {
	// Values are what each value the method returns holds: one per
	// element of a returned tuple, in order; one for any other return.
	Values []ValueKeys
	// Arguments are, by argument name, the string keys the method's own
	// code indexes the argument with (features["a"]), in order of first
	// appearance: the keys of a Dict[str, Tensor] argument. An argument
	// the body also uses otherwise (passes on, iterates, indexes with a
	// key that is no literal) is not listed: its code does not show every
	// key it reads.
	Arguments map[string][]string
}

// ValueKeys are the keys of one returned dict of tensors, or of each dict
// of a returned list of them.
type ValueKeys struct {
	// Keys are the keys the dict (each dict of the list) can hold, in
	// order of first appearance. A key is Always when every path the
	// inference takes through the code sets it (on each dict of the
	// list); a key only a training branch sets is listed, not Always.
	Keys []ReturnKey
	// Complete says the dict can hold no key outside Keys: the code that
	// builds it was followed all the way (false for a value that is not a
	// dict or a list of dicts).
	Complete bool
	// Why says, when the value is not Complete, where the code stops
	// telling: "code/__torch__/m.py:12 (Net.forward): passed to ...".
	Why string
}

// ReadDictKeys reads the DictKeys of each method of a TorchScript
// archive's root module class whose declared return type holds a
// Dict[str, Tensor], by an abstract evaluation of the archive's code
// (dictflow.go): the method runs in inference (self.training is false)
// with unknown arguments, and what it returns is followed back to the
// literals and item assignments that give the dicts their keys. Anything
// it cannot read (not a zip, no code) yields nothing, never an error: the
// keys are a hint for wfgen import, which refuses what they do not tell.
// Each method's Arguments are read from its own code (argumentKeys).
func ReadDictKeys(r io.ReaderAt, size int64) map[string]DictKeys {
	a, err := openArchive(r, size)
	if err != nil {
		return nil
	}
	read := func(p string) (string, bool) {
		b, err := a.read(p)
		return string(b), err == nil
	}
	out := dictKeys(read, a.module, a.class)
	methods, _, _ := classMethods(a.code, a.class)
	for _, m := range methods {
		args := argumentKeys(m.text)
		if args == nil {
			continue
		}
		if out == nil {
			out = map[string]DictKeys{}
		}
		d := out[m.name]
		d.Arguments = args
		out[m.name] = d
	}
	return out
}

// dictKeys evaluates each method of class module.class whose return type
// holds a Dict[str, Tensor]; read reads a code file by its path in the
// archive's folder ("code/__torch__/pkg.py").
func dictKeys(read func(string) (string, bool), module, class string) map[string]DictKeys {
	ev := &flowEval{read: read, files: map[string]*codeFile{}}
	q := module + "." + class
	c := ev.class(q)
	if c == nil {
		return nil
	}
	var out map[string]DictKeys
	// forward first: past the archive's budget, the others give up.
	names := slices.Sorted(maps.Keys(c.methods))
	if i := slices.Index(names, "forward"); i > 0 {
		names = append([]string{"forward"}, slices.Delete(names, i, i+1)...)
	}
	for _, name := range names {
		m := c.methods[name]
		if !strings.Contains(m.ret, "Dict[str,Tensor]") {
			continue
		}
		ev.failed, ev.steps = false, 0
		v, s, ok := ev.run(q, name)
		var d DictKeys
		values := []value{v}
		if v.kind == vTuple {
			values = v.elems
		}
		for _, e := range values {
			var vk ValueKeys
			if ok {
				vk = valueKeys(s, e)
			} else {
				vk.Why = "the code of " + m.qual + " is beyond what this reader follows (too long, or it always raises)"
			}
			d.Values = append(d.Values, vk)
		}
		if out == nil {
			out = map[string]DictKeys{}
		}
		out[name] = d
	}
	return out
}

// valueKeys reads the keys of the dict (or list of dicts) v.
func valueKeys(s *flowState, v value) ValueKeys {
	if v.kind != vObj {
		why := v.why
		if why == "" {
			why = "it comes from code this reader does not follow"
		}
		return ValueKeys{Why: why}
	}
	o := s.heap[v.obj]
	if o == nil {
		return ValueKeys{Why: "lost"}
	}
	complete, why := !o.unknown, o.why
	if o.list {
		if o.elem == 0 {
			return ValueKeys{Complete: complete, Why: why}
		}
		if o = s.heap[o.elem]; o == nil {
			return ValueKeys{Why: "lost"}
		}
		if complete {
			complete, why = !o.unknown, o.why
		}
	}
	vk := ValueKeys{Complete: complete}
	if !complete {
		vk.Why = why
	}
	for _, k := range o.keys {
		vk.Keys = append(vk.Keys, ReturnKey{Name: k.name, Always: k.always})
	}
	return vk
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
