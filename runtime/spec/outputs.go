package spec

import (
	"fmt"
	"strconv"
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

// OutputProblems checks the rules of a task's outputs that no schema can
// say, with paths relative to the task:
//
//   - "outputs/I/position": either every artifact gives a position or
//     none does, and no two give the same one (the schema says a position
//     is at least 0).
//   - "outputs/I/kind": a tensor_list artifact cannot be split per item,
//     so a batchable task has none; a stream task's chunks are dicts with
//     a video, so it neither has one nor positions.
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
		a := &t.Outputs[i]
		switch {
		case t.Stream && a.Position != nil:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/position", i), Key: true, Message: fmt.Sprintf(
				"artifact %q: a stream task's method returns a dict with its video (and state) each chunk, not a tuple; remove position", a.ArtifactID)})
		case a.Kind.Holds() != HoldsTensorList:
		case t.Stream:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/kind", i), Message: fmt.Sprintf(
				"artifact %q: a stream task's chunks hold tensors, not lists of them; use kind tensor", a.ArtifactID)})
		case t.Batching != nil:
			ps = append(ps, Problem{Path: fmt.Sprintf("outputs/%d/kind", i), Message: fmt.Sprintf(
				"artifact %q: a batchable task's outputs are split along their batch dimension, and a tensor_list has none; return a stacked tensor, or remove batching", a.ArtifactID)})
		}
	}
	return ps
}
