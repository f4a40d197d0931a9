package client

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/worldfoundry/wfgen/runtime"
)

// stackKwargs turns per-item kwargs into one batched call: tensors are
// stacked along a new leading dimension and every other value must be equal
// across the items.
func stackKwargs(items []map[string]any) (map[string]any, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("empty batch")
	}
	keys := make([]string, 0, len(items[0]))
	for k := range items[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]any, len(keys))
	stacked := false
	for _, k := range keys {
		first := items[0][k]
		if _, ok := first.(*runtime.Tensor); ok {
			ts := make([]*runtime.Tensor, len(items))
			for i, it := range items {
				t, ok := it[k].(*runtime.Tensor)
				if !ok {
					return nil, fmt.Errorf("field %q: item %d has no tensor", k, i)
				}
				ts[i] = t
			}
			st, err := runtime.Stack(ts)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			out[k] = st
			stacked = true
			continue
		}
		for i, it := range items[1:] {
			if !reflect.DeepEqual(it[k], first) {
				return nil, fmt.Errorf("field %q: item %d has %v, item 0 has %v (non-tensor fields must be equal within a batch)", k, i+1, it[k], first)
			}
		}
		out[k] = first
	}
	if !stacked {
		return nil, fmt.Errorf("no tensor kwarg to stack: the items would share one call")
	}
	for i, it := range items[1:] {
		if len(it) != len(items[0]) {
			return nil, fmt.Errorf("item %d sets %d kwargs, item 0 sets %d", i+1, len(it), len(items[0]))
		}
	}
	return out, nil
}

// splitOutputs splits each batched output tensor along its leading
// dimension into per-item outputs.
func splitOutputs(out map[string]any, n int) ([]map[string]any, error) {
	res := make([]map[string]any, n)
	for i := range res {
		res[i] = make(map[string]any, len(out))
	}
	for k, v := range out {
		t, ok := v.(*runtime.Tensor)
		if !ok {
			return nil, fmt.Errorf("artifact %q: a batched method must return tensors, got %s", k, describe(v))
		}
		parts, err := runtime.Unstack(t, n)
		if err != nil {
			return nil, fmt.Errorf("artifact %q: %w", k, err)
		}
		for i, p := range parts {
			res[i][k] = p
		}
	}
	return res, nil
}
