package oip_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// partsSpec is a family whose task takes a dict of tensors (a required
// key with a contract, an optional key) and a tuple of two tensors.
func partsSpec() *spec.ModelInferenceSpec {
	return &spec.ModelInferenceSpec{ModelFamilyID: "parts", DefaultTaskID: "forward", Variants: []spec.InferenceVariantSpec{{VariantID: "v"}},
		Tasks: []spec.InferenceTaskProfile{{TaskID: "forward", Inputs: []spec.InferenceFieldSpec{
			{FieldID: "features", Kind: spec.KindTensorDict, Target: spec.TargetCallKwargs, Required: true, Fields: []spec.ArtifactFieldSpec{
				{Name: "a", Required: true, DType: tensor.Float32, Shape: spec.Shape{"N", "2"}}, {Name: "b"}}},
			{FieldID: "pair", Kind: spec.KindTensorTuple, Target: spec.TargetCallKwargs, Fields: []spec.ArtifactFieldSpec{
				{Name: "left", Required: true}, {Name: "right", Required: true}}},
		}, Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "y", Kind: spec.ArtifactTensor, Required: true}}}}}
}

func partsModel(t testing.TB) *oip.Model {
	t.Helper()
	m, err := oip.NewModel(partsSpec())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A dict travels as ID.KEY and a tuple as ID.0, ID.1: what EncodeInputs
// writes, Args reads back as the same engine values, in JSON and binary.
func TestPartsRoundTrip(t *testing.T) {
	m := partsModel(t)
	task := &m.Spec.Tasks[0]
	a := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	l, r := tensor.FromInt64([]int64{7}, 1), tensor.FromFloat32([]float32{0.5, -0.25}, 2)
	call := map[string]any{"features": map[string]any{"a": a}, "pair": []any{l, r}}
	ins, err := oip.EncodeInputs(task, call, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range ins {
		names = append(names, in.Name)
	}
	if got := strings.Join(names, " "); got != "features.a pair.0 pair.1" {
		t.Errorf("names %q, want features.a pair.0 pair.1", got)
	}
	got, _, err := m.Args(task, ins, oip.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	same := func(x, y any) bool {
		a, b := x.(*tensor.Tensor), y.(*tensor.Tensor)
		return a.DType == b.DType && reflect.DeepEqual(a.Shape, b.Shape) && string(a.Data) == string(b.Data)
	}
	gf, _ := got["features"].(map[string]any)
	gp, _ := got["pair"].([]any)
	if len(got) != 2 || len(gf) != 1 || !same(gf["a"], a) || len(gp) != 2 || !same(gp[0], l) || !same(gp[1], r) {
		t.Errorf("Args = %#v, want %#v", got, call)
	}
}

// Malformed structured inputs are protocol errors that say what is
// wrong: the field itself as one input, a part the field does not
// declare, a part given twice, a required part or field missing, a
// part's contract broken.
func TestPartsRefused(t *testing.T) {
	m := partsModel(t)
	task := &m.Spec.Tasks[0]
	f32 := func(name string, shape ...int64) oip.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		ts, err := oip.EncodeInputs(&spec.InferenceTaskProfile{TaskID: "x", Inputs: []spec.InferenceFieldSpec{{FieldID: "t", Kind: spec.KindTensor}}},
			map[string]any{"t": tensor.FromFloat32(make([]float32, n), shape...)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ts[0].Name = name
		return ts[0]
	}
	good := f32("features.a", 1, 2)
	for _, c := range []struct {
		ins  []oip.Tensor
		want string
	}{
		{[]oip.Tensor{f32("features", 1, 2)}, `input "features": field "features" is a dict of tensors (Dict[str, Tensor]), which travels as its parts features.a, features.b, never as one input`},
		{[]oip.Tensor{good, f32("features.c", 1)}, `input "features.c" is no part of field "features"`},
		{[]oip.Tensor{good, f32("pair.2", 1)}, `input "pair.2" is no part of field "pair"`},
		{[]oip.Tensor{good, good}, `input "features.a" is given twice`},
		{[]oip.Tensor{f32("features.b", 1)}, `features: required key(s) "a" missing`},
		{[]oip.Tensor{good, f32("pair.0", 1)}, `pair: required element(s) "1" missing`},
		{[]oip.Tensor{f32("pair.0", 1), f32("pair.1", 1)}, `missing required input(s) features`},
		{[]oip.Tensor{f32("features.a", 1, 3)}, `features.a`},
		{[]oip.Tensor{f32("pair", 1)}, `field "pair" is a tuple of tensors (Tuple[Tensor, Tensor]), which travels as its parts pair.0, pair.1`},
	} {
		_, _, err := m.Args(task, c.ins, oip.Limits{})
		if err == nil || !errors.Is(err, oip.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want a bad request with %q", c.ins[len(c.ins)-1].Name, err, c.want)
		}
	}
	// The metadata lists one input per part.
	var mds []string
	for _, md := range oip.TaskInputs(task) {
		mds = append(mds, md.Name+":"+md.Parameters["presence"].(string))
	}
	if got := strings.Join(mds, " "); got != "features.a:required features.b:optional pair.0:optional pair.1:optional" {
		t.Errorf("metadata %q", got)
	}
}

// The OpenAPI document names a dict's and a tuple's inputs by part, and
// requires each required part of a required field.
func TestPartsOpenAPI(t *testing.T) {
	m := partsModel(t)
	doc, err := oip.OpenAPI(m.Spec)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource("doc.json", bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("doc.json#/components/schemas/parts.forward.InferRequest")
	if err != nil {
		t.Fatal(err)
	}
	task := &m.Spec.Tasks[0]
	a := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	valid := func(call map[string]any, drop int) error {
		ins, err := oip.EncodeInputs(task, call, nil)
		if err != nil {
			t.Fatal(err)
		}
		if drop >= 0 {
			ins = append(ins[:drop], ins[drop+1:]...)
		}
		b, _ := json.Marshal(oip.InferenceRequest{Inputs: ins})
		var v any
		json.Unmarshal(b, &v)
		return sch.Validate(v)
	}
	call := map[string]any{"features": map[string]any{"a": a}, "pair": []any{a, a}}
	if err := valid(call, -1); err != nil {
		t.Errorf("a request with parts: %v", err)
	}
	if err := valid(call, 0); err == nil {
		t.Error("a request without the required features.a validated")
	}
}
