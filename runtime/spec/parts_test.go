package spec

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestPartsKinds(t *testing.T) {
	for _, c := range []struct {
		k                  Kind
		form               Form
		list, parts, stack bool
		ts                 string
	}{
		{KindTensor, FormOne, false, false, true, "Tensor"},
		{KindTensorList, FormList, true, false, false, "List[Tensor]"},
		{KindIntList, FormList, true, false, false, "List[int]"},
		{KindTensorDict, FormDict, false, true, false, "Dict[str, Tensor]"},
		{KindTensorTuple, FormTuple, false, true, false, "Tuple[Tensor, ...]"},
	} {
		if c.k.Form() != c.form || c.k.IsList() != c.list || c.k.HasParts() != c.parts || c.k.Stacked() != c.stack || c.k.TorchScriptType() != c.ts {
			t.Errorf("%s: form %d list %v parts %v stacked %v type %s", c.k, c.k.Form(), c.k.IsList(), c.k.HasParts(), c.k.Stacked(), c.k.TorchScriptType())
		}
	}
	if l, ok := KindTensor.ListOf(); !ok || l != KindTensorList {
		t.Errorf("ListOf(tensor) = %s, %v", l, ok)
	}
	for _, c := range []Constraint{ConstraintDType, ConstraintShape, ConstraintMinLength} {
		if KindTensorDict.Allows(c) || KindTensorTuple.Allows(c) {
			t.Errorf("%s applies to a dict or tuple (it is declared per part)", c)
		}
	}
	tuple := &InferenceFieldSpec{FieldID: "p", Kind: KindTensorTuple, Fields: []ArtifactFieldSpec{{Name: "x", Required: true}, {Name: "y", Required: true}}}
	if got := tuple.TorchScriptType(); got != "Tuple[Tensor, Tensor]" {
		t.Errorf("tuple type %s", got)
	}
}

func TestPartProblems(t *testing.T) {
	for _, c := range []struct {
		f    InferenceFieldSpec
		want string
	}{
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensor, Fields: []ArtifactFieldSpec{{Name: "a"}}}, "fields: field \"f\": fields are the parts of a tensor_dict"},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict}, ": field \"f\": a tensor_dict field lists its parts under fields"},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorTuple, Fields: []ArtifactFieldSpec{}}, "fields: field \"f\": a tensor_tuple field lists its parts"},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict, Fields: []ArtifactFieldSpec{{Name: "a.b"}}}, "fields/0/name: field \"f\": part \"a.b\": use a name with no '.'"},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict, Fields: []ArtifactFieldSpec{{Name: "12"}}}, "fields/0/name: field \"f\": part \"12\""},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict, Fields: []ArtifactFieldSpec{{Name: "a"}, {Name: "a"}}}, "fields/1/name: field \"f\": parts 0 and 1 are both named \"a\""},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorTuple, Fields: []ArtifactFieldSpec{{Name: "a", Required: true}, {Name: "b"}}}, "fields/1: field \"f\": element 1 (\"b\") of a tuple is always passed: set required: true"},
		{InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict, Fields: []ArtifactFieldSpec{{Name: "a"}, {Name: "b", Required: true}}}, ""},
	} {
		var got []string
		for _, p := range c.f.PartProblems() {
			got = append(got, p.Path+": "+p.Message)
		}
		if all := strings.Join(got, "\n"); c.want == "" && all != "" || !strings.Contains(all, c.want) {
			t.Errorf("%+v: %q, want %q", c.f, all, c.want)
		}
	}
}

func TestEachPart(t *testing.T) {
	x := tensor.FromFloat32([]float32{1}, 1)
	dict := &InferenceFieldSpec{FieldID: "f", Kind: KindTensorDict, Fields: []ArtifactFieldSpec{{Name: "a", Required: true}, {Name: "b"}}}
	tuple := &InferenceFieldSpec{FieldID: "p", Kind: KindTensorTuple, Fields: []ArtifactFieldSpec{{Name: "x", Required: true}, {Name: "y", Required: true}}}
	visit := func(f *InferenceFieldSpec, v any) (string, error) {
		var seen []string
		err := f.EachPart(v, func(k int, _ *tensor.Tensor) error { seen = append(seen, f.PartName(k)); return nil })
		return strings.Join(seen, ","), err
	}
	if got, err := visit(dict, dict.PartsValue([]*tensor.Tensor{x, nil})); got != "a" || err != nil {
		t.Errorf("dict: %q %v", got, err)
	}
	if got, err := visit(tuple, tuple.PartsValue([]*tensor.Tensor{x, x})); got != "0,1" || err != nil {
		t.Errorf("tuple: %q %v", got, err)
	}
	for _, c := range []struct {
		f    *InferenceFieldSpec
		v    any
		want string
	}{
		{dict, map[string]any{"b": x}, `required key(s) "a" missing`},
		{dict, map[string]any{"a": x, "c": x}, `key "c" is not one the field declares (a, b)`},
		{dict, []any{x}, "want a dict of tensors"},
		{dict, map[string]any{"a": "s"}, `key "a": `},
		{tuple, []any{x}, "want a tuple of 2 tensors (Tuple[Tensor, Tensor]), got 1"},
		{tuple, tuple.PartsValue([]*tensor.Tensor{x, nil}), `required element(s) "1" missing`},
		{tuple, map[string]any{}, "want a tuple of 2 tensors"},
	} {
		if _, err := visit(c.f, c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %#v: %v, want %q", c.f.FieldID, c.v, err, c.want)
		}
	}
	if k, ok := tuple.PartOf("1"); !ok || k != 1 {
		t.Errorf("PartOf(1) = %d %v", k, ok)
	}
	if _, ok := dict.PartOf("c"); ok {
		t.Error("PartOf(c) found")
	}
}

// A warm-up gives a required dict or tuple zeros for each required part.
func TestWarmupParts(t *testing.T) {
	task := &InferenceTaskProfile{TaskID: "t", Warmup: &WarmupSpec{Dims: map[string]int64{"N": 3}}, Inputs: []InferenceFieldSpec{
		{FieldID: "f", Kind: KindTensorDict, Required: true, Fields: []ArtifactFieldSpec{
			{Name: "a", Required: true, DType: tensor.Float32, Shape: Shape{"N", "2"}}, {Name: "b"}}},
		{FieldID: "p", Kind: KindTensorTuple, Required: true, Fields: []ArtifactFieldSpec{{Name: "x", Required: true}}},
	}}
	values, ps := task.WarmupValues()
	if len(ps) != 1 || !strings.Contains(ps[0].Message, `field "p", element "x": declare its dtype`) {
		t.Errorf("problems %+v", ps)
	}
	d, _ := values["f"].(map[string]any)
	if a, _ := d["a"].(*tensor.Tensor); len(d) != 1 || a == nil || a.Shape[0] != 3 || a.Shape[1] != 2 {
		t.Errorf("f = %#v", values["f"])
	}
}
