package validate

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/worldfoundry/wfgen/runtime"
)

// elemKind returns the item kind of a list kind, or "".
func elemKind(kind string) string {
	switch kind {
	case runtime.KindStringList:
		return runtime.KindString
	case runtime.KindIntList:
		return runtime.KindInt
	case runtime.KindFloatList:
		return runtime.KindFloat
	case runtime.KindBoolList:
		return runtime.KindBool
	case runtime.KindTensorList:
		return runtime.KindTensor
	}
	return ""
}

// tensorLike kinds carry data that only exists at call time.
func tensorLike(kind string) bool {
	switch kind {
	case runtime.KindTensor, runtime.KindImage, runtime.KindVideo, runtime.KindTensorList:
		return true
	}
	return false
}

// kindPhrase names a kind for messages: "an int", "a list of strings".
func kindPhrase(kind string) string {
	switch kind {
	case runtime.KindInt:
		return "an int"
	case runtime.KindImage:
		return "an image"
	case runtime.KindStringList:
		return "a list of strings"
	case runtime.KindIntList:
		return "a list of ints"
	case runtime.KindFloatList:
		return "a list of floats"
	case runtime.KindBoolList:
		return "a list of bools"
	case runtime.KindTensorList:
		return "a list of tensors"
	}
	return "a " + kind
}

