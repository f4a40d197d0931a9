// Package params holds the rules a task's input values must follow —
// presence, bounds, multiple_of, lengths, pattern, choices, tensor
// consistency — compiled once from the field specs, and the checks that
// apply them. It is the one place these rules live: generated Validate
// methods, the manifest validator (for defaults) and servers decoding
// requests all call it, so a value is judged the same way wherever it
// comes from.
//
// Integer rules are exact over the whole int64 range: bounds are compared
// as written in the manifest (spec.Number), and multiple_of/remainder
// never overflow.
package params

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Field is the compiled rule set of one input field. Build it with
// Compile; it is immutable and safe for concurrent use.
type Field struct {
	// Spec is the field the rules come from.
	Spec *spec.InferenceFieldSpec
	// Kind is the field's kind.
	Kind spec.Kind
	// Presence says whether the field must be given.
	Presence spec.Presence

	path string // the field id, the prefix of every violation

	// Integer bounds; for int kinds only. noInt says no int64 satisfies both.
	minI, maxI       int64
	hasMinI, hasMaxI bool
	noInt            bool
	// Float bounds (float kinds, and the text of any bound).
	minF, maxF       float64
	hasMin, hasMax   bool
	minText, maxText string

	mult, rem int64 // multiple_of (0: none) and remainder, rem in [0, mult)

	minLen, maxLen       int
	hasMinLen, hasMaxLen bool

	re      *regexp.Regexp
	choices map[string]bool

	tensor *contract // the dtype and shape of tensor-like values, or nil
	// parts are the contracts of the parts of a field with parts
	// (tensor_dict, tensor_tuple), one per part (nil: any tensor).
	parts []*contract
}

// Rules are the compiled rules of one task's fields, in the task's input
// order.
type Rules []*Field

// Compile compiles the rules of every input field of t. It fails only for a
// field the manifest validator rejects (a pattern that is not RE2, a kind
// that does not exist).
func Compile(t *spec.InferenceTaskProfile) (Rules, error) {
	r := make(Rules, len(t.Inputs))
	for i := range t.Inputs {
		f, err := compileField(t, &t.Inputs[i])
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", t.TaskID, err)
		}
		r[i] = f
	}
	return r, nil
}

// MustCompile is Compile for specs that passed validation (generated
// code); it panics on an error.
func MustCompile(t *spec.InferenceTaskProfile) Rules {
	r, err := Compile(t)
	if err != nil {
		panic("params: " + err.Error())
	}
	return r
}

// CompileField compiles the rules of one field, outside of its task: a
// tensor shape is matched as declared (see Compile for batch dimensions)
// and named dimensions carry no constraints.
func CompileField(s *spec.InferenceFieldSpec) (*Field, error) { return compileField(nil, s) }

