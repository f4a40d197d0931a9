package params

import (
	"errors"
	"reflect"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Check collects the violations of one params value. Start it with
// Rules.Check, apply the functions of this package field by field (i is
// the field's index in the task's inputs) and end it with Err.
type Check struct {
	rules Rules
	errs  []*Violation
	bound dims // named dimensions bound so far
}

// Check starts checking one params value.
func (r Rules) Check() Check { return Check{rules: r} }

func (c *Check) add(v *Violation) { c.errs = append(c.errs, v) }

// Err returns every violation found, joined with errors.Join (one per
// line, in field order), or nil.
func (c *Check) Err() error {
	if len(c.errs) == 0 {
		return nil
	}
	errs := make([]error, len(c.errs))
	for i, v := range c.errs {
		errs[i] = v
	}
	return errors.Join(errs...)
}

// String checks a string field (or a field of a choice type).
func String[T ~string](c *Check, i int, v T) {
	f := c.rules[i]
	if v == "" && f.Presence == spec.Required {
		f.required(c)
		return
	}
	f.checkString(c, f.path, string(v), true)
}

// OptString checks an optional string field; nil is not checked.
func OptString[T ~string](c *Check, i int, v *T) {
	if v != nil {
		f := c.rules[i]
		f.checkString(c, f.path, string(*v), true)
	}
}

// Strings checks a string_list field.
func Strings[T ~string](c *Check, i int, v []T) {
	f := c.rules[i]
	if !f.list(c, v == nil, len(v)) {
		return
	}
	for j, s := range v {
		f.checkString(c, f.itemPath(j), string(s), false)
	}
}

// Int checks an int field.
func Int(c *Check, i int, v int64) {
	f := c.rules[i]
	f.checkInt(c, f.path, v)
}

// OptInt checks an optional int field; nil is not checked.
func OptInt(c *Check, i int, v *int64) {
	if v != nil {
		Int(c, i, *v)
	}
}

// Ints checks an int_list field.
func Ints(c *Check, i int, v []int64) {
	f := c.rules[i]
	if !f.list(c, v == nil, len(v)) {
		return
	}
	for j, n := range v {
		f.checkInt(c, f.itemPath(j), n)
	}
}

// Float checks a float field.
func Float(c *Check, i int, v float64) {
	f := c.rules[i]
	f.checkFloat(c, f.path, v)
}

// OptFloat checks an optional float field; nil is not checked.
func OptFloat(c *Check, i int, v *float64) {
	if v != nil {
		Float(c, i, *v)
	}
}

// Floats checks a float_list field.
func Floats(c *Check, i int, v []float64) {
	f := c.rules[i]
	if !f.list(c, v == nil, len(v)) {
		return
	}
	for j, x := range v {
		f.checkFloat(c, f.itemPath(j), x)
	}
}

// Bools checks a bool_list field (its length).
func Bools(c *Check, i int, v []bool) {
	f := c.rules[i]
	f.list(c, v == nil, len(v))
}

// Tensor checks a tensor, image or video field: present when required,
// and data consistent with dtype and shape.
func Tensor(c *Check, i int, v *tensor.Tensor) {
	f := c.rules[i]
	switch {
	case v != nil:
		f.checkTensor(c, f.path, v)
	case f.Presence == spec.Required:
		f.required(c)
	}
}

// Tensors checks a tensor_list field: its length, and every item present
// and consistent.
func Tensors(c *Check, i int, v []*tensor.Tensor) {
	f := c.rules[i]
	if !f.list(c, v == nil, len(v)) {
		return
	}
	for j, t := range v {
		if t == nil {
			c.add(violation(f.itemPath(j), "is nil"))
			continue
		}
		f.checkTensor(c, f.itemPath(j), t)
	}
}

// Parts checks a tensor_dict or tensor_tuple field given in the engine's
// value form (spec.InferenceFieldSpec.EachPart; nil: unset): its required
// parts present, and each part's tensor consistent and matching the
// part's dtype and shape, named dimensions bound across the task's fields.
// The path of a part's violation is the field id and the part
// ("features.a", "pair.1").
func Parts(c *Check, i int, v any) {
	f := c.rules[i]
	if v == nil {
		if f.Presence == spec.Required {
			f.required(c)
		}
		return
	}
	err := f.Spec.EachPart(v, func(k int, t *tensor.Tensor) error {
		path := f.path + "." + f.Spec.PartName(k)
		if err := t.Check(); err != nil {
			c.add(&Violation{Path: path, Message: err.Error(), Err: err})
			return nil
		}
		if p := f.parts[k]; p != nil {
			if v := p.match(path, t, &c.bound); v != nil {
				c.add(v)
			}
		}
		return nil
	})
	if err != nil {
		c.add(&Violation{Path: f.path, Message: err.Error(), Err: err})
	}
}

// list checks a list's presence and length and reports whether its items
// are to be checked. A nil optional list is unset; a nil required list is
// missing.
func (f *Field) list(c *Check, isNil bool, n int) bool {
	if isNil {
		switch f.Presence {
		case spec.Required:
			f.required(c)
			return false
		case spec.Optional:
			return false
		}
	}
	f.checkLen(c, n)
	return true
}

var tensorType = reflect.TypeFor[*tensor.Tensor]()

// Value checks field i's value held in a params struct field v, of the Go
// type the generator gives the field's kind: string (or a choice type),
// int64, float64 or bool, a pointer to one for an optional scalar, a slice
// of one for a list, *tensor.Tensor or []*tensor.Tensor. It checks what the
// function of the kind (String, OptString, Int, OptInt, Floats, Tensor, …)
// checks: a generated Validate applies it to each field in turn.
func Value(c *Check, i int, v reflect.Value) {
	f := c.rules[i]
	if f.Kind.HasParts() {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return // an unset optional dict or tuple
			}
			v = v.Elem()
		}
		parts := make([]*tensor.Tensor, v.NumField())
		for k := range parts {
			parts[k], _ = v.Field(k).Interface().(*tensor.Tensor)
		}
		Parts(c, i, f.Spec.PartsValue(parts))
		return
	}
	if v.Kind() == reflect.Pointer && v.Type() != tensorType {
		if v.IsNil() {
			return // an unset optional scalar
		}
		v = v.Elem()
		if f.Kind.Textual() {
			f.checkString(c, f.path, v.String(), true)
			return
		}
	}
	if f.Kind.IsList() {
		if !f.list(c, v.IsNil(), v.Len()) {
			return
		}
		for j := range v.Len() {
			f.checkItem(c, f.itemPath(j), v.Index(j))
		}
		return
	}
	switch f.Kind.Base() {
	case spec.BaseString:
		String(c, i, v.String())
	case spec.BaseTensor:
		Tensor(c, i, v.Interface().(*tensor.Tensor))
	default:
		f.checkItem(c, f.path, v)
	}
}

// checkItem checks one value of the field's base at path: an item of a
// list, or an int, float or bool field's value.
func (f *Field) checkItem(c *Check, path string, x reflect.Value) {
	switch f.Kind.Base() {
	case spec.BaseString:
		f.checkString(c, path, x.String(), false)
	case spec.BaseInt:
		f.checkInt(c, path, x.Int())
	case spec.BaseFloat:
		f.checkFloat(c, path, x.Float())
	case spec.BaseTensor:
		if x.IsNil() {
			c.add(violation(path, "is nil"))
			return
		}
		f.checkTensor(c, path, x.Interface().(*tensor.Tensor))
	}
}
