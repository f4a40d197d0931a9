// Package enum holds the tables behind the string enum types of generated
// packages — Variant, Task, and the type of each field with choices — so
// that each generated type is a few one-line methods over data from the
// family's spec: parsing ids and aliases, validity, and text
// marshalling that rejects unknown values.
package enum

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Set is the table of one enum type T: its values in manifest order, the
// names that select each value (ids and aliases), and how errors name it.
// It is immutable and safe for concurrent use.
type Set[T ~string] struct {
	values []T
	byName map[string]T // id or alias -> value; "" -> the default when there is one
	valid  map[T]bool
	// unknown formats the error for a value that is not in the set.
	unknown func(s string) error
}

// Variants returns the table of a family's variants: ids and aliases parse
// to their variant, "" to the default variant, and an unknown id is an
// error wrapping spec.ErrUnknownID that names the known ids.
func Variants[T ~string](spec *spec.ModelInferenceSpec) *Set[T] {
	ids := make([]string, len(spec.Variants))
	aliases := make([][]string, len(spec.Variants))
	for i, v := range spec.Variants {
		ids[i], aliases[i] = v.VariantID, v.Aliases
	}
	return ids2set[T](spec.ModelFamilyID, "variant", ids, aliases, spec.DefaultVariant())
}

// Tasks returns the table of a family's tasks, as Variants does for
// variants.
func Tasks[T ~string](spec *spec.ModelInferenceSpec) *Set[T] {
	ids := make([]string, len(spec.Tasks))
	aliases := make([][]string, len(spec.Tasks))
	for i, t := range spec.Tasks {
		ids[i], aliases[i] = t.TaskID, t.Aliases
	}
	return ids2set[T](spec.ModelFamilyID, "task", ids, aliases, spec.DefaultTask())
}

func ids2set[T ~string](family, what string, ids []string, aliases [][]string, def string) *Set[T] {
	s := &Set[T]{byName: map[string]T{}, valid: map[T]bool{}}
	for i, id := range ids {
		v := T(id)
		s.values = append(s.values, v)
		s.valid[v] = true
		s.byName[id] = v
		for _, a := range aliases[i] {
			if _, taken := s.byName[a]; !taken {
				s.byName[a] = v
			}
		}
	}
	if d, ok := s.byName[def]; ok {
		s.byName[""] = d
	}
	known := strings.Join(ids, ", ")
	s.unknown = func(x string) error {
		return fmt.Errorf("%w: family %q has no %s %q (known: %s)", spec.ErrUnknownID, family, what, x, known)
	}
	return s
}

// Choices returns the table of a field's choices: exactly the choice
// values parse, and an error names the field and the allowed values (a
// long list is cut short).
func Choices[T ~string](field *spec.InferenceFieldSpec) *Set[T] {
	s := &Set[T]{byName: make(map[string]T, len(field.Choices)), valid: make(map[T]bool, len(field.Choices))}
	for _, c := range field.Choices {
		v := T(c)
		s.values = append(s.values, v)
		s.valid[v] = true
		s.byName[c] = v
	}
	allowed := quoteList(field.Choices)
	id := field.FieldID
	s.unknown = func(x string) error { return fmt.Errorf("%s: %q is not one of %s", id, x, allowed) }
	return s
}

// maxListed bounds the values an error message lists.
const maxListed = 12

func quoteList(vs []string) string {
	q := make([]string, 0, min(len(vs), maxListed))
	for _, v := range vs[:min(len(vs), maxListed)] {
		q = append(q, strconv.Quote(v))
	}
	s := strings.Join(q, ", ")
	if len(vs) > maxListed {
		s += fmt.Sprintf(", … (%d in all)", len(vs))
	}
	return s
}

// Values returns every value in manifest order, in a new slice.
func (s *Set[T]) Values() []T { return append([]T(nil), s.values...) }

// Parse returns the value selected by name (an id, an alias, or "" for
// the default where there is one).
func (s *Set[T]) Parse(name string) (T, error) {
	if v, ok := s.byName[name]; ok {
		return v, nil
	}
	return "", s.unknown(name)
}

// Valid reports whether v is one of the values (an alias is not).
func (s *Set[T]) Valid(v T) bool { return s.valid[v] }

// MarshalText returns v's text; a value that is not one of the values is
// an error.
func (s *Set[T]) MarshalText(v T) ([]byte, error) {
	if !s.valid[v] {
		return nil, s.unknown(string(v))
	}
	return []byte(v), nil
}

// UnmarshalText sets *dst from b: for variants and tasks an id or alias (as
// Parse), for choices exactly one of the values.
func (s *Set[T]) UnmarshalText(dst *T, b []byte) error {
	v, err := s.Parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
