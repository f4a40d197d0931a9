package params

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// contract is a compiled tensor contract: the dtype, and the shape each
// value must have — for a stacked input of a task whose batching names its
// dimension, each item's shape (the declared shape without its first,
// batch dimension).
type contract struct {
	dtype    tensor.DType
	shape    spec.Shape // nil: any rank
	declared spec.Shape // as the manifest writes it, for messages
	dims     map[string]spec.DimSpec
	compiled []dim // shape, parsed once
}

// dim is one compiled dimension: a fixed size (name ""), a name, or any
// size (name "*").
type dim struct {
	size int64
	name string
	spec *spec.DimSpec // the named dimension's constraints, or nil
}

// compile parses the shape's dimensions once, so that matching a tensor
// allocates nothing.
func (c *contract) compile() *contract {
	c.compiled = make([]dim, len(c.shape))
	for i, d := range c.shape {
		if n, fixed := d.Size(); fixed {
			c.compiled[i] = dim{size: n}
			continue
		}
		c.compiled[i].name = string(d)
		if spec, ok := c.dims[string(d)]; ok && d.Named() {
			c.compiled[i].spec = &spec
		}
	}
	return c
}

// any reports whether the contract accepts every tensor.
func (c *contract) any() bool { return c.dtype == "" && c.shape == nil }

// want describes what the contract wants: float32[3,H,W] (each item of
// [N,3,H,W]).
func (c *contract) want() string {
	s := spec.TensorContract{DType: c.dtype, Shape: c.shape}.String()
	if len(c.declared) != len(c.shape) {
		s += " (each item of " + c.declared.String() + ")"
	}
	return s
}

// compileContract compiles the contract of a tensor-like field of task t
// (nil for a field without one).
func compileContract(t *spec.InferenceTaskProfile, f *spec.InferenceFieldSpec) *contract {
	if f.DType == "" && f.Shape == nil {
		return nil
	}
	c := &contract{dtype: f.DType, shape: f.Shape, declared: f.Shape}
	if t != nil {
		c.dims = t.Dims
		if b := t.Batching; b != nil && b.Dim != "" && f.IsStacked() && len(f.Shape) > 0 && string(f.Shape[0]) == b.Dim {
			c.shape = f.Shape[1:]
		}
	}
	return c.compile()
}

// binding is the size a named dimension took in one check, and the field
// that set it.
type binding struct {
	name string
	size int64
	by   string
}

// dims binds named dimensions across the tensors of one check. A check
// binds a handful: the first four live in the value itself, so a check on
// the stack allocates nothing.
type dims struct {
	inline [4]binding
	more   []binding
	n      int
}

// at returns binding i.
func (b *dims) at(i int) binding {
	if i < len(b.inline) {
		return b.inline[i]
	}
	return b.more[i-len(b.inline)]
}

// find returns the binding of name among bindings [from, to), if any.
func (b *dims) find(name string, from, to int) (binding, bool) {
	for i := from; i < to; i++ {
		if x := b.at(i); x.name == name {
			return x, true
		}
	}
	return binding{}, false
}

// add appends a binding.
func (b *dims) add(x binding) {
	if b.n < len(b.inline) {
		b.inline[b.n] = x
	} else {
		b.more = append(b.more[:b.n-len(b.inline)], x)
	}
	b.n++
}

// match checks t against the contract and binds its named dimensions in
// *b; it returns a violation or nil. It allocates only to report one.
func (c *contract) match(path string, t *tensor.Tensor, b *dims) *Violation {
	mismatch := func(extra string) *Violation {
		return violation(path, "want %s, got %s%s%s", c.want(), t.DType, sizes(t.Shape), extra)
	}
	if c.dtype != "" && t.DType != c.dtype {
		return mismatch("")
	}
	if c.shape == nil {
		return nil
	}
	if len(t.Shape) != len(c.compiled) {
		return mismatch("")
	}
	// Fixed sizes first, then names, so that one message says what is wrong.
	for i, d := range c.compiled {
		if d.name == "" && t.Shape[i] != d.size {
			return mismatch("")
		}
	}
	first := b.n // bindings from index first on are this tensor's own
	for i, d := range c.compiled {
		if d.name == "" || d.name == string(spec.Wildcard) {
			continue
		}
		n := t.Shape[i]
		if prev, ok := b.find(d.name, first, b.n); ok && prev.size != n {
			b.n = first
			return mismatch(fmt.Sprintf(": %s is %d and %d", d.name, prev.size, n))
		}
		if prev, ok := b.find(d.name, 0, first); ok && prev.size != n {
			b.n = first
			return mismatch(fmt.Sprintf(": %s is %d here but %d in %s", d.name, n, prev.size, prev.by))
		}
		if n == 0 && (d.spec == nil || d.spec.Minimum == nil || *d.spec.Minimum > 0) {
			// An empty sequence or picture is rarely what a model takes
			// (a mean over 0 tokens is NaN): only a manifest that says so
			// allows it.
			b.n = first
			return violation(path, "dimension %s is 0; a named dimension is at least 1 unless the task's dims give it minimum: 0", d.name)
		}
		if d.spec != nil {
			if why := d.spec.Check(n); why != "" {
				b.n = first
				return violation(path, "dimension %s is %d, but it %s", d.name, n, why)
			}
		}
		if _, ok := b.find(d.name, 0, b.n); !ok {
			b.add(binding{name: d.name, size: n, by: path})
		}
	}
	return nil
}

