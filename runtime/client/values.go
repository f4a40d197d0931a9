package client

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

var tensorType = reflect.TypeFor[*tensor.Tensor]()

// MergeKwargs merges layers of keyword arguments, later layers winning, and
// converts every value with engine.ValueOf. A nil value in a later layer
// removes the key (an optional field the caller left unset does not
// override a default from an earlier layer: callers omit such keys).
func MergeKwargs(layers ...map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, l := range layers {
		for k, v := range l {
			ev, err := engine.ValueOf(v)
			if err != nil {
				return nil, fmt.Errorf("kwarg %q: %w", k, err)
			}
			if ev == nil {
				delete(out, k)
				continue
			}
			out[k] = ev
		}
	}
	return out, nil
}

// Outputs maps a method's return value onto the task's artifacts: a dict is
// keyed by artifact id (unless it is the task's only artifact, a record:
// spec.InferenceTaskProfile.RecordReturned); the tuple of a task whose
// artifacts give positions
// holds each artifact at its position; any other value is the one
// artifact of a task that has exactly one. A missing required artifact is
// an error naming it. (A loaded client also maps the tuple of a method
// that returns one onto artifacts without positions, in order, as
// contract.TupleArtifacts says from the method's schema.)
func Outputs(task *spec.InferenceTaskProfile, out any) (map[string]any, error) {
	positions, explicit := task.ArtifactPositions()
	var paths [][]int
	if explicit {
		paths = make([][]int, len(positions))
		for i, p := range positions {
			paths[i] = []int{p}
		}
	}
	return outputs(task, out, paths)
}

// outputs is Outputs; tuple, when the value is a tuple whose elements are
// the artifacts, is the path of each artifact's element in it
// (contract.TuplePaths).
func outputs(task *spec.InferenceTaskProfile, out any, tuple [][]int) (map[string]any, error) {
	if tuple != nil {
		return tupleOutputs(task, out, tuple)
	}
	m, isDict := out.(map[string]any)
	if !isDict || task.RecordReturned() {
		if len(task.Outputs) != 1 {
			return nil, fmt.Errorf("method %s returned one %s, but the task declares %d artifacts: return a Dict[str, ...] keyed by artifact id",
				task.MethodName(), describe(out), len(task.Outputs))
		}
		return map[string]any{task.Outputs[0].ArtifactID: out}, nil
	}
	res := make(map[string]any, len(task.Outputs))
	var missing []string
	for _, a := range task.Outputs {
		v, ok := m[a.ArtifactID]
		if !ok || v == nil {
			if a.Required {
				missing = append(missing, a.ArtifactID)
			}
			continue
		}
		res[a.ArtifactID] = v
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(m))
		for k := range m {
			have = append(have, k)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("method %s did not return required artifact(s) %v (returned keys: %v)", task.MethodName(), missing, have)
	}
	return res, nil
}

// tupleOutputs maps the elements of a returned tuple onto the task's
// artifacts: artifact i is the element at paths[i] (contract.TuplePaths),
// an element of a nested tuple at a path longer than one. A tuple on the
// way that is None (an Optional one) leaves the artifact missing.
func tupleOutputs(task *spec.InferenceTaskProfile, out any, paths [][]int) (map[string]any, error) {
	if _, ok := out.([]any); !ok && out != nil {
		return nil, fmt.Errorf("method %s returned %s, but the task's artifacts are the elements of a tuple", task.MethodName(), describe(out))
	}
	res := make(map[string]any, len(task.Outputs))
	var missing []string
	for i, a := range task.Outputs {
		v := out
		for depth, p := range paths[i] {
			if v == nil {
				break
			}
			elems, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("method %s returned %s at element %v of its tuple, where the schema has a tuple for artifact %q", task.MethodName(), describe(v), paths[i][:depth], a.ArtifactID)
			}
			if p >= len(elems) {
				return nil, fmt.Errorf("method %s returned a tuple of %d, which has no element %d for artifact %q", task.MethodName(), len(elems), p, a.ArtifactID)
			}
			v = elems[p]
		}
		if v == nil {
			if a.Required {
				missing = append(missing, a.ArtifactID)
			}
			continue
		}
		res[a.ArtifactID] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("method %s did not return required artifact(s) %v (the tuple's elements were None)", task.MethodName(), missing)
	}
	return res, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case *tensor.Tensor:
		return fmt.Sprintf("tensor %s%v", x.DType, x.Shape)
	case []any:
		return fmt.Sprintf("tuple/list of %d", len(x))
	default:
		return fmt.Sprintf("%T", v)
	}
}
