package spec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Parts of structured inputs: the one rule by which a field of a kind with
// parts (Kind.HasParts: tensor_dict, tensor_tuple) is described, checked
// and turned into the engine's value. Its fields (InferenceFieldSpec.Fields)
// are its parts, one tensor each, in order; the generated params hold a
// struct with one *tensor.Tensor per part, in that order.
//
//   - tensor_dict: part k is the dict's key Fields[k].Name; a part left
//     nil is a key the dict does not hold (an error when the part is
//     required). The engine's form is a map[string]any.
//   - tensor_tuple: part k is the tuple's element k; every part is
//     required (a tuple has no holes). The engine's form is a []any.
//
// On the wire (runtime/oip) part k of field ID is the tensor named
// ID.PART, PART being PartName(k): the key for a dict, the position for a
// tuple.

// TorchScriptType is the TorchScript type the field is passed as: its
// kind's (Kind.TorchScriptType), with a tuple's one Tensor per part.
func (f *InferenceFieldSpec) TorchScriptType() string { return f.Kind.TupleType(len(f.Fields)) }

// PartName returns the name of part k of the field after "ID." on the
// wire: the key of a dict, the decimal position of a tuple element.
func (f *InferenceFieldSpec) PartName(k int) string {
	if f.Kind.Form() == FormTuple {
		return strconv.Itoa(k)
	}
	return f.Fields[k].Name
}

// PartOf returns the index of the part PartName names; ok is false for a
// name that is no part of the field.
func (f *InferenceFieldSpec) PartOf(name string) (k int, ok bool) {
	for k := range f.Fields {
		if f.PartName(k) == name {
			return k, true
		}
	}
	return 0, false
}

// PartRequired reports whether part k must be given: every element of a
// tuple, the keys of a dict the manifest marks required.
func (f *InferenceFieldSpec) PartRequired(k int) bool {
	return f.Kind.Form() == FormTuple || f.Fields[k].Required
}

// PartsValue returns the engine's value of a field with parts from its
// parts (one per field, in order; nil for a part not given): a dict holds
// the keys of the parts given, a tuple every part.
func (f *InferenceFieldSpec) PartsValue(parts []*tensor.Tensor) any {
	if f.Kind.Form() == FormTuple {
		out := make([]any, len(parts))
		for k, t := range parts {
			if t != nil { // a missing element is nil, not a nil *Tensor
				out[k] = t
			}
		}
		return out
	}
	m := make(map[string]any, len(parts))
	for k, t := range parts {
		if t != nil {
			m[f.Fields[k].Name] = t
		}
	}
	return m
}

// EachPart visits the parts of v, the engine's value of a field with
// parts (a map[string]any for a dict, a []any for a tuple): for each part
// it holds, its index in f.Fields and its tensor, in part order. A value
// of another form, a dict key the fields do not declare, a tuple of
// another length, a part that is not a tensor, each's error, and required
// parts absent (named) are errors. The in-process client, the params
// check and the wire's encoder and decoder read such values through it.
func (f *InferenceFieldSpec) EachPart(v any, each func(k int, t *tensor.Tensor) error) error {
	var missing []string
	visit := func(k int, e any) error {
		if e == nil {
			if f.PartRequired(k) {
				missing = append(missing, strconv.Quote(f.PartName(k)))
			}
			return nil
		}
		t, err := tensor.AsTensor(e)
		if err == nil {
			err = each(k, t)
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", f.partNoun(), f.PartName(k), err)
		}
		return nil
	}
	switch f.Kind.Form() {
	case FormTuple:
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want a tuple of %d tensors (%s), got %T", len(f.Fields), f.TorchScriptType(), v)
		}
		if len(list) != len(f.Fields) {
			return fmt.Errorf("want a tuple of %d tensors (%s), got %d", len(f.Fields), f.TorchScriptType(), len(list))
		}
		for k, e := range list {
			if err := visit(k, e); err != nil {
				return err
			}
		}
	case FormDict:
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want a dict of tensors (Dict[str, Tensor]), got %T", v)
		}
		for key := range m {
			if _, ok := f.PartOf(key); !ok {
				return fmt.Errorf("key %q is not one the field declares (%s)", key, f.PartList())
			}
		}
		for k := range f.Fields {
			if err := visit(k, m[f.Fields[k].Name]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("field %q of kind %s has no parts", f.FieldID, f.Kind)
	}
	if len(missing) > 0 {
		return fmt.Errorf("required %s(s) %s missing", f.partNoun(), strings.Join(missing, ", "))
	}
	return nil
}

