package client

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

var tensorType = reflect.TypeFor[*tensor.Tensor]()

// EngineValue converts a Go value into the engine's value form (see
// engine.Module): named string types become string, every integer kind
// int64, every float kind float64, slices []any, string-keyed maps
// map[string]any, and non-nil pointers their element. A nil pointer is nil.
// Anything else (channels, funcs, structs) is an error naming its type.
func EngineValue(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if t, ok := v.(*tensor.Tensor); ok {
		if t == nil {
			return nil, nil
		}
		if err := t.Check(); err != nil {
			return nil, err
		}
		return t, nil
	}
	return engineValue(reflect.ValueOf(v), 0)
}

func engineValue(rv reflect.Value, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("value nested deeper than 32 levels")
	}
	if rv.Type() == tensorType {
		if rv.IsNil() {
			return nil, nil
		}
		t := rv.Interface().(*tensor.Tensor)
		if err := t.Check(); err != nil {
			return nil, err
		}
		return t, nil
	}
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return engineValue(rv.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			x, err := engineValue(rv.Index(i), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map with %s keys (want string keys)", rv.Type().Key())
		}
		out := make(map[string]any, rv.Len())
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			x, err := engineValue(rv.MapIndex(k), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k.String(), err)
			}
			out[k.String()] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value of type %s", rv.Type())
}

// MergeKwargs merges layers of keyword arguments, later layers winning, and
// converts every value with EngineValue. A nil value in a later layer
// removes the key (an optional field the caller left unset does not
// override a default from an earlier layer: callers omit such keys).
func MergeKwargs(layers ...map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, l := range layers {
		for k, v := range l {
			ev, err := EngineValue(v)
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
// keyed by artifact id; the tuple of a task whose artifacts give positions
// holds each artifact at its position; any other value is the one
// artifact of a task that has exactly one. A missing required artifact is
// an error naming it. (A loaded client also maps the tuple of a method
// that returns one onto artifacts without positions, in order, as
// contract.TupleArtifacts says from the method's schema.)
func Outputs(task *spec.InferenceTaskProfile, out any) (map[string]any, error) {
	_, explicit := task.ArtifactPositions()
	return outputs(task, out, explicit)
}

// outputs is Outputs; tuple says the value is a tuple whose elements are
// the artifacts (contract.TupleArtifacts).
func outputs(task *spec.InferenceTaskProfile, out any, tuple bool) (map[string]any, error) {
	if tuple {
		return tupleOutputs(task, out)
	}
	m, isDict := out.(map[string]any)
	if !isDict {
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
// artifacts by their positions (spec.InferenceTaskProfile.ArtifactPositions).
func tupleOutputs(task *spec.InferenceTaskProfile, out any) (map[string]any, error) {
	elems, ok := out.([]any)
	if !ok {
		if out == nil {
			elems = nil // an Optional tuple that is None: every artifact missing
		} else {
			return nil, fmt.Errorf("method %s returned %s, but the task's artifacts are the elements of a tuple", task.MethodName(), describe(out))
		}
	}
	positions, _ := task.ArtifactPositions()
	res := make(map[string]any, len(task.Outputs))
	var missing []string
	for i, a := range task.Outputs {
		var v any
		if p := positions[i]; p < len(elems) {
			v = elems[p]
		} else if out != nil {
			return nil, fmt.Errorf("method %s returned a tuple of %d, which has no element %d for artifact %q", task.MethodName(), len(elems), p, a.ArtifactID)
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
