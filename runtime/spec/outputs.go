package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// ArtifactPositions says which element of the tuple a task's method
// returns each artifact is, by artifact index: the artifacts' positions
// when they give them, else each artifact's index (the order is the
// tuple's). explicit reports whether the artifacts give positions.
func (t *InferenceTaskProfile) ArtifactPositions() (positions []int, explicit bool) {
	positions = make([]int, len(t.Outputs))
	for i := range t.Outputs {
		positions[i] = i
		if p := t.Outputs[i].Position; p != nil {
			positions[i], explicit = *p, true
		}
	}
	return positions, explicit
}

// RecordReturned reports whether the method's return value is the task's
// only artifact, a record, whole: the dict the method returns is the
// record's (keyed by its fields), not keyed by artifact id. A task with a
// record among other artifacts returns them in a tuple, or in a dict
// keyed by artifact id whose values are the dicts.
func (t *InferenceTaskProfile) RecordReturned() bool {
	return len(t.Outputs) == 1 && t.Outputs[0].Kind.Holds() == HoldsRecord
}

// OutputProblems checks the rules of a task's outputs that no schema can
// say, with paths relative to the task:
//
//   - "outputs/I/position": either every artifact gives a position or
//     none does, and no two give the same one (the schema says a position
//     is at least 0).
//   - "outputs/I/kind": a tensor_list, record or record_list artifact
//     cannot be split per item, so a batchable task has none; a stream
//     task's chunks are dicts with a video, so it neither has one nor
//     positions.
//   - "outputs/I/fields": a record or record_list artifact declares at
//     least one field, no other kind any; field names are unique, have no
//     '.' and are not all digits (ArtifactFieldSpec; fieldProblems).
//   - "outputs/I/artifact_id": no artifact id begins with the id of an
//     artifact that travels in parts (tensor_list, record, record_list)
//     and a '.'.
//
// The last two keep the names of the Open Inference Protocol mapping
// unambiguous: a tensor_list's elements are ID.0, ID.1, ..., a record's
// keys ID.KEY, a record_list's ID.I.KEY (runtime/oip, records.go).
//
// wfgen validate reports these; the contract check then holds positions
// against the tuple the method returns.
func (t *InferenceTaskProfile) OutputProblems() []Problem {
	var ps []Problem
	given := 0
	first := map[int]int{}
	for i := range t.Outputs {
		if p := t.Outputs[i].Position; p != nil {
			given++
			if j, dup := first[*p]; dup {
				ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/position", i), Message: fmt.Sprintf(
					"artifacts %q and %q both take tuple position %d; each artifact is another element of the tuple the method returns", t.Outputs[j].ArtifactID, t.Outputs[i].ArtifactID, *p)})
				continue
			}
			first[*p] = i
		}
	}
	if given > 0 && given < len(t.Outputs) {
		for i := range t.Outputs {
			if t.Outputs[i].Position == nil {
				ps = append(ps, Problem{Path: "outputs/" + strconv.Itoa(i), Message: fmt.Sprintf(
					"artifact %q has no position, but other artifacts of the task do; give every artifact its tuple position, or none (then artifact i is element i)", t.Outputs[i].ArtifactID)})
			}
		}
	}
	for i := range t.Outputs {
		ps = append(ps, t.Outputs[i].fieldProblems(fmt.Sprintf("outputs/%d", i))...)
	}
	for i := range t.Outputs {
		for j := range t.Outputs {
			a, b := &t.Outputs[i], &t.Outputs[j]
			if h := b.Kind.Holds(); i == j || h != HoldsTensorList && !h.IsRecord() || !strings.HasPrefix(a.ArtifactID, b.ArtifactID+".") {
				continue
			}
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/artifact_id", i), Message: fmt.Sprintf(
				"artifact %q: on the wire, the %s artifact %q travels as outputs named %s.*, and this id is one of those names; rename one of them", a.ArtifactID, b.Kind, b.ArtifactID, b.ArtifactID)})
			break
		}
	}
	for i := range t.Outputs {
		a := &t.Outputs[i]
		switch {
		case t.Stream && a.Position != nil:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/position", i), Key: true, Message: fmt.Sprintf(
				"artifact %q: a stream task's method returns a dict with its video (and state) each chunk, not a tuple; remove position", a.ArtifactID)})
		case a.Kind.Holds() != HoldsTensorList && !a.Kind.Holds().IsRecord():
		case t.Stream:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/kind", i), Message: fmt.Sprintf(
				"artifact %q: a stream task's chunks hold tensors, not lists or dicts of them; use kind tensor", a.ArtifactID)})
		case t.Batching != nil:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/kind", i), Message: fmt.Sprintf(
				"artifact %q: a batchable task's outputs are split along their batch dimension, and a %s has none; return a stacked tensor, or remove batching", a.ArtifactID, a.Kind)})
		}
	}
	return ps
}

