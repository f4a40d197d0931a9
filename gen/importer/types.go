package importer

import (
	"fmt"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// FieldKind maps a TorchScript argument type (either printed form, see
// contract.ParseType) to the field kind that passes it: str → string,
// int → int, float (and Scalar) → float, bool → bool, Tensor → tensor,
// List[int] → int_list, List[float] → float_list, List[str] →
// string_list, List[bool] → bool_list, List[Tensor] → tensor_list,
// Dict[str, Tensor] → tensor_dict, Tuple[Tensor, ...] → tensor_tuple.
// Optional[X] maps to X's kind with optional true. ok is false for a type
// no field kind passes (other dicts and tuples, Union, Any, Device,
// classes, ...).
func FieldKind(typ string) (kind spec.Kind, optional, ok bool) {
	t, err := contract.ParseType(typ)
	if err != nil {
		return "", false, false
	}
	if t.Name == "Optional" {
		t, optional = t.Elems[0], true
	}
	if t.Name == "number" { // Scalar
		t.Name = "float"
	}
	if t.Name == "List" && len(t.Elems) == 1 && t.Elems[0].Name == "number" {
		t.Elems = []contract.Type{{Name: "float"}}
	}
	for _, k := range spec.FieldKinds {
		// Images and videos pass as Tensor too; a plain Tensor is a tensor.
		if !k.IsPicture() && k.TupleType(len(t.Elems)) == t.String() {
			return k, optional, true
		}
	}
	return "", false, false
}

// returnShape is what a method's return type says about its artifacts.
type returnShape struct {
	// dict is true for Dict[str, V]: artifacts are keyed by artifact id.
	dict bool
	// kind is the artifact kind of a single value or of the dict's values
	// ("" when no artifact kind can hold it).
	kind spec.ArtifactKind
	// optional is true when the value (or dict) may be None.
	optional bool
	// text is the return type as printed.
	text string
	// tuple, for a Tuple return (Optional or not), is what each element
	// (each leaf: a nested tuple's elements are elements, see
	// contract.TupleLeaves) says about the artifact that is that element
	// (kind "" when none holds it); nil otherwise.
	tuple []returnShape
	// nested says the tuple holds nested tuples whose elements are in
	// tuple: its artifacts then give no positions, since a position is
	// an element of the outer tuple (contract.TupleLeaves).
	nested bool
	// path is, for an element of tuple, where it is in the returned
	// value (contract.TupleLeaf.Path).
	path []int
}

// returnOf reads a method's return types.
func returnOf(returns []string) returnShape {
	if len(returns) == 0 {
		return returnShape{text: "None"}
	}
	if len(returns) > 1 {
		returns = []string{"Tuple[" + strings.Join(returns, ", ") + "]"}
	}
	s := returnShape{text: returns[0]}
	t, err := contract.ParseType(returns[0])
	if err != nil {
		return s
	}
	if t.Name == "Optional" {
		t, s.optional = t.Elems[0], true
	}
	if t.Name == "Tuple" && !jsonType(t, 0) {
		// The elements are the artifacts (contract.TupleArtifacts); a
		// tuple of plain data is one json artifact.
		// A nested tuple's elements are artifacts too (contract.TupleLeaves).
		leaves := contract.TupleLeaves(t)
		s.tuple, s.nested = make([]returnShape, len(leaves)), len(leaves) != len(t.Elems)
		for i, l := range leaves {
			e := l.Type
			es := returnShape{text: e.String(), path: l.Path}
			if e.Name == "Optional" {
				e, es.optional = e.Elems[0], true
			}
			es.kind = artifactKind(e)
			s.tuple[i] = es
		}
		return s
	}
	if t.Name == "Dict" && len(t.Elems) == 2 && t.Elems[0].Name == "str" {
		s.dict = true
		t = t.Elems[1]
		if t.Name == "Optional" {
			t = t.Elems[0]
		}
	}
	s.kind = artifactKind(t)
	return s
}

// artifactKind is the artifact kind that holds a value of type t: tensor
// for Tensor (and Any), tensor_list for List[Tensor], record for
// Dict[str, Tensor], record_list for List[Dict[str, Tensor]], text for str, json
// for values made of numbers, strings, bools, lists and dicts; ""
// otherwise.
func artifactKind(t contract.Type) spec.ArtifactKind {
	switch t.Name {
	case "Tensor", "Any":
		return spec.ArtifactTensor
	case "str":
		return spec.ArtifactText
	case "NoneType":
		return ""
	case "List":
		if len(t.Elems) == 1 && t.Elems[0].Name == "Tensor" {
			return spec.ArtifactTensorList
		}
		if len(t.Elems) == 1 && tensorDict(t.Elems[0]) {
			return spec.ArtifactRecordList
		}
	case "Dict":
		if tensorDict(t) {
			return spec.ArtifactRecord
		}
	}
	if jsonType(t, 0) {
		return spec.ArtifactJSON
	}
	return ""
}

func jsonType(t contract.Type, depth int) bool {
	if depth > 32 {
		return false
	}
	switch t.Name {
	case "str", "int", "float", "bool", "number", "NoneType":
		return true
	case "Dict":
		return len(t.Elems) == 2 && t.Elems[0].Name == "str" && jsonType(t.Elems[1], depth+1)
	case "List", "Optional", "Tuple", "Union":
		for _, e := range t.Elems {
			if !jsonType(e, depth+1) {
				return false
			}
		}
		return len(t.Elems) > 0
	}
	return false
}

// tensorDict reports whether t is Dict[str, Tensor], one dict of a record.
func tensorDict(t contract.Type) bool {
	return t.Name == "Dict" && len(t.Elems) == 2 && t.Elems[0].Name == "str" && t.Elems[1].Name == "Tensor"
}

// where says, for an element of a nested tuple, where it is in the
// returned value ("; [1][0] of the value"); "" for an element of the outer
// tuple.
func (s returnShape) where() string {
	if len(s.path) < 2 {
		return ""
	}
	var b strings.Builder
	b.WriteString("; ")
	for _, i := range s.path {
		fmt.Fprintf(&b, "[%d]", i)
	}
	b.WriteString(" of the value")
	return b.String()
}
