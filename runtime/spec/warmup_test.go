package spec

import (
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func warmupTask() *InferenceTaskProfile {
	four, three := int64(4), int64(3)
	return &InferenceTaskProfile{
		TaskID: "embed",
		Inputs: []InferenceFieldSpec{
			{FieldID: "tokens", Kind: KindTensor, Target: TargetCallKwargs, Required: true, DType: tensor.Int64, Shape: Shape{"N", "L"}},
			{FieldID: "mask", Kind: KindTensor, Target: TargetCallKwargs, Required: true, DType: tensor.Bool, Shape: Shape{"N", "T", "2"}},
			{FieldID: "extra", Kind: KindTensor, Target: TargetCallKwargs, DType: tensor.Float32, Shape: Shape{"N", "*"}},
			{FieldID: "normalize", Kind: KindBool, Target: TargetCallKwargs, Default: true},
			{FieldID: "mode", Kind: KindString, Target: TargetCallKwargs, Required: true},
			{FieldID: "scale", Kind: KindFloat, Target: TargetLoadKwargs},
		},
		Outputs:           []InferenceArtifactSpec{{ArtifactID: "embedding", Kind: ArtifactEmbedding}},
		Batching:          &BatchingSpec{MaxBatchSize: 8, Dim: "N"},
		Dims:              map[string]DimSpec{"T": {Minimum: &three, MultipleOf: &four}},
		DefaultCallKwargs: map[string]any{"mode": "fast"},
	}
}

// The warm-up item: zeros of each required tensor's declared dtype and
// item shape (named dimensions at the smallest size their dims allow, or
// warmup.dims), the defaults, nothing for optional fields or fields that
// default_call_kwargs set.
func TestWarmupValues(t *testing.T) {
	task := warmupTask()
	vals, ps := task.WarmupValues()
	if len(ps) > 0 {
		t.Fatal(JoinProblems(ps))
	}
	want := map[string]any{
		"tokens":    &tensor.Tensor{DType: tensor.Int64, Shape: []int64{1}, Data: make([]byte, 8)},
		"mask":      &tensor.Tensor{DType: tensor.Bool, Shape: []int64{4, 2}, Data: make([]byte, 8)},
		"normalize": true,
	}
	if !reflect.DeepEqual(vals, want) {
		t.Errorf("values %v, want %v", vals, want)
	}

	task.Warmup = &WarmupSpec{Dims: map[string]int64{"L": 16, "T": 8}, Inputs: map[string]any{"normalize": false, "mode": "slow"}}
	vals, ps = task.WarmupValues()
	if len(ps) > 0 {
		t.Fatal(JoinProblems(ps))
	}
	if tk := vals["tokens"].(*tensor.Tensor); !reflect.DeepEqual(tk.Shape, []int64{16}) || len(tk.Data) != 128 {
		t.Errorf("tokens %v", tk)
	}
	if m := vals["mask"].(*tensor.Tensor); !reflect.DeepEqual(m.Shape, []int64{8, 2}) {
		t.Errorf("mask %v", m)
	}
	if vals["normalize"] != false || vals["mode"] != "slow" {
		t.Errorf("values %v: want the warm-up inputs to win", vals)
	}

	// Without a batch dimension the declared shape is the item's.
	task.Batching.Dim = ""
	task.Inputs[0].Shape = Shape{"L"}
	task.Inputs[1].Shape = Shape{"T", "2"}
	vals, _ = task.WarmupValues()
	if tk := vals["tokens"].(*tensor.Tensor); !reflect.DeepEqual(tk.Shape, []int64{16}) {
		t.Errorf("tokens %v", tk)
	}
}

func TestWarmupProblems(t *testing.T) {
	task := warmupTask()
	task.DefaultCallKwargs = nil
	task.Inputs[2].Required = true
	task.Inputs = append(task.Inputs, InferenceFieldSpec{FieldID: "pics", Kind: KindImage, Target: TargetCallKwargs, Required: true, Shape: Shape{"N", "3"}})
	task.Warmup = &WarmupSpec{
		Dims:   map[string]int64{"T": 6, "N": 2, "Z": 1, "L": -1},
		Inputs: map[string]any{"pics": 1, "what": 2},
		Runs:   -1,
	}
	_, ps := task.WarmupValues()
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	want := []string{
		"warmup/runs: warmup.runs -1 must be at least 1",
		`warmup/inputs/pics: warmup.inputs: field "pics" is of kind image, whose warm-up value cannot be written in a manifest: a required one gets zeros of its declared dtype and shape; remove it`,
		`warmup/inputs/what: warmup.inputs: the task has no input field "what"`,
		"warmup/dims/L: warmup.dims: size -1 of L must be at least 1",
		"warmup/dims/N: warmup.dims: N is the batch dimension (batching.dim), whose warm-up sizes are the batch sizes the executor sends; remove it",
		"warmup/dims/T: warmup.dims: size 6 of T breaks the task's dims: it must be a multiple of 4",
		"warmup/dims/Z: warmup.dims: no input shape of the task has the dimension Z",
		`warmup: cannot build the warm-up inputs: field "extra": shape [N,*] has a dimension of any size (*), which a warm-up cannot choose; name it (and give its size under warmup.dims)`,
		`warmup: cannot build the warm-up inputs: field "mode" is required and has no default; give it a value under warmup.inputs (or a default)`,
		`warmup: cannot build the warm-up inputs: field "pics": declare its dtype, so that a warm-up tensor can be made`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
