package oip

// Lists of tensors on the wire: the one rule by which a tensor_list (an
// input field or an artifact, TorchScript List[Tensor]) travels as the
// protocol's flat named tensors, used by the server and the client alike
// (docs/serving.md, "Lists of tensors"):
//
//   - element i of list ID is the tensor named ID.i (i in decimal, no
//     leading zeros), with its own datatype and shape;
//   - a response gives each tensor_list artifact's element count in the
//     response parameter ID.count (an integer), so that an empty list is
//     told from an artifact the response does not carry; the elements are
//     exactly ID.0 to ID.(count-1);
//   - a request's outputs name the artifact, ID, to select all of its
//     elements.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// ElementName returns the name of element i of the tensor_list field or
// artifact id on the wire: "id.i".
func ElementName(id string, i int) string { return id + "." + strconv.Itoa(i) }

// ParseElementName splits the name of a list element ("id.i") into the
// list's id and the element's index. ok is false for a name of another
// form: no dot, an index that is not a decimal number without sign or
// leading zeros, or one beyond an int.
func ParseElementName(name string) (id string, i int, ok bool) {
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 {
		return "", 0, false
	}
	idx := name[dot+1:]
	if idx == "" || len(idx) > 1 && idx[0] == '0' {
		return "", 0, false
	}
	for k := 0; k < len(idx); k++ {
		if idx[k] < '0' || idx[k] > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.Atoi(idx)
	if err != nil {
		return "", 0, false
	}
	return name[:dot], n, true
}

// CountParameter returns the response parameter that gives the element
// count of the tensor_list artifact id: "id.count".
func CountParameter(id string) string { return id + ".count" }

// splitList returns the wire tensors of the elements of a tensor_list
// artifact's value, each encoded by enc under its ElementName.
func splitList(id string, v any, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, error) {
	ts, err := tensor.AsTensorList(v)
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		if out[i], err = enc(ElementName(id, i), t); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return out, nil
}

// joinList reassembles the tensor_list artifact id of a response from its
// elements (by index, as collected from the outputs) and the response's
// parameters: nil when the response carries neither the count nor any
// element (the artifact is absent), else exactly count tensors — an empty,
// non-nil slice for an empty list. A count that is not a non-negative
// integer, elements without a count, and elements that are not exactly
// id.0 to id.(count-1) are errors naming the artifact.
func joinList(id string, elems map[int]*Tensor, p Parameters) ([]*tensor.Tensor, error) {
	key := CountParameter(id)
	n, has, err := p.IntParam(key)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: response parameter %q: want the element count, an integer: %v", id, key, err)
	}
	if !has {
		if len(elems) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("artifact %q: the response has %d elements (%s) but no parameter %q giving their count", id, len(elems), someElement(id, elems), key)
	}
	if n < 0 {
		return nil, fmt.Errorf("artifact %q: response parameter %q is %d, not an element count", id, key, n)
	}
	if n != int64(len(elems)) {
		return nil, fmt.Errorf("artifact %q: response parameter %q says %d elements, and the response has %d", id, key, n, len(elems))
	}
	out := make([]*tensor.Tensor, n)
	for i := range out {
		o, ok := elems[i]
		if !ok {
			return nil, fmt.Errorf("artifact %q: element %s is missing (a list of %d is %s.0 to %s.%d), and %s is beyond it",
				id, ElementName(id, i), n, id, id, n-1, someElement(id, elems, func(j int) bool { return int64(j) >= n }))
		}
		t, err := decodeTensor(o, 0)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		out[i] = t
	}
	return out, nil
}

// someElement names one of elems (the one of lowest index among those
// keep takes, when given), for messages.
func someElement(id string, elems map[int]*Tensor, keep ...func(int) bool) string {
	best := -1
	for j := range elems {
		if len(keep) > 0 && !keep[0](j) {
			continue
		}
		if best < 0 || j < best {
			best = j
		}
	}
	if best < 0 {
		return "none"
	}
	return ElementName(id, best)
}

// isList reports whether a is a tensor_list artifact, which travels as
// its elements.
func isList(a *spec.InferenceArtifactSpec) bool { return a.Kind.Holds() == spec.HoldsTensorList }
