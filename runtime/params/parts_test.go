package params

import (
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Value checks a dict's or tuple's generated struct part by part: required
// parts present, each part's dtype and shape, named dimensions bound
// across parts; an unset optional struct (a nil pointer) is not checked.
func TestValueParts(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{
		{FieldID: "features", Kind: spec.KindTensorDict, Required: true, Fields: []spec.ArtifactFieldSpec{
			{Name: "a", Required: true, DType: tensor.Float32, Shape: spec.Shape{"N", "2"}}, {Name: "b", Shape: spec.Shape{"N"}}}},
		{FieldID: "pair", Kind: spec.KindTensorTuple, Fields: []spec.ArtifactFieldSpec{{Name: "x", Required: true}, {Name: "y", Required: true}}},
	}}
	type features struct{ A, B *tensor.Tensor }
	type pair struct{ X, Y *tensor.Tensor }
	rules := MustCompile(task)
	check := func(f features, p *pair) string {
		c := rules.Check()
		Value(&c, 0, reflect.ValueOf(f))
		Value(&c, 1, reflect.ValueOf(p))
		if err := c.Err(); err != nil {
			return err.Error()
		}
		return ""
	}
	a := tensor.FromFloat32(make([]float32, 4), 2, 2)
	if got := check(features{A: a, B: tensor.FromFloat32(make([]float32, 2), 2)}, nil); got != "" {
		t.Errorf("valid: %s", got)
	}
	for _, c := range []struct {
		f    features
		p    *pair
		want string
	}{
		{features{}, nil, `features: required key(s) "a" missing`},
		{features{A: tensor.FromInt64(make([]int64, 4), 2, 2)}, nil, "features.a"},
		{features{A: a, B: tensor.FromFloat32(make([]float32, 3), 3)}, nil, "features.b"},
		{features{A: a}, &pair{X: a}, `pair: required element(s) "1" missing`},
	} {
		if got := check(c.f, c.p); !strings.Contains(got, c.want) {
			t.Errorf("%+v %+v: %q, want %q", c.f, c.p, got, c.want)
		}
	}
}
