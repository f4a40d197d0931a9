package ir

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// CleanText makes free text from a manifest safe to place in a Go line
// comment, a Markdown page or a one-line context: line endings become
// '\n'; invalid UTF-8 becomes U+FFFD; control characters (other than '\n'
// and '\t') and invisible ones — format characters such as the bidi
// controls that reorder how a line displays (U+202E, the "Trojan Source"
// class), zero-width spaces and byte order marks, and the line and
// paragraph separators — are written as Go escapes ("\u202e"), so a
// reviewer sees them; trailing spaces are dropped from every line.
// Because generated comments are always "//" line comments, no text can
// end a comment early ("*/"), and because every line gets its own "// "
// prefix, no text can form a directive (//go:...) or a second header.
func CleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if strings.IndexFunc(s, invisible) >= 0 {
		var b strings.Builder
		for _, r := range s {
			if invisible(r) {
				fmt.Fprintf(&b, `\u%04x`, r)
				continue
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

// invisible reports whether r is a character CleanText escapes: a control
// other than '\n' and '\t', a format character (Cf: bidi controls,
// zero-width characters, byte order marks), or a line or paragraph
// separator.
func invisible(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// OneLine is CleanText with newlines and tabs folded into single spaces.
func OneLine(s string) string {
	return strings.Join(strings.Fields(CleanText(s)), " ")
}

// Constraints describes the field's constraints in words, one entry per
// constraint, in a fixed order; generated doc comments and the Markdown
// reference use it.
func (f *Field) Constraints() []string {
	s := f.Spec
	var out []string
	if len(s.Choices) > 0 {
		out = append(out, "one of "+strings.Join(quoteAll(s.Choices), ", "))
	}
	if s.Minimum != nil {
		out = append(out, "minimum "+s.Minimum.String())
	}
	if s.Maximum != nil {
		out = append(out, "maximum "+s.Maximum.String())
	}
	if s.MultipleOf != nil {
		out = append(out, multipleText(*s.MultipleOf, s.Remainder))
	}
	if s.MinLength != nil {
		out = append(out, fmt.Sprintf("min length %d", *s.MinLength))
	}
	if s.MaxLength != nil {
		out = append(out, fmt.Sprintf("max length %d", *s.MaxLength))
	}
	if s.Pattern != "" {
		out = append(out, "pattern "+s.Pattern)
	}
	if s.Kind.HasParts() && len(s.Fields) > 0 {
		noun := "keys "
		if s.Kind.Form() == spec.FormTuple {
			noun = "elements "
		}
		parts := make([]string, len(s.Fields))
		for k, p := range s.Fields {
			var facts []string
			if c := (spec.TensorContract{DType: p.DType, Shape: p.Shape}); c.DType != "" || c.Shape != nil {
				facts = append(facts, c.String())
			}
			if s.PartRequired(k) {
				facts = append(facts, "required")
			}
			parts[k] = p.Name
			if len(facts) > 0 {
				parts[k] += " (" + strings.Join(facts, ", ") + ")"
			}
		}
		out = append(out, noun+strings.Join(parts, ", "))
	}
	return out
}

// multipleText says "multiple of 16" or "4k+1 (a multiple of 4 plus 1)".
func multipleText(m, rem int64) string {
	if rem == 0 {
		return fmt.Sprintf("multiple of %d", m)
	}
	return fmt.Sprintf("%dk+%d (a multiple of %d plus %d)", m, rem, m, rem)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// DefaultText renders the field's default as JSON, floats with a fraction
// ("3.0", not "3"); "" when it has none.
func (f *Field) DefaultText() string {
	d := f.Spec.Default
	if d == nil {
		return ""
	}
	switch x := d.(type) {
	case float64:
		return floatText(x)
	case []float64:
		parts := make([]string, len(x))
		for i, v := range x {
			parts[i] = floatText(v)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Sprint(d)
	}
	return string(b)
}

// floatText formats a float so that it reads as one: 3 → "3.0".
func floatText(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEIN") {
		s += ".0"
	}
	return s
}