// sizes writes a concrete shape as [4,3,32,32].
func sizes(s []int64) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// OutputRules check the tensors a task's method returned against the
// artifacts' declared dtype and shape.
type OutputRules struct {
	arts []outputRule
}

type outputRule struct {
	id, quoted string
	c          *contract
	// keys are the rules of a record's fields that declare a dtype or
	// shape (c is nil then); perItem says the record is a record_list,
	// whose dicts bind their own named dimensions.
	keys    []outputRule
	perItem bool
}

// CompileOutputs compiles the output contracts of t. Declared shapes are
// matched as written, batch dimension included: a batched call's outputs
// hold every item of the batch.
func CompileOutputs(t *spec.InferenceTaskProfile) OutputRules {
	var r OutputRules
	for i := range t.Outputs {
		a := &t.Outputs[i]
		if a.Kind.Holds().IsRecord() {
			rr := outputRule{id: a.ArtifactID, quoted: strconv.Quote(a.ArtifactID), perItem: a.Kind.Holds() == spec.HoldsRecordList}
			for _, f := range a.Fields {
				if f.DType == "" && f.Shape == nil {
					continue
				}
				c := &contract{dtype: f.DType, shape: f.Shape, declared: f.Shape, dims: t.Dims}
				rr.keys = append(rr.keys, outputRule{id: f.Name, quoted: strconv.Quote(f.Name), c: c.compile()})
			}
			if len(rr.keys) > 0 {
				r.arts = append(r.arts, rr)
			}
			continue
		}
		if !a.Kind.TensorLike() || (a.DType == "" && a.Shape == nil) {
			continue
		}
		c := &contract{dtype: a.DType, shape: a.Shape, declared: a.Shape, dims: t.Dims}
		r.arts = append(r.arts, outputRule{id: a.ArtifactID, quoted: strconv.Quote(a.ArtifactID), c: c.compile()})
	}
	return r
}

// Check checks the outputs (keyed by artifact id, as the engine returned
// them) and returns an error naming every artifact whose tensor (or, for a
// tensor_list, first element; for a record, first key) does not match its
// declaration; named dimensions are bound across the outputs and a list's
// elements (a record_list's dicts bind their own, matchRecord).
// Artifacts that are missing or are not tensors are left to the artifact
// conversion.
func (r OutputRules) Check(out map[string]any) error {
	if len(r.arts) == 0 {
		return nil
	}
	var b dims
	var vs []string
	for _, a := range r.arts {
		if a.keys != nil {
			if bad := a.matchRecord(out[a.id], &b); bad != "" {
				vs = append(vs, bad)
			}
			continue
		}
		switch v := out[a.id].(type) {
		case *tensor.Tensor:
			if v == nil {
				continue
			}
			if bad := a.c.match(a.quoted, v, &b); bad != nil {
				vs = append(vs, "artifact "+bad.Error())
			}
		case []any:
			// A tensor_list: each element has the declared dtype and
			// shape, its named dimensions bound across the elements.
			for i, e := range v {
				t, ok := e.(*tensor.Tensor)
				if !ok || t == nil {
					continue
				}
				if bad := a.c.match(a.quoted+"["+strconv.Itoa(i)+"]", t, &b); bad != nil {
					vs = append(vs, "artifact "+bad.Error())
					break
				}
			}
		}
	}
	if len(vs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrOutputContract, strings.Join(vs, "; "))
}

// matchRecord checks a record artifact's value (a dict, or for a
// record_list a list of dicts) against its fields' rules and returns the
// first violation, or "". Named dimensions a record binds hold across
// the outputs; those first bound inside one dict of a record_list hold
// for that dict only. Keys that are missing or not tensors, and values of
// another form, are left to the artifact conversion.
func (a *outputRule) matchRecord(v any, b *dims) string {
	one := func(path string, m map[string]any) string {
		for _, k := range a.keys {
			t, ok := m[k.id].(*tensor.Tensor)
			if !ok || t == nil {
				continue
			}
			if bad := k.c.match(path+" key "+k.quoted, t, b); bad != nil {
				return "artifact " + bad.Error()
			}
		}
		return ""
	}
	switch x := v.(type) {
	case map[string]any:
		if !a.perItem {
			return one(a.quoted, x)
		}
	case []any:
		if !a.perItem {
			return ""
		}
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			n := b.n
			bad := one(a.quoted+"["+strconv.Itoa(i)+"]", m)
			b.n = n
			if bad != "" {
				return bad
			}
		}
	}
	return ""
}

// ErrOutputContract is the error of outputs that break their declared
// dtype or shape: the model and the manifest disagree.
var ErrOutputContract = fmt.Errorf("the model's output does not match the manifest")