func compileField(t *spec.InferenceTaskProfile, s *spec.InferenceFieldSpec) (*Field, error) {
	if !s.Kind.Valid() {
		return nil, fmt.Errorf("field %q: kind %q is not one of the field kinds", s.FieldID, s.Kind)
	}
	f := &Field{Spec: s, Kind: s.Kind.Effective(), Presence: s.Presence(), path: s.FieldID}
	if s.Minimum != nil {
		if !s.Minimum.Valid() {
			return nil, fmt.Errorf("field %q: minimum %q is not a number", s.FieldID, string(*s.Minimum))
		}
		f.hasMin, f.minF, f.minText = true, s.Minimum.Float64(), s.Minimum.String()
		if s.Kind.Integer() {
			v, ok := s.Minimum.IntBounds(true)
			f.minI, f.hasMinI, f.noInt = v, true, f.noInt || !ok
		}
	}
	if s.Maximum != nil {
		if !s.Maximum.Valid() {
			return nil, fmt.Errorf("field %q: maximum %q is not a number", s.FieldID, string(*s.Maximum))
		}
		f.hasMax, f.maxF, f.maxText = true, s.Maximum.Float64(), s.Maximum.String()
		if s.Kind.Integer() {
			v, ok := s.Maximum.IntBounds(false)
			f.maxI, f.hasMaxI, f.noInt = v, true, f.noInt || !ok
		}
	}
	if s.MultipleOf != nil {
		if *s.MultipleOf < 1 {
			return nil, fmt.Errorf("field %q: multiple_of %d must be at least 1", s.FieldID, *s.MultipleOf)
		}
		if s.Remainder < 0 || s.Remainder >= *s.MultipleOf {
			return nil, fmt.Errorf("field %q: remainder %d must be in [0, multiple_of)", s.FieldID, s.Remainder)
		}
		f.mult, f.rem = *s.MultipleOf, s.Remainder
	}
	if s.MinLength != nil {
		f.minLen, f.hasMinLen = *s.MinLength, true
	}
	if s.MaxLength != nil {
		f.maxLen, f.hasMaxLen = *s.MaxLength, true
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return nil, fmt.Errorf("field %q: pattern is not a valid RE2 regular expression: %s", s.FieldID, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		f.re = re
	}
	if len(s.Choices) > 0 {
		f.choices = make(map[string]bool, len(s.Choices))
		for _, c := range s.Choices {
			f.choices[c] = true
		}
	}
	if s.Kind.TensorLike() {
		if s.DType != "" && !s.DType.Valid() {
			return nil, fmt.Errorf("field %q: dtype %q is not one of the tensor dtypes", s.FieldID, s.DType)
		}
		for _, d := range s.Shape {
			if !d.Valid() {
				return nil, fmt.Errorf("field %q: shape %s: %q is not a size, a name or *", s.FieldID, s.Shape, string(d))
			}
		}
		f.tensor = compileContract(t, s)
	}
	if s.Kind.HasParts() {
		f.parts = make([]*contract, len(s.Fields))
		for k, p := range s.Fields {
			if p.DType != "" && !p.DType.Valid() {
				return nil, fmt.Errorf("field %q: part %q: dtype %q is not one of the tensor dtypes", s.FieldID, p.Name, p.DType)
			}
			for _, d := range p.Shape {
				if !d.Valid() {
					return nil, fmt.Errorf("field %q: part %q: shape %s: %q is not a size, a name or *", s.FieldID, p.Name, p.Shape, string(d))
				}
			}
			if p.DType != "" || p.Shape != nil {
				c := &contract{dtype: p.DType, shape: p.Shape, declared: p.Shape}
				if t != nil {
					c.dims = t.Dims
				}
				f.parts[k] = c.compile()
			}
		}
	}
	return f, nil
}

// Violation is one way a value breaks its field's rules.
type Violation struct {
	// Path is the field id, with [i] for a list item ("tags[1]").
	Path string
	// Message says what is wrong ("must be at least 1, got 0").
	Message string
	// Hint, when set, says what would be right ("nearest valid: 9 or 17").
	Hint string
	// Err is the underlying error, when there is one (a malformed tensor).
	Err error
}

// Error returns "path: message".
func (v *Violation) Error() string { return v.Path + ": " + v.Message }

// Unwrap returns the underlying error.
func (v *Violation) Unwrap() error { return v.Err }

func violation(path, format string, args ...any) *Violation {
	return &Violation{Path: path, Message: fmt.Sprintf(format, args...)}
}

// itemPath is the path of item i of the field.
func (f *Field) itemPath(i int) string { return f.path + "[" + strconv.Itoa(i) + "]" }

// checkInt applies the bounds and multiple_of rules to n.
func (f *Field) checkInt(s *Check, path string, n int64) {
	if f.hasMinI && (f.noInt || n < f.minI) {
		s.add(violation(path, "must be at least %s, got %d", f.minText, n))
	}
	if f.hasMaxI && (f.noInt || n > f.maxI) {
		s.add(violation(path, "must be at most %s, got %d", f.maxText, n))
	}
	if f.mult > 0 && mod(n, f.mult) != f.rem {
		v := violation(path, "must be %s, got %d", multipleText(f.mult, f.rem, true), n)
		v.Hint = f.nearest(n)
		s.add(v)
	}
}

// mod returns n mod m in [0, m) for m ≥ 1, without overflow.
func mod(n, m int64) int64 {
	r := n % m
	if r < 0 {
		r += m
	}
	return r
}

// nearest names the valid values next to n (below and above) that also
// keep within the bounds, as "nearest valid: a or b", or "".
func (f *Field) nearest(n int64) string {
	d := mod(mod(n, f.mult)-f.rem, f.mult) // n - d is valid
	var near []int64
	if below, ok := sub(n, d); ok {
		near = append(near, below)
		if above, ok := add(below, f.mult); ok {
			near = append(near, above)
		}
	} else if above, ok := add(n, f.mult-d); ok {
		near = append(near, above)
	}
	var text []string
	for _, x := range near {
		if f.inBounds(x) {
			text = append(text, strconv.FormatInt(x, 10))
		}
	}
	if len(text) == 0 {
		return ""
	}
	return "nearest valid: " + strings.Join(text, " or ")
}

func (f *Field) inBounds(n int64) bool {
	return !f.noInt && (!f.hasMinI || n >= f.minI) && (!f.hasMaxI || n <= f.maxI)
}

func sub(a, b int64) (int64, bool) {
	c := a - b
	return c, (b >= 0) == (c <= a)
}

func add(a, b int64) (int64, bool) {
	c := a + b
	return c, (b >= 0) == (c >= a)
}

// multipleText says "a multiple of 16" or "8k+1 (a multiple of 8 plus 1)";
// article adds the "a" of the first form.
func multipleText(m, rem int64, article bool) string {
	if rem == 0 {
		if article {
			return fmt.Sprintf("a multiple of %d", m)
		}
		return fmt.Sprintf("multiple of %d", m)
	}
	return fmt.Sprintf("%dk+%d (a multiple of %d plus %d)", m, rem, m, rem)
}

// checkFloat applies the bounds to x; NaN fails every bound.
func (f *Field) checkFloat(s *Check, path string, x float64) {
	if f.hasMin && !(x >= f.minF) {
		s.add(violation(path, "must be at least %s, got %v", f.minText, x))
	}
	if f.hasMax && !(x <= f.maxF) {
		s.add(violation(path, "must be at most %s, got %v", f.maxText, x))
	}
}

// maxListedChoices bounds the choices a message lists.
const maxListedChoices = 12

// checkString applies choices, length (whole values only) and pattern.
func (f *Field) checkString(s *Check, path string, v string, whole bool) {
	if f.choices != nil && !f.choices[v] {
		s.add(violation(path, "must be one of %s, got %s", f.choiceText(), Quote(v)))
	}
	if whole && !f.Kind.IsList() {
		n := runeCount(v)
		if f.hasMinLen && n < f.minLen {
			s.add(violation(path, "must have at least %s, has %d", count(f.minLen, "character"), n))
		}
		if f.hasMaxLen && n > f.maxLen {
			s.add(violation(path, "must have at most %s, has %d", count(f.maxLen, "character"), n))
		}
	}
	if f.re != nil && !f.re.MatchString(v) {
		s.add(violation(path, "must match the pattern %s, got %s", f.Spec.Pattern, Quote(v)))
	}
}

func runeCount(s string) int {
	n := 0
	for range s {
		n++
	}
	return n
}

// choiceText lists the choices, quoted; a long list is cut short.
func (f *Field) choiceText() string {
	cs := f.Spec.Choices
	q := make([]string, 0, min(len(cs), maxListedChoices))
	for _, c := range cs[:min(len(cs), maxListedChoices)] {
		q = append(q, strconv.Quote(c))
	}
	s := strings.Join(q, ", ")
	if len(cs) > maxListedChoices {
		s += fmt.Sprintf(", … (%d in all)", len(cs))
	}
	return s
}

// count says "1 item" or "3 items".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkLen applies the length rules to a list of n items.
func (f *Field) checkLen(s *Check, n int) {
	if f.hasMinLen && n < f.minLen {
		s.add(violation(f.path, "must have at least %s, has %d", count(f.minLen, "item"), n))
	}
	if f.hasMaxLen && n > f.maxLen {
		s.add(violation(f.path, "must have at most %s, has %d", count(f.maxLen, "item"), n))
	}
}

// checkTensor checks that a tensor's data matches its dtype and shape, and
// that both match the field's contract, binding its named dimensions.
func (f *Field) checkTensor(c *Check, path string, t *tensor.Tensor) {
	if err := t.Check(); err != nil {
		c.add(&Violation{Path: path, Message: err.Error(), Err: err})
		return
	}
	if f.tensor == nil {
		return
	}
	if v := f.tensor.match(path, t, &c.bound); v != nil {
		c.add(v)
	}
}

// required reports a required field that is missing.
func (f *Field) required(s *Check) {
	s.add(violation(f.path, "is required"))
}

// CheckValue checks a manifest value (a default, a default_call_kwargs
// entry) against the field: its kind and every rule. v holds the manifest
// validator's value form: string, int64, float64, bool, or []any of those
// for list kinds. nil always fits. It returns the value in the kind's Go
// form (string, int64, float64, bool, []string, []int64, []float64,
// []bool) when it fits, and every violation; a kind mismatch is a
// violation whose Message names the value and the kind.
func (f *Field) CheckValue(v any) (any, []*Violation) {
	if v == nil {
		return nil, nil
	}
	var l Check
	if f.Kind.TensorLike() {
		l.add(&Violation{Path: f.path, Message: fmt.Sprintf("cannot be set: a field of kind %s has its value only at call time", f.Kind)})
		return nil, l.errs
	}
	if !f.Kind.IsList() {
		nv, ok := f.scalarValue(&l, f.path, v, true)
		if !ok {
			return nil, l.errs
		}
		return nv, l.errs
	}
	items, ok := v.([]any)
	if !ok {
		l.add(&Violation{Path: f.path, Message: fmt.Sprintf("is %s, but the field's kind is %s", phrase(v), f.Kind.Phrase())})
		return nil, l.errs
	}
	f.checkLen(&l, len(items))
	good := true
	out := make([]any, len(items))
	for i, it := range items {
		nv, ok := f.scalarValue(&l, f.itemPath(i), it, false)
		good = good && ok
		out[i] = nv
	}
	if !good {
		return nil, l.errs
	}
	switch f.Kind.Base() {
	case spec.BaseString:
		return typed[string](out), l.errs
	case spec.BaseInt:
		return typed[int64](out), l.errs
	case spec.BaseFloat:
		return typed[float64](out), l.errs
	}
	return typed[bool](out), l.errs
}

func typed[T any](items []any) []T {
	out := make([]T, len(items))
	for i, x := range items {
		out[i] = x.(T)
	}
	return out
}

// scalarValue checks one scalar of the field's element kind.
func (f *Field) scalarValue(s *Check, path string, v any, whole bool) (any, bool) {
	mismatch := func() (any, bool) {
		s.add(&Violation{Path: path, Message: fmt.Sprintf("is %s, but the field's kind is %s", phrase(v), f.Kind.Phrase())})
		return nil, false
	}
	var l Check
	var out any
	switch f.Kind.Base() {
	case spec.BaseString:
		x, ok := v.(string)
		if !ok {
			return mismatch()
		}
		f.checkString(&l, path, x, whole)
		out = x
	case spec.BaseBool:
		x, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		out = x
	case spec.BaseInt:
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case float64:
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				return mismatch()
			}
			n = int64(x)
		default:
			return mismatch()
		}
		f.checkInt(&l, path, n)
		out = n
	case spec.BaseFloat:
		var x float64
		switch y := v.(type) {
		case int64:
			x = float64(y)
		case float64:
			x = y
		default:
			return mismatch()
		}
		f.checkFloat(&l, path, x)
		out = x
	default:
		return mismatch()
	}
	for _, v := range l.errs {
		s.add(v)
	}
	return out, len(l.errs) == 0
}

// phrase describes a manifest value for messages: `the string "x"`.
func phrase(v any) string {
	switch x := v.(type) {
	case string:
		return "the string " + Quote(x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

// Nearest returns the valid values of an int field next to n that keep
// within its bounds ("nearest valid: 9 or 17"), or "" when n is valid or
// the field has no multiple_of.
func (f *Field) Nearest(n int64) string {
	if f.mult == 0 || mod(n, f.mult) == f.rem {
		return ""
	}
	return f.nearest(n)
}
