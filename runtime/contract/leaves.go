package contract

import (
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// TupleLeaf is one element of a returned tuple that an artifact can be:
// the elements of the tuple, in order, where an element that is itself a
// tuple holding more than plain data (Tuple[Tensor, Tensor]; under
// Optional or not) is replaced by its own elements, depth first. A
// nested tuple of plain data (Tuple[int, int]) stays one element, a json
// artifact's value, as a tuple of plain data returned whole is.
//
// For Tuple[Tensor, Tuple[Tensor, Optional[Tuple[Tensor, Tensor]]]] the
// leaves are path [0], [1 0], [1 1 0] and [1 1 1], the last two Optional.
// Without nested tuples the leaves are the elements. A task's artifacts
// are the leaves in order when they give no positions; a position is an
// element of the outer tuple (tupleElements), as it was before nested
// tuples were read, so that no manifest's position moves.
type TupleLeaf struct {
	// Path indexes the element in the returned value: the outer tuple's
	// element Path[0], then that tuple's element Path[1], ...
	Path []int
	// Type is the element's type; Optional when it, or a tuple holding
	// it, may be None.
	Type Type
}

// TupleLeaves returns the leaves of tuple type t (Optional[Tuple[...]]
// or Tuple[...]); nil for another type.
func TupleLeaves(t Type) []TupleLeaf {
	optional := false
	for t.Name == "Optional" && len(t.Elems) == 1 {
		t, optional = t.Elems[0], true
	}
	if t.Name != "Tuple" {
		return nil
	}
	leaves := []TupleLeaf{}
	tupleLeaves(t, nil, optional, 0, &leaves)
	return leaves
}

func tupleLeaves(t Type, path []int, optional bool, depth int, leaves *[]TupleLeaf) {
	for i, e := range t.Elems {
		p := append(path[:len(path):len(path)], i)
		inner, opt := e, optional
		for inner.Name == "Optional" && len(inner.Elems) == 1 {
			inner, opt = inner.Elems[0], true
		}
		if inner.Name == "Tuple" && len(inner.Elems) > 0 && !jsonable(inner, 0) && depth < maxTypeDepth {
			tupleLeaves(inner, p, opt, depth+1, leaves)
			continue
		}
		if opt && e.Name != "Optional" {
			e = Type{Name: "Optional", Elems: []Type{e}}
		}
		*leaves = append(*leaves, TupleLeaf{Path: p, Type: e})
	}
}

// TuplePaths returns, for a task whose artifacts are the elements of the
// tuple its method returns (TupleArtifacts), the path of each artifact's
// leaf (TupleLeaves) in the returned value, in the order of the task's
// outputs; nil for another task. An artifact whose position has no leaf
// (which the contract check refuses) has a path to no element.
func TuplePaths(task *spec.InferenceTaskProfile, schema engine.MethodSchema) [][]int {
	if !TupleArtifacts(task, schema) {
		return nil
	}
	rt, err := returnType(schema)
	if err != nil {
		return nil
	}
	var leaves []TupleLeaf
	positions, explicit := task.ArtifactPositions()
	leaves = tupleElements(rt, explicit)
	paths := make([][]int, len(task.Outputs))
	for i, p := range positions {
		if p < len(leaves) {
			paths[i] = leaves[p].Path
		} else {
			paths[i] = []int{p}
		}
	}
	return paths
}

// tupleElements are the elements of tuple type t (Optional or not) that a
// task's artifacts are: its leaves in order (TupleLeaves), or, when the
// artifacts give positions, the outer tuple's elements, each its own
// (position i is element i, whatever it holds).
func tupleElements(t Type, explicit bool) []TupleLeaf {
	if !explicit {
		return TupleLeaves(t)
	}
	for t.Name == "Optional" && len(t.Elems) == 1 {
		t = t.Elems[0]
	}
	if t.Name != "Tuple" {
		return nil
	}
	elems := make([]TupleLeaf, len(t.Elems))
	for i, e := range t.Elems {
		elems[i] = TupleLeaf{Path: []int{i}, Type: e}
	}
	return elems
}
