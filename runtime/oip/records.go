package oip

// Records on the wire: the extension of the list rule (lists.go) by which
// a record artifact (TorchScript Dict[str, Tensor], the keys its fields
// declare) and a record_list artifact (List[Dict[str, Tensor]]) travel as
// the protocol's flat named tensors, used by the server and the client
// alike (docs/serving.md, "Lists of tensors and records"):
//
//   - key KEY of record ID is the tensor named ID.KEY; key KEY of element
//     i of record_list ID is the tensor named ID.i.KEY (i as for lists); a
//     key the dict does not hold has no tensor, and keys the fields do not
//     declare are not sent;
//   - the response parameter ID.count is, for a record, the number of
//     keys it carries (so that a record without keys is told from an
//     absent one) and, for a record_list, the number of dicts;
//   - a request's outputs name the artifact, ID, to select all of its
//     tensors.
//
// Field names contain no '.' and are not all digits
// (spec.InferenceTaskProfile.OutputProblems), and no artifact id starts
// with the id of an artifact that travels in parts and a '.': every name
// belongs to one artifact, one element and one key.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// KeyName returns the name on the wire of key key of the record artifact
// id: "id.key".
func KeyName(id, key string) string { return id + "." + key }

// ItemKeyName returns the name on the wire of key key of element i of the
// record_list artifact id: "id.i.key".
func ItemKeyName(id string, i int, key string) string { return ElementName(id, i) + "." + key }

// inParts reports whether a travels as several named tensors with a count
// parameter (tensor_list, record, record_list) rather than as one.
func inParts(a *spec.InferenceArtifactSpec) bool {
	h := a.Kind.Holds()
	return h == spec.HoldsTensorList || h.IsRecord()
}

// isRecord reports whether a is a record or a record_list.
func isRecord(a *spec.InferenceArtifactSpec) bool { return a.Kind.Holds().IsRecord() }

// isRecordList reports whether a is a record_list.
func isRecordList(a *spec.InferenceArtifactSpec) bool {
	return a.Kind.Holds() == spec.HoldsRecordList
}