// partNoun names a part in messages: "key" or "element".
func (f *InferenceFieldSpec) partNoun() string {
	if f.Kind.Form() == FormTuple {
		return "element"
	}
	return "key"
}

// PartList names the parts for messages: "a, b" (a dict's keys) or
// "0, 1" (a tuple's positions).
func (f *InferenceFieldSpec) PartList() string {
	names := make([]string, len(f.Fields))
	for k := range f.Fields {
		names[k] = f.PartName(k)
	}
	return strings.Join(names, ", ")
}

// PartProblems checks a field's parts (paths relative to the field): a
// kind with parts has at least one, other kinds none; a name has no '.'
// and is not all digits (on the wire it is part of a tensor's name), no
// two parts name the same key, and a tuple's elements are required.
func (f *InferenceFieldSpec) PartProblems() []Problem {
	parts := f.Kind.HasParts()
	switch {
	case !f.Kind.Valid():
		return nil // reported at the kind
	case !parts && f.Fields != nil:
		return []Problem{{Path: "fields", Key: true, Message: fmt.Sprintf(
			"field %q: fields are the parts of a tensor_dict (Dict[str, Tensor]) or tensor_tuple (Tuple[Tensor, ...]) field, and this field's kind is %s: remove fields, or use one of those kinds", f.FieldID, f.Kind)}}
	case parts && len(f.Fields) == 0:
		at, key := "fields", true
		if f.Fields == nil {
			at, key = "", false
		}
		example := "fields: [{name: a, required: true, dtype: float32, shape: [N, 8]}, ...] (the dict's keys)"
		if f.Kind.Form() == FormTuple {
			example = "fields: [{name: left, required: true}, {name: right, required: true}] (the tuple's elements, in order)"
		}
		return []Problem{{Path: at, Key: key, Message: fmt.Sprintf("field %q: a %s field lists its parts under fields, at least one: %s", f.FieldID, f.Kind, example)}}
	}
	var ps []Problem
	first := map[string]int{}
	for j, p := range f.Fields {
		if p.Name == "" {
			continue // the schema says a name is at least 1 character
		}
		if strings.Contains(p.Name, ".") || strings.Trim(p.Name, "0123456789") == "" {
			ps = append(ps, Problem{Path: fmt.Sprintf("fields/%d/name", j), Message: fmt.Sprintf(
				"field %q: part %q: use a name with no '.' that is not all digits (on the wire a dict's key is part of an input's name, %s.KEY, where a '.' separates the parts and digits are positions)", f.FieldID, p.Name, f.FieldID)})
			continue
		}
		if k, dup := first[p.Name]; dup {
			ps = append(ps, Problem{Path: fmt.Sprintf("fields/%d/name", j), Message: fmt.Sprintf(
				"field %q: parts %d and %d are both named %q; each part is another %s", f.FieldID, k, j, p.Name, f.partNoun())})
			continue
		}
		first[p.Name] = j
		if f.Kind.Form() == FormTuple && !p.Required {
			ps = append(ps, Problem{Path: fmt.Sprintf("fields/%d", j), Message: fmt.Sprintf(
				"field %q: element %d (%q) of a tuple is always passed: set required: true", f.FieldID, j, p.Name)})
		}
	}
	return ps
}
