package engine

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// tensorPointer is the type of a tensor value.
var tensorPointer = reflect.TypeFor[*tensor.Tensor]()

// ValueOf converts a Go value into the engine's value form (see Module):
// named string types become string, every integer kind int64, every float
// kind float64, slices []any, string-keyed maps map[string]any, and
// non-nil pointers their element; a well-formed tensor stays as it is. A
// nil pointer is nil. Anything else (channels, funcs, structs) is an
// error naming its type.
func ValueOf(v any) (any, error) {
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
	return valueOf(reflect.ValueOf(v), 0)
}

func valueOf(rv reflect.Value, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("value nested deeper than 32 levels")
	}
	if rv.Type() == tensorPointer {
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
		return valueOf(rv.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			x, err := valueOf(rv.Index(i), depth+1)
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
			x, err := valueOf(rv.MapIndex(k), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k.String(), err)
			}
			out[k.String()] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value of type %s", rv.Type())
}
