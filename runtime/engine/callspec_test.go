package engine

import (
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestCallSpecHelpers(t *testing.T) {
	s := CallSpec{
		Inputs: []CallInput{
			{Name: "x", DType: tensor.Float32, Shape: spec.Shape{"batch", "32"}},
			{Name: "scale", Keyword: true, Constant: true, Value: 2.0},
			{Name: "mask", Keyword: true, DType: tensor.Bool, Shape: spec.Shape{"batch"}},
		},
		Dims: map[string]DimRange{"batch": {Min: 2, Max: 16}, "t": {Min: 1}},
	}
	if got := s.InputList(); got != "x: float32[batch,32], scale = 2 (constant), mask: bool[batch]" {
		t.Errorf("InputList: %s", got)
	}
	if ts := s.Tensors(); len(ts) != 2 || ts[0].Name != "x" || ts[1].Name != "mask" {
		t.Errorf("Tensors: %v", ts)
	}
	if in, ok := s.Input("scale"); !ok || !in.Constant {
		t.Errorf("Input(scale): %v %v", in, ok)
	}
	b, tr := s.Dims["batch"], s.Dims["t"]
	if b.String() != "[2, 16]" || tr.String() != "[1, ∞)" || !b.Contains(16) || b.Contains(17) || b.Contains(1) || !tr.Contains(1<<40) {
		t.Errorf("ranges %s %s", b, tr)
	}
}

// TestCallInputRestates checks the one rule by which manifest values and
// call values restate a baked-in constant: numbers by value, whatever their
// Go type; booleans, strings and None exactly.
func TestCallInputRestates(t *testing.T) {
	cases := []struct {
		constant, v any
		want        bool
	}{
		{float64(2), int64(2), true},
		{float64(2), 2, true},
		{float64(0.5), float32(0.5), true},
		{float64(2), int32(3), false},
		{float64(1), true, false},
		{true, true, true},
		{true, false, false},
		{true, 1.0, false},
		{"mean", "mean", true},
		{"mean", "sum", false},
		{nil, nil, true},
		{nil, 0.0, false},
		{[]any{1.0}, []any{1.0}, false}, // never recorded: not a constant the export keeps
	}
	for _, c := range cases {
		if got := (CallInput{Constant: true, Value: c.constant}).Restates(c.v); got != c.want {
			t.Errorf("constant %#v, value %#v: Restates = %v, want %v", c.constant, c.v, got, c.want)
		}
	}
}