// splitRecord returns the wire tensors of a record or record_list
// artifact's value (the engine's form: a map[string]any of tensors, or a
// []any of them), each encoded by enc under its KeyName or ItemKeyName,
// in the order of the fields (and elements), and the value's count: the
// keys carried (record) or the dicts (record_list). A required key the
// value lacks is an error naming the key, as the in-process client's.
func splitRecord(a *spec.InferenceArtifactSpec, v any, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, int, error) {
	if !isRecordList(a) {
		out, err := splitDict(a, v, -1, nil, enc)
		return out, len(out), err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, 0, fmt.Errorf("want a list of dicts of tensors (List[Dict[str, Tensor]]), got %T", v)
	}
	var out []Tensor
	for i, e := range list {
		var err error
		if out, err = splitDict(a, e, i, out, enc); err != nil {
			return nil, 0, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return out, len(list), nil
}

// splitDict appends the tensors of one dict of record artifact a to out:
// element i of a record_list, or the record itself (i < 0).
func splitDict(a *spec.InferenceArtifactSpec, v any, i int, out []Tensor, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, error) {
	err := a.EachRecordKey(v, func(k int, t *tensor.Tensor) error {
		name := KeyName(a.ArtifactID, a.Fields[k].Name)
		if i >= 0 {
			name = ItemKeyName(a.ArtifactID, i, a.Fields[k].Name)
		}
		w, err := enc(name, t)
		if err != nil {
			return err
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// partOf finds the artifact of task that travels in parts whose tensor
// name is: the one whose id and a '.' begin name (the longest, should
// ids nest), and the rest of the name. ok is false when there is none.
func partOf(task *spec.InferenceTaskProfile, name string) (a *spec.InferenceArtifactSpec, rest string, ok bool) {
	for i := range task.Outputs {
		o := &task.Outputs[i]
		id := o.ArtifactID
		if inParts(o) && len(name) > len(id) && name[len(id)] == '.' && strings.HasPrefix(name, id) &&
			(a == nil || len(id) > len(a.ArtifactID)) {
			a, rest = o, name[len(id)+1:]
		}
	}
	return a, rest, a != nil
}

// recordParts collects the tensors of one record or record_list artifact
// of a response, by element (-1 for a record) and key.
type recordParts map[int]map[string]*Tensor

// add files output o, named ID.rest, under its element and key, or
// returns an error saying why the name is no tensor of record artifact a:
// a key the fields do not declare, an index that is not one, a name given
// twice.
func (rp recordParts) add(a *spec.InferenceArtifactSpec, rest string, o *Tensor) error {
	i, key := -1, rest
	if isRecordList(a) {
		idx, k, found := strings.Cut(rest, ".")
		n, isIndex := parseIndex(idx)
		if !found || !isIndex {
			return fmt.Errorf("output %q: artifact %q is a record_list, whose tensors are named %s (an index, then a key of %s)", o.Name, a.ArtifactID, ItemKeyName(a.ArtifactID, 0, "KEY"), fieldList(a))
		}
		i, key = n, k
	}
	if !slices.ContainsFunc(a.Fields, func(f spec.ArtifactFieldSpec) bool { return f.Name == key }) {
		return fmt.Errorf("output %q: %q is no key of artifact %q (%s; keys: %s)", o.Name, key, a.ArtifactID, a.Kind, fieldList(a))
	}
	if rp[i] == nil {
		rp[i] = map[string]*Tensor{}
	}
	if _, dup := rp[i][key]; dup {
		return fmt.Errorf("output %q: given twice", o.Name)
	}
	rp[i][key] = o
	return nil
}

// parseIndex parses a list index as the wire writes it: decimal, no sign,
// no leading zeros, within an int.
func parseIndex(s string) (int, bool) {
	_, i, ok := ParseElementName("x." + s)
	return i, ok
}

// fieldList names the keys of record artifact a, for messages.
func fieldList(a *spec.InferenceArtifactSpec) string {
	names := make([]string, len(a.Fields))
	for k, f := range a.Fields {
		names[k] = f.Name
	}
	return strings.Join(names, ", ")
}

// joinRecord reassembles record or record_list artifact a of a response
// from its tensors rp and the response's parameters p, in the engine's
// value form the in-process client decodes: a map[string]any of
// *tensor.Tensor for a record, a []any of them for a record_list; nil
// when the response carries neither the count nor a tensor (the artifact
// is absent). A count that is not a non-negative integer, tensors without
// a count, a record whose count is not its number of keys, elements at or
// beyond a record_list's count, and a required key an element lacks are
// errors naming the artifact.
func joinRecord(a *spec.InferenceArtifactSpec, rp recordParts, p Parameters) (any, error) {
	id := a.ArtifactID
	key := CountParameter(id)
	what := "the number of keys"
	if isRecordList(a) {
		what = "the element count"
	}
	n, has, err := p.IntParam(key)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: response parameter %q: want %s, an integer: %v", id, key, what, err)
	}
	if !has {
		if len(rp) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("artifact %q: the response has tensors of it (%s) but no parameter %q giving %s", id, somePart(a, rp), key, what)
	}
	if n < 0 {
		return nil, fmt.Errorf("artifact %q: response parameter %q is %d, not a count", id, key, n)
	}
	if !isRecordList(a) {
		if n != int64(len(rp[-1])) {
			return nil, fmt.Errorf("artifact %q: response parameter %q says %d keys, and the response has %d (%s)", id, key, n, len(rp[-1]), keyNames(rp[-1]))
		}
		return joinDict(a, rp[-1], -1)
	}
	for i := range rp {
		if int64(i) >= n {
			return nil, fmt.Errorf("artifact %q: response parameter %q says %d elements, and the response has %s, beyond them", id, key, n, somePart(a, rp, func(j int) bool { return int64(j) >= n }))
		}
	}
	if bare := n - int64(len(rp)); bare > 0 {
		// Elements without a tensor: dicts without keys, which only a
		// record_list without required keys holds (and a few of them).
		i := 0
		for ; rp[i] != nil; i++ {
		}
		if _, err := joinDict(a, nil, i); err != nil {
			return nil, err // it lacks a required key
		}
		if bare > maxBareElements {
			return nil, fmt.Errorf("artifact %q: response parameter %q says %d elements, and the response has tensors of %d: more than %d dicts without keys", id, key, n, len(rp), maxBareElements)
		}
	}
	list := make([]any, n)
	for i := range list {
		d, err := joinDict(a, rp[i], i)
		if err != nil {
			return nil, err
		}
		list[i] = d
	}
	return list, nil
}

// maxBareElements bounds the dicts without keys a decoded record_list may
// hold: they have no tensor on the wire, so the count alone would make
// the client allocate them.
const maxBareElements = 1 << 16

// joinDict decodes the tensors of one dict of record artifact a (element
// i of a record_list, or the record, i < 0).
func joinDict(a *spec.InferenceArtifactSpec, keys map[string]*Tensor, i int) (map[string]any, error) {
	m := make(map[string]any, len(keys))
	for k := range a.Fields {
		f := &a.Fields[k]
		o, ok := keys[f.Name]
		if !ok {
			if f.Required {
				name := KeyName(a.ArtifactID, f.Name)
				where := ""
				if i >= 0 {
					name, where = ItemKeyName(a.ArtifactID, i, f.Name), fmt.Sprintf("element %d: ", i)
				}
				return nil, fmt.Errorf("artifact %q: %srequired key %q missing: the response has no output %s", a.ArtifactID, where, f.Name, name)
			}
			continue
		}
		t, err := decodeTensor(o, 0)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", o.Name, err)
		}
		m[f.Name] = t
	}
	return m, nil
}

// somePart names one tensor of rp (of lowest element and key among the
// elements keep takes, when given), for messages.
func somePart(a *spec.InferenceArtifactSpec, rp recordParts, keep ...func(int) bool) string {
	best := -2
	for i := range rp {
		if len(keep) > 0 && !keep[0](i) {
			continue
		}
		if best == -2 || i < best {
			best = i
		}
	}
	if best == -2 {
		return "none"
	}
	return rp[best][slices.Min(keyList(rp[best]))].Name
}

// keyList lists the keys of keys.
func keyList(keys map[string]*Tensor) []string {
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	return out
}

// keyNames names the outputs of keys, sorted, for messages.
func keyNames(keys map[string]*Tensor) string {
	if len(keys) == 0 {
		return "none"
	}
	names := make([]string, 0, len(keys))
	for _, o := range keys {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
