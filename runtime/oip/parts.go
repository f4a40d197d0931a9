package oip

// Structured inputs on the wire: the rule by which a field of a kind with
// parts (spec.Kind.HasParts: tensor_dict, TorchScript Dict[str, Tensor];
// tensor_tuple, Tuple[Tensor, ...]) travels as the protocol's flat named
// tensors, used by the server and the client alike (docs/serving.md,
// "Dicts and tuples of tensors"):
//
//   - part k of field ID is the input named ID.PART, PART being
//     spec.InferenceFieldSpec.PartName(k): the key for a dict (features.a),
//     the decimal position for a tuple (pair.0, pair.1);
//   - a dict's key left out has no input (an error when the key is
//     required); every element of a tuple is sent;
//   - the field itself (ID alone) is no input: a request naming it, a part
//     the field does not declare, or a part given twice is refused.
//
// Part names contain no '.' and are not all digits
// (spec.InferenceFieldSpec.PartProblems), and field ids are identifiers:
// every name belongs to one field and one part.

import (
	"fmt"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// PartInputName returns the name on the wire of part k of field f: "ID.PART".
func PartInputName(f *spec.InferenceFieldSpec, k int) string { return f.FieldID + "." + f.PartName(k) }

// partField finds the field with parts an input names: its index and the
// part's. known is true when the name begins with the id of such a field
// and a '.', whether or not the rest names a part of it (ok).
func partField(task *spec.InferenceTaskProfile, name string) (field, part int, known, ok bool) {
	for i := range task.Inputs {
		f := &task.Inputs[i]
		if !f.Kind.HasParts() {
			continue
		}
		rest, found := strings.CutPrefix(name, f.FieldID+".")
		if !found {
			continue
		}
		k, ok := f.PartOf(rest)
		return i, k, true, ok
	}
	return 0, 0, false, false
}

// partsWant says, for messages, how a field with parts travels.
func partsWant(f *spec.InferenceFieldSpec) string {
	names := make([]string, len(f.Fields))
	for k := range f.Fields {
		names[k] = PartInputName(f, k)
	}
	return fmt.Sprintf("field %q is %s (%s), which travels as its parts %s, never as one input", f.FieldID, f.Kind.Phrase(), f.TorchScriptType(), strings.Join(names, ", "))
}

// decodeParts decodes the inputs collected for field f with parts (by
// part index) into the engine's value (spec.InferenceFieldSpec.PartsValue).
func decodeParts(f *spec.InferenceFieldSpec, ins map[int]*Tensor, lim Limits) (any, error) {
	parts := make([]*tensor.Tensor, len(f.Fields))
	for k := range parts { // in part order: the first problem is reported
		in, ok := ins[k]
		if !ok {
			continue
		}
		t, err := decodeTensor(in, lim.MaxTensorBytes)
		if err != nil {
			return nil, bad("input %q: %v", in.Name, err)
		}
		parts[k] = t
	}
	return f.PartsValue(parts), nil
}

// encodeParts encodes the engine's value of field f with parts, each part
// by enc under its PartInputName, in part order.
func encodeParts(f *spec.InferenceFieldSpec, v any, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, error) {
	var out []Tensor
	err := f.EachPart(v, func(k int, t *tensor.Tensor) error {
		w, err := enc(PartInputName(f, k), t)
		out = append(out, w)
		return err
	})
	return out, err
}
