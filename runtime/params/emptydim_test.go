package params

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A named dimension of size 0 is refused unless the task's dims allow it
// (issue 31: an empty token sequence answered 200 with a NaN embedding).
func TestEmptyNamedDimension(t *testing.T) {
	zero := int64(0)
	for _, tc := range []struct {
		dims spec.DimSpec
		ok   bool
	}{
		{spec.DimSpec{}, false},
		{spec.DimSpec{Minimum: &zero}, true},
	} {
		task := &spec.InferenceTaskProfile{TaskID: "embed", Dims: map[string]spec.DimSpec{"T": tc.dims},
			Inputs: []spec.InferenceFieldSpec{{FieldID: "tokens", Kind: spec.KindTensor, DType: tensor.Int64, Shape: spec.Shape{"T"}}}}
		if tc.dims == (spec.DimSpec{}) {
			task.Dims = nil
		}
		r, err := Compile(task)
		if err != nil {
			t.Fatal(err)
		}
		c := r.Check()
		Tensor(&c, 0, tensor.FromInt64(nil, 0))
		err = c.Err()
		if tc.ok != (err == nil) {
			t.Errorf("dims %+v: %v", tc.dims, err)
		}
		if err != nil && !strings.Contains(err.Error(), "dimension T is 0; a named dimension is at least 1") {
			t.Errorf("message: %v", err)
		}
	}
	// The wildcard takes 0.
	task := &spec.InferenceTaskProfile{TaskID: "x", Inputs: []spec.InferenceFieldSpec{{FieldID: "v", Kind: spec.KindTensor, Shape: spec.Shape{"*"}}}}
	r, err := Compile(task)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Check()
	Tensor(&c, 0, tensor.FromInt64(nil, 0))
	if err := c.Err(); err != nil {
		t.Errorf("wildcard: %v", err)
	}
}