// valuePhrase describes a value for messages: `the string "x"`, `the number 1.5`.
func valuePhrase(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
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

// constraint keys and the kinds they apply to.
var constraintKinds = []struct {
	key   string
	set   func(f *runtime.InferenceFieldSpec) bool
	kinds []string
}{
	{"minimum", func(f *runtime.InferenceFieldSpec) bool { return f.Minimum != nil }, []string{runtime.KindInt, runtime.KindFloat, runtime.KindIntList, runtime.KindFloatList}},
	{"maximum", func(f *runtime.InferenceFieldSpec) bool { return f.Maximum != nil }, []string{runtime.KindInt, runtime.KindFloat, runtime.KindIntList, runtime.KindFloatList}},
	{"multiple_of", func(f *runtime.InferenceFieldSpec) bool { return f.MultipleOf != nil }, []string{runtime.KindInt, runtime.KindIntList}},
	{"remainder", func(f *runtime.InferenceFieldSpec) bool { return f.Remainder != 0 }, []string{runtime.KindInt, runtime.KindIntList}},
	{"min_length", func(f *runtime.InferenceFieldSpec) bool { return f.MinLength != nil }, []string{runtime.KindString, runtime.KindStringList, runtime.KindIntList, runtime.KindFloatList, runtime.KindBoolList, runtime.KindTensorList}},
	{"max_length", func(f *runtime.InferenceFieldSpec) bool { return f.MaxLength != nil }, []string{runtime.KindString, runtime.KindStringList, runtime.KindIntList, runtime.KindFloatList, runtime.KindBoolList, runtime.KindTensorList}},
	{"pattern", func(f *runtime.InferenceFieldSpec) bool { return f.Pattern != "" }, []string{runtime.KindString, runtime.KindStringList}},
	{"choices", func(f *runtime.InferenceFieldSpec) bool { return len(f.Choices) > 0 }, []string{runtime.KindString, runtime.KindStringList}},
}

// fieldName names a field in messages (`task "t" field "f"`); it is only
// formatted when a problem is reported.
type fieldName struct{ task, id string }

// String returns the field's description.
func (n fieldName) String() string { return fmt.Sprintf("%s field %q", n.task, n.id) }

// checkField checks one input field's constraints, choices and default.
// name describes the task ("task \"generate\"").
func (c *checker) checkField(task string, f *runtime.InferenceFieldSpec, fp string) {
	if c.isPruned(fp) {
		return
	}
	name := fieldName{task, f.FieldID}
	kindOK := !c.isPruned(fp + "/kind")
	if kindOK {
		for _, ck := range constraintKinds {
			if ck.set(f) && !slices.Contains(ck.kinds, f.Kind) && !c.isPruned(fp+"/"+ck.key) {
				c.report(fp+"/"+ck.key, true, "%s: %s applies to kinds %s, not %s", name, ck.key, strings.Join(ck.kinds, ", "), f.Kind)
			}
		}
	}
	if f.Minimum != nil && f.Maximum != nil && *f.Minimum > *f.Maximum {
		c.report(fp+"/maximum", false, "%s: maximum %v is below minimum %v", name, *f.Maximum, *f.Minimum)
	}
	if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
		c.report(fp+"/max_length", false, "%s: max_length %d is below min_length %d", name, *f.MaxLength, *f.MinLength)
	}
	if f.Remainder != 0 {
		switch {
		case f.MultipleOf == nil:
			c.report(fp+"/remainder", true, "%s: remainder only has a meaning with multiple_of", name)
		case f.Remainder >= *f.MultipleOf:
			c.report(fp+"/remainder", false, "%s: remainder %d must be below multiple_of %d", name, f.Remainder, *f.MultipleOf)
		}
	}
	var re *regexp.Regexp
	if f.Pattern != "" && !c.isPruned(fp+"/pattern") {
		var err error
		if re, err = regexp.Compile(f.Pattern); err != nil {
			c.report(fp+"/pattern", false, "%s: pattern is not a valid RE2 regular expression: %v", name, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	seen := map[string]int{}
	for j, ch := range f.Choices {
		p := fmt.Sprintf("%s/choices/%d", fp, j)
		if c.isPruned(p) {
			continue
		}
		if ch == "" {
			c.report(p, false, "%s: choice %d is empty; choices must be non-empty strings", name, j)
			continue
		}
		if first, dup := seen[ch]; dup {
			c.report(p, false, "%s: duplicate choice %q (first at line %d)", name, ch, c.line(fmt.Sprintf("%s/choices/%d", fp, first)))
			continue
		}
		seen[ch] = j
		if re != nil && !re.MatchString(ch) {
			c.report(p, false, "%s: choice %q does not match the field's pattern %q", name, ch, f.Pattern)
		}
		if f.Kind == runtime.KindString {
			if n := utf8.RuneCountInString(ch); f.MinLength != nil && n < *f.MinLength || f.MaxLength != nil && n > *f.MaxLength {
				c.report(p, false, "%s: choice %q breaks the field's length limits", name, ch)
			}
		}
	}
	if !kindOK || c.isPruned(fp+"/default") {
		return
	}
	if nv, ok := c.fieldValue(task, f, f.Default, fp+"/default", "default"); ok {
		f.Default = nv
	}
}

// fieldValue checks that v (a Native value) fits field f — its kind and
// every constraint — and reports each problem at p. It returns v
// normalized to the kind's Go type (string, int64, float64, bool, []string,
// []int64, []float64, []bool) and whether it fits. nil always fits.
func (c *checker) fieldValue(task string, f *runtime.InferenceFieldSpec, v any, p, what string) (any, bool) {
	if v == nil {
		return nil, true
	}
	name := fieldName{task, f.FieldID}
	if tensorLike(f.Kind) {
		c.report(p, false, "%s: a field of kind %s cannot have a %s; its value is only known at call time", name, f.Kind, what)
		return nil, false
	}
	ek := elemKind(f.Kind)
	if ek == "" {
		return c.scalarValue(name, f, f.Kind, v, p, what, true)
	}
	list, ok := v.([]any)
	if !ok {
		c.report(p, false, "%s: %s is %s, but the field's kind is %s", name, what, valuePhrase(v), kindPhrase(f.Kind))
		return nil, false
	}
	if f.MinLength != nil && len(list) < *f.MinLength {
		c.report(p, false, "%s: %s has %d items, fewer than min_length %d", name, what, len(list), *f.MinLength)
	}
	if f.MaxLength != nil && len(list) > *f.MaxLength {
		c.report(p, false, "%s: %s has %d items, more than max_length %d", name, what, len(list), *f.MaxLength)
	}
	good := true
	items := make([]any, len(list))
	for i, e := range list {
		nv, ok := c.scalarValue(name, f, ek, e, fmt.Sprintf("%s/%d", p, i), fmt.Sprintf("%s[%d]", what, i), false)
		good = good && ok
		items[i] = nv
	}
	if !good {
		return nil, false
	}
	switch ek {
	case runtime.KindString:
		return typed[string](items), true
	case runtime.KindInt:
		return typed[int64](items), true
	case runtime.KindFloat:
		return typed[float64](items), true
	default:
		return typed[bool](items), true
	}
}

func typed[T any](items []any) []T {
	out := make([]T, len(items))
	for i, x := range items {
		out[i] = x.(T)
	}
	return out
}

// scalarValue checks one scalar against kind and f's constraints; whole
// says whether v is the field's value (length limits apply) or a list item.
func (c *checker) scalarValue(name fieldName, f *runtime.InferenceFieldSpec, kind string, v any, p, what string, whole bool) (any, bool) {
	mismatch := func() (any, bool) {
		c.report(p, false, "%s: %s is %s, but the field's kind is %s", name, what, valuePhrase(v), kindPhrase(f.Kind))
		return nil, false
	}
	switch kind {
	case runtime.KindString:
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		good := true
		if len(f.Choices) > 0 && !slices.Contains(f.Choices, s) {
			c.report(p, false, "%s: %s is %q, not one of the choices %s", name, what, s, quoteList(f.Choices))
			good = false
		}
		if whole {
			n := utf8.RuneCountInString(s)
			if f.MinLength != nil && n < *f.MinLength {
				c.report(p, false, "%s: %s is %q, shorter than min_length %d", name, what, s, *f.MinLength)
				good = false
			}
			if f.MaxLength != nil && n > *f.MaxLength {
				c.report(p, false, "%s: %s is %q, longer than max_length %d", name, what, s, *f.MaxLength)
				good = false
			}
		}
		if f.Pattern != "" {
			if re, err := regexp.Compile(f.Pattern); err == nil && !re.MatchString(s) {
				c.report(p, false, "%s: %s is %q, which does not match pattern %q", name, what, s, f.Pattern)
				good = false
			}
		}
		return s, good
	case runtime.KindBool:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		return b, true
	case runtime.KindInt:
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
		good := c.checkRange(name, f, float64(n), p, what, fmt.Sprint(n))
		if f.MultipleOf != nil && *f.MultipleOf > 0 {
			m := *f.MultipleOf
			if r := ((n-f.Remainder)%m + m) % m; r != 0 {
				rule := fmt.Sprintf("a multiple of %d", m)
				if f.Remainder != 0 {
					rule = fmt.Sprintf("of the form %d·k+%d", m, f.Remainder)
				}
				var near []string
				for _, x := range []int64{n - r, n - r + m} {
					if (f.Minimum == nil || float64(x) >= *f.Minimum) && (f.Maximum == nil || float64(x) <= *f.Maximum) {
						near = append(near, fmt.Sprint(x))
					}
				}
				hint := ""
				if len(near) > 0 {
					hint = " (nearest valid: " + strings.Join(near, " or ") + ")"
				}
				c.report(p, false, "%s: %s is %d, not %s%s", name, what, n, rule, hint)
				good = false
			}
		}
		return n, good
	case runtime.KindFloat:
		var x float64
		switch y := v.(type) {
		case int64:
			x = float64(y)
		case float64:
			x = y
		default:
			return mismatch()
		}
		return x, c.checkRange(name, f, x, p, what, fmt.Sprint(x))
	}
	return mismatch()
}

func (c *checker) checkRange(name fieldName, f *runtime.InferenceFieldSpec, x float64, p, what, shown string) bool {
	good := true
	if f.Minimum != nil && x < *f.Minimum {
		c.report(p, false, "%s: %s is %s, below the minimum %v", name, what, shown, *f.Minimum)
		good = false
	}
	if f.Maximum != nil && x > *f.Maximum {
		c.report(p, false, "%s: %s is %s, above the maximum %v", name, what, shown, *f.Maximum)
		good = false
	}
	return good
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// checkRealtime checks the family's realtime spec.
func (c *checker) checkRealtime(s *runtime.ModelInferenceSpec) {
	if s.Realtime == nil || c.isPruned("/realtime") {
		return
	}
	if !s.SupportsStream && !c.isPruned("/supports_stream") {
		c.report("/realtime", true, "realtime is set, but the family does not set supports_stream: true")
	}
	seen := map[string]int{}
	for i, ctl := range s.Realtime.Controls {
		p := fmt.Sprintf("/realtime/controls/%d", i)
		if c.isPruned(p) {
			continue
		}
		if ctl == "" {
			c.report(p, false, "realtime control %d is empty", i)
			continue
		}
		if first, dup := seen[ctl]; dup {
			c.report(p, false, "duplicate realtime control %q (first at line %d)", ctl, c.line(fmt.Sprintf("/realtime/controls/%d", first)))
			continue
		}
		seen[ctl] = i
	}
}
