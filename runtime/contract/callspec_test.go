package contract

import (
	"errors"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// encoderSpec is the call spec of the exported encoder (examples/aoti):
// features [batch, 32] by position, normalize baked in, a dict out.
func encoderSpec() engine.CallSpec {
	return engine.CallSpec{
		Inputs: []engine.CallInput{
			{Name: "features", DType: tensor.Float32, Shape: spec.Shape{"batch", "32"}},
			{Name: "normalize", Keyword: true, Constant: true, Value: true},
		},
		Outputs: []engine.CallOutput{
			{Name: "embedding", DType: tensor.Float32, Shape: spec.Shape{"batch", "16"}},
			{Name: "norm", DType: tensor.Float32, Shape: spec.Shape{"batch"}},
		},
		Returns: engine.ReturnsDict,
		Dims:    map[string]engine.DimRange{"batch": {Min: 2, Max: 16}},
	}
}

// encoderTask is a manifest task that matches encoderSpec.
func encoderTask() *spec.InferenceTaskProfile {
	return &spec.InferenceTaskProfile{
		TaskID:   "embed",
		Batching: &spec.BatchingSpec{MaxBatchSize: 32, Dim: "N"},
		Inputs: []spec.InferenceFieldSpec{{FieldID: "features", Kind: spec.KindTensor, Target: spec.TargetCallKwargs,
			Required: true, DType: tensor.Float32, Shape: spec.Shape{"N", "D"}}},
		Outputs: []spec.InferenceArtifactSpec{
			{ArtifactID: "embedding", Kind: spec.ArtifactEmbedding, Required: true, DType: tensor.Float32, Shape: spec.Shape{"N", "16"}},
			{ArtifactID: "norm", Kind: spec.ArtifactTensor, Shape: spec.Shape{"N"}},
		},
		Dims: map[string]spec.DimSpec{"D": {Minimum: ptr(int64(8))}},
	}
}

func ptr[T any](v T) *T { return &v }

func TestCheckCallSpec(t *testing.T) {
	t.Parallel()
	if err := CheckCallSpec(encoderTask(), nil, encoderSpec()); err != nil {
		t.Fatalf("matching task: %v", err)
	}
	// Restating a baked-in constant is fine.
	v := &spec.InferenceVariantSpec{CallKwargs: map[string]any{"normalize": true}}
	if err := CheckCallSpec(encoderTask(), v, encoderSpec()); err != nil {
		t.Fatalf("restated constant: %v", err)
	}
	// A per-item shape in a batchable task without a batch dim.
	perItem := encoderTask()
	perItem.Batching.Dim = ""
	perItem.Inputs[0].Shape = spec.Shape{"32"}
	perItem.Outputs[0].Shape, perItem.Outputs[1].Shape = nil, nil
	perItem.Dims = nil
	err := CheckCallSpec(perItem, nil, encoderSpec())
	if err == nil || !strings.Contains(err.Error(), "(1 problem):\n\tbatching: expected dim naming the batch dimension") {
		t.Fatalf("batching without dim: %v", err)
	}
	perItem.Batching.Dim = "N" // the field's shape does not start with it: still each item's
	if err := CheckCallSpec(perItem, nil, encoderSpec()); err != nil {
		t.Fatalf("per-item shape: %v", err)
	}

	cases := []struct {
		name string
		edit func(*spec.InferenceTaskProfile, *engine.CallSpec, *spec.InferenceVariantSpec)
		want []string
	}{
		{"method", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Method = "encode"
		},
			[]string{`method: expected "forward", the one call a compiled package runs, found method "encode"`}},
		{"baked field", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs = append(t.Inputs, spec.InferenceFieldSpec{FieldID: "normalize", Kind: spec.KindBool, Target: spec.TargetCallKwargs, Default: true})
		}, []string{`field "normalize": expected a tensor input of the package, found argument normalize baked in at export as the constant bool true, which no field can change: remove the field, or export with normalize as a tensor input`}},
		{"unknown field", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs = append(t.Inputs, spec.InferenceFieldSpec{FieldID: "mask", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, Required: true})
		}, []string{`field "mask": expected an input mask of the package, found no such input (inputs: features: float32[batch,32], normalize = true (constant))`}},
		{"renamed field", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs[0].FieldID = "x"
		}, []string{`field "x": expected an input x of the package`, `input "features": expected a call_kwargs field "features" of kind tensor, image or video (the package takes features: float32[batch,32] on every call), found no field`}},
		{"kind dtype optional", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs[0].DType = tensor.Float16
			t.Inputs[0].Required = false
		}, []string{`field "features": expected a required field (the package takes features: float32[batch,32] on every call), found an optional field`,
			`field "features": expected dtype float32 (input features: float32[batch,32]), found dtype float16`}},
		{"kind", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs[0].Kind = spec.KindFloatList
		}, []string{`field "features": expected a field of kind tensor, image or video for input features: float32[batch,32], found kind float_list`}},
		{"rank", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs[0].Shape = spec.Shape{"N", "4", "8"}
		}, []string{`field "features": expected a shape of rank 2 (features: float32[batch,32]), found shape [N,4,8]`}},
		{"fixed size", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs[0].Shape = spec.Shape{"N", "31"}
		}, []string{`field "features": expected dimension 1 of size 32 (features: float32[batch,32]), found shape [N,31]`}},
		{"fixed batch outside the range", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Batching = nil
			t.Inputs[0].Shape = spec.Shape{"64", "32"}
		}, []string{`expected dimension 0 within batch's exported range [2, 16]`}},
		{"inconsistent dims", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Outputs[0].Shape = spec.Shape{"D", "16"}
		}, []string{`artifact "embedding": expected dimension D to be the package's 32, as for field "features" (the package returns float32[batch,16]), found the package's batch at dimension 0`}},
		{"dims constraint", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Dims["N"] = spec.DimSpec{Minimum: ptr(int64(20))}
			t.Dims["D"] = spec.DimSpec{Maximum: ptr(int64(16))}
		}, []string{`dims "D": expected a constraint the package's size 32 meets (field "features" binds it), found must be at most 16`,
			`dims "N": expected sizes the package takes: batch is [2, 16] (field "features" binds it), found minimum 20`}},
		{"artifact dtype kind missing", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Outputs[0].DType = tensor.Float16
			t.Outputs[1].Kind = spec.ArtifactText
			t.Outputs = append(t.Outputs, spec.InferenceArtifactSpec{ArtifactID: "logits", Kind: spec.ArtifactTensor, Required: true})
		}, []string{`artifact "embedding": expected dtype float32 (the package returns float32[batch,16]), found dtype float16`,
			`artifact "norm": expected an artifact kind holding a tensor (the package returns float32[batch]), found kind text`,
			`artifact "logits": expected a key "logits" in the dict the package returns (the artifact is required), found only the keys "embedding", "norm"`}},
		{"kwargs", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, v *spec.InferenceVariantSpec) {
			t.DefaultCallKwargs = map[string]any{"normalize": false, "steps": int64(4)}
			v.CallKwargs = map[string]any{"normalize": int64(1)}
		}, []string{`default_call_kwargs "normalize": expected bool true, the value the export baked in (the package cannot take another), found bool false`,
			`default_call_kwargs "steps": expected an input of the package, found no such input`,
			`call_kwargs "normalize": expected bool true, the value the export baked in (the package cannot take another), found int 1`}},
		{"kwarg for a tensor input", func(t *spec.InferenceTaskProfile, _ *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			t.Inputs = nil
			t.Batching = nil
			t.DefaultCallKwargs = map[string]any{"features": 1.5}
		}, []string{`default_call_kwargs "features": expected a field for input features: float32[batch,32] (a manifest value is no tensor), found float 1.5`,
			`input "features": expected a call_kwargs field "features"`}},
		{"tuple", func(_ *spec.InferenceTaskProfile, s *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			s.Returns = engine.ReturnsTuple
		}, []string{`return: expected one tensor, or a dict of tensors keyed by artifact_id (return one from forward before exporting), found a tuple of 2 tensors`}},
		{"one tensor, two artifacts", func(_ *spec.InferenceTaskProfile, s *engine.CallSpec, _ *spec.InferenceVariantSpec) {
			s.Returns = engine.ReturnsTensor
			s.Outputs = s.Outputs[:1]
		}, []string{`return: expected a dict of tensors keyed by artifact_id for 2 artifacts ("embedding", "norm"), found one tensor`}},
	}
	for _, c := range cases {
		task, spec, v := encoderTask(), encoderSpec(), &spec.InferenceVariantSpec{}
		c.edit(task, &spec, v)
		err := CheckCallSpec(task, v, spec)
		var me *MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: got %v, want a MismatchError", c.name, err)
			continue
		}
		if len(me.Problems) != len(c.want) {
			t.Errorf("%s: got %d problems, want %d:\n%v", c.name, len(me.Problems), len(c.want), err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", c.name, err, w)
			}
		}
	}
}

func TestBatchRange(t *testing.T) {
	t.Parallel()
	task := encoderTask()
	if r, ok := BatchRange(task, encoderSpec()); !ok || r != (engine.DimRange{Min: 2, Max: 16}) {
		t.Fatalf("got %v %v", r, ok)
	}
	fixed := encoderSpec()
	fixed.Inputs[0].Shape = spec.Shape{"1", "32"}
	if r, ok := BatchRange(task, fixed); !ok || r != (engine.DimRange{Min: 1, Max: 1}) {
		t.Fatalf("fixed: got %v %v", r, ok)
	}
	task.Batching = nil
	if _, ok := BatchRange(task, encoderSpec()); ok {
		t.Fatal("not batchable: ok")
	}
}
