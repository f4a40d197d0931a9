package docs

import (
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/runtime/params"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// example returns a Go expression for a value of the field that passes its
// rules, for the page's usage snippet ("" when none could be found; the
// snippet then leaves a comment). pkg qualifies generated names.
func example(pkg string, task *ir.Task, f *ir.Field) string {
	rules, err := params.CompileField(f.Spec)
	if err != nil {
		return ""
	}
	fits := func(v any) bool { _, vs := rules.CheckValue(v); return len(vs) == 0 }
	s := f.Spec
	if f.Parts != nil { // the generated struct, its required parts set
		var parts []string
		for k, p := range f.Parts.Fields {
			if s.PartRequired(k) {
				ps := &spec.InferenceFieldSpec{FieldID: s.FieldID, Kind: f.Kind.Elem(), DType: p.Spec.DType, Shape: p.Spec.Shape}
				parts = append(parts, p.Name+": "+zerosExample(&ir.Field{Spec: ps, Kind: ps.Kind}, task))
			}
		}
		lit := pkg + "." + f.Parts.Type + "{" + strings.Join(parts, ", ") + "}"
		if f.Type.Pointer {
			lit = "&" + lit
		}
		return lit
	}
	if f.Kind.IsList() && !f.Kind.TensorLike() {
		n := 1
		if s.MinLength != nil {
			n = max(n, *s.MinLength)
		}
		elem := &ir.Field{Spec: elemSpec(s), Kind: f.Kind.Elem(), Presence: spec.Required, Choice: f.Choice}
		item := example(pkg, task, elem)
		if item == "" || n > 64 {
			return ""
		}
		items := make([]string, n)
		for i := range items {
			items[i] = item
		}
		return f.Type.String() + "{" + strings.Join(items, ", ") + "}"
	}
	switch f.Kind.Base() {
	case spec.BaseString:
		if f.Choice != nil {
			v := f.Choice.Values[0]
			if v.Const != "" {
				return pkg + "." + v.Const
			}
			return pkg + "." + f.Choice.Type + "(" + strconv.Quote(v.Value) + ")"
		}
		for _, c := range stringCandidates(s) {
			if fits(c) {
				return strconv.Quote(c)
			}
		}
	case spec.BaseInt:
		for _, c := range intCandidates(s) {
			if fits(c) {
				return strconv.FormatInt(c, 10)
			}
		}
	case spec.BaseFloat:
		for _, c := range []float64{0, 0.5, 1} {
			if fits(c) {
				return floatGo(c)
			}
		}
		if s.Minimum != nil && fits(s.Minimum.Float64()) {
			return floatGo(s.Minimum.Float64())
		}
	case spec.BaseBool:
		return "false"
	case spec.BaseTensor:
		if f.Kind.IsList() {
			return f.Type.String() + "{" + zerosExample(f, task) + "}"
		}
		return zerosExample(f, task)
	}
	return ""
}

// elemSpec is the spec of one item of a list field: its item rules, no
// length rule.
func elemSpec(s *spec.InferenceFieldSpec) *spec.InferenceFieldSpec {
	e := *s
	e.Kind = s.Kind.Elem()
	e.MinLength, e.MaxLength, e.Default = nil, nil, nil
	return &e
}

func floatGo(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// intCandidates are values to try for an int field: its bounds and the
// valid values next to them and to zero.
func intCandidates(s *spec.InferenceFieldSpec) []int64 {
	out := []int64{0, 1}
	if s.Minimum != nil {
		if v, ok := s.Minimum.IntBounds(true); ok {
			out = append(out, v)
		}
	}
	if s.Maximum != nil {
		if v, ok := s.Maximum.IntBounds(false); ok {
			out = append(out, v)
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		m := *s.MultipleOf
		for _, base := range append([]int64(nil), out...) {
			r := (base - s.Remainder) % m
			if r < 0 {
				r += m
			}
			out = append(out, base-r, base-r+m)
		}
	}
	return out
}

// stringCandidates are strings to try for a string field: a word, and the
// shortest match of its pattern, padded to its minimum length.
func stringCandidates(s *spec.InferenceFieldSpec) []string {
	out := []string{"example"}
	if s.Pattern != "" {
		if re, err := syntax.Parse(s.Pattern, syntax.Perl); err == nil {
			out = append(out, shortest(re.Simplify()))
		}
	}
	if s.MinLength != nil {
		for _, c := range append([]string(nil), out...) {
			if n := len([]rune(c)); n < *s.MinLength && n > 0 && *s.MinLength <= 1024 {
				out = append(out, c+strings.Repeat(c[len(c)-1:], *s.MinLength-n))
			}
		}
	}
	return out
}

// shortest returns a short string the regular expression matches (for the
// constructs it knows; the caller checks the result).
func shortest(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune)
	case syntax.OpCharClass:
		if len(re.Rune) >= 2 {
			for i := 0; i+1 < len(re.Rune); i += 2 {
				for _, r := range []rune{'a', 'A', '0'} {
					if re.Rune[i] <= r && r <= re.Rune[i+1] {
						return string(r)
					}
				}
			}
			return string(re.Rune[0])
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return "a"
	case syntax.OpPlus:
		return shortest(re.Sub[0])
	case syntax.OpRepeat:
		return strings.Repeat(shortest(re.Sub[0]), re.Min)
	case syntax.OpConcat:
		var b strings.Builder
		for _, s := range re.Sub {
			b.WriteString(shortest(s))
		}
		return b.String()
	case syntax.OpAlternate, syntax.OpCapture:
		return shortest(re.Sub[0])
	}
	return ""
}

// zerosExample is a tensor of zeros that fits the field's contract: its
// dtype (float32 when it declares none) and its per-item shape, each named
// dimension at the smallest size its constraints allow (at least 1) and
// each "*" 1. A field without a shape gets a one-element vector.
func zerosExample(f *ir.Field, task *ir.Task) string {
	s := f.Spec
	dtype := s.DType
	if dtype == "" {
		dtype = tensor.Float32
	}
	shape := s.Shape
	if b := task.Spec.Batching; b != nil && b.Dim != "" && s.IsStacked() && len(shape) > 0 && string(shape[0]) == b.Dim {
		shape = shape[1:]
	}
	if shape == nil {
		shape = spec.Shape{"1"}
	}
	sizes := make([]string, len(shape))
	for i, d := range shape {
		n, fixed := d.Size()
		if !fixed {
			n = dimExample(task.Spec.Dims[string(d)])
		}
		sizes[i] = strconv.FormatInt(n, 10)
	}
	name := map[tensor.DType]string{
		tensor.Float32: "Float32", tensor.Float16: "Float16", tensor.BFloat16: "BFloat16", tensor.Int64: "Int64",
		tensor.Int32: "Int32", tensor.Uint8: "Uint8", tensor.Bool: "Bool",
	}[dtype]
	return "tensor.Zeros(tensor." + name + ", " + strings.Join(sizes, ", ") + ")"
}

// dimExample is the smallest size a named dimension's constraints allow.
func dimExample(d spec.DimSpec) int64 {
	n := int64(1)
	if d.Minimum != nil {
		n = max(n, *d.Minimum)
	}
	if m := d.MultipleOf; m != nil && *m > 0 && n%*m != 0 {
		n += *m - n%*m
	}
	return n
}
