package params

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime"
)

// A named dimension of size 0 is refused unless the task's dims allow it
// (issue 31: an empty token sequence answered 200 with a NaN embedding).
func TestEmptyNamedDimension(t *testing.T) {
	zero := int64(0)
	for _, tc := range []struct {
		dims runtime.DimSpec
		ok   bool
	}{
		{runtime.DimSpec{}, false},
		{runtime.DimSpec{Minimum: &zero}, true},
	} {
		task := &runtime.InferenceTaskProfile{TaskID: "embed", Dims: map[string]runtime.DimSpec{"T": tc.dims},
			Inputs: []runtime.InferenceFieldSpec{{FieldID: "tokens", Kind: runtime.KindTensor, DType: runtime.Int64, Shape: runtime.Shape{"T"}}}}
		if tc.dims == (runtime.DimSpec{}) {
			task.Dims = nil
		}
		r, err := Compile(task)
		if err != nil {
			t.Fatal(err)
		}
		c := r.Check()
		Tensor(&c, 0, runtime.FromInt64(nil, 0))
		err = c.Err()
		if tc.ok != (err == nil) {
			t.Errorf("dims %+v: %v", tc.dims, err)
		}
		if err != nil && !strings.Contains(err.Error(), "dimension T is 0; a named dimension is at least 1") {
			t.Errorf("message: %v", err)
		}
	}
	// The wildcard takes 0.
	task := &runtime.InferenceTaskProfile{TaskID: "x", Inputs: []runtime.InferenceFieldSpec{{FieldID: "v", Kind: runtime.KindTensor, Shape: runtime.Shape{"*"}}}}
	r, err := Compile(task)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Check()
	Tensor(&c, 0, runtime.FromInt64(nil, 0))
	if err := c.Err(); err != nil {
		t.Errorf("wildcard: %v", err)
	}
}
