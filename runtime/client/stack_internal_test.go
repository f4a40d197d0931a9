package client

import (
	"bytes"
	"encoding/gob"
	"reflect"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// An item's outputs survive gob, which carries them between the ranks of a
// sharded run.
func TestItemOutputsGob(t *testing.T) {
	t.Parallel()
	f, err := splitOutputs(map[string]any{
		"b": tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2),
		"a": tensor.FromInt64([]int64{7, 8}, 2),
	}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(itemOutputs{f: f, row: 1}); err != nil {
		t.Fatal(err)
	}
	var got itemOutputs
	if err := gob.NewDecoder(&b).Decode(&got); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	got.fill(m)
	want := map[string]any{"a": tensor.FromInt64([]int64{8}), "b": tensor.FromFloat32([]float32{3, 4}, 2)}
	for k := range want {
		x, y := m[k].(*tensor.Tensor), want[k].(*tensor.Tensor)
		if x == nil || x.DType != y.DType || !reflect.DeepEqual(x.Shape, y.Shape) && !(len(x.Shape) == 0 && len(y.Shape) == 0) || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("%s = %+v, want %+v", k, m[k], want[k])
		}
	}
	if len(m) != 2 {
		t.Errorf("outputs %v", m)
	}
}