// fieldProblems checks an artifact's fields (at path, relative to the
// task): a record kind has at least one, other kinds none; no two fields
// name the same key.
func (a *InferenceArtifactSpec) fieldProblems(path string) []Problem {
	record := a.Kind.Holds().IsRecord()
	switch {
	case !a.Kind.Valid():
		return nil // reported at the kind
	case !record && a.Fields != nil:
		return []Problem{{Path: path + "/fields", Key: true, Message: fmt.Sprintf(
			"artifact %q: fields are the keys of a record or record_list artifact's dicts, and this artifact's kind is %s: remove fields, or use kind record (Dict[str, Tensor]) or record_list (List[Dict[str, Tensor]])", a.ArtifactID, a.Kind)}}
	case record && len(a.Fields) == 0:
		at, key := path+"/fields", true
		if a.Fields == nil {
			at, key = path, false
		}
		return []Problem{{Path: at, Key: key, Message: fmt.Sprintf(
			"artifact %q: a %s artifact lists its dict's keys under fields, at least one: fields: [{name: boxes, dtype: float32, shape: [K, 4], required: true}, ...]", a.ArtifactID, a.Kind)}}
	}
	var ps []Problem
	first := map[string]int{}
	for j, f := range a.Fields {
		if f.Name == "" {
			continue // the schema says a name is at least 1 character
		}
		if strings.Contains(f.Name, ".") || strings.Trim(f.Name, "0123456789") == "" {
			ps = append(ps, Problem{Path: fmt.Sprintf("%s/fields/%d/name", path, j), Message: fmt.Sprintf(
				"artifact %q: key %q: on the wire a key is a part of an output's name (%s.KEY; %s.0.KEY in a record_list), where a '.' separates the parts and digits are list indices; use a key with no '.' that is not all digits", a.ArtifactID, f.Name, a.ArtifactID, a.ArtifactID)})
			continue
		}
		if k, dup := first[f.Name]; dup {
			ps = append(ps, Problem{Path: fmt.Sprintf("%s/fields/%d/name", path, j), Message: fmt.Sprintf(
				"artifact %q: fields %d and %d both name the key %q; each field is another key of the dict", a.ArtifactID, k, j, f.Name)})
			continue
		}
		first[f.Name] = j
	}
	return ps
}

// EachRecordKey visits one dict of record artifact a — a record, or one
// element of a record_list — given as the engine's value v (a
// map[string]any): for each declared field it holds, the field's index in
// a.Fields and its tensor, in field order; keys it does not declare are
// ignored. v not a dict, a key whose value is not a tensor, each's error,
// or required keys absent (named, with the keys the dict has) is an
// error. The in-process client and the wire encoder read records through
// it: one rule for what a record holds.
func (a *InferenceArtifactSpec) EachRecordKey(v any, each func(k int, t *tensor.Tensor) error) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("want a dict of tensors (Dict[str, Tensor]), got %T", v)
	}
	var missing []string
	for k := range a.Fields {
		f := &a.Fields[k]
		e, ok := m[f.Name]
		if !ok || e == nil {
			if f.Required {
				missing = append(missing, strconv.Quote(f.Name))
			}
			continue
		}
		t, err := tensor.AsTensor(e)
		if err == nil {
			err = each(k, t)
		}
		if err != nil {
			return fmt.Errorf("key %q: %w", f.Name, err)
		}
	}
	if len(missing) > 0 {
		have := "no keys"
		if len(m) > 0 {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, strconv.Quote(k))
			}
			slices.Sort(keys)
			have = "the keys " + strings.Join(keys, ", ")
		}
		return fmt.Errorf("required key(s) %s missing: the dict has %s", strings.Join(missing, ", "), have)
	}
	return nil
}
