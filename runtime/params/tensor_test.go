package params

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func shape(dims ...string) spec.Shape {
	s := make(spec.Shape, len(dims))
	for i, d := range dims {
		s[i] = spec.Dim(d)
	}
	return s
}

func zeros(dt tensor.DType, dims ...int64) *tensor.Tensor {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return &tensor.Tensor{DType: dt, Shape: dims, Data: make([]byte, n*int64(dt.Size()))}
}

// The tensor contract of a task: every mismatch is one clear violation
// naming the field, found before anything runs.
func TestTensorContracts(t *testing.T) {
	eight := int64(8)
	task := &spec.InferenceTaskProfile{
		TaskID:   "t",
		Batching: &spec.BatchingSpec{MaxBatchSize: 4, Dim: "N"},
		Dims:     map[string]spec.DimSpec{"H": {MultipleOf: &eight}},
		Inputs: []spec.InferenceFieldSpec{
			{FieldID: "pixels", Kind: spec.KindImage, Target: spec.TargetCallKwargs, Required: true, DType: tensor.Float32, Shape: shape("N", "3", "H", "W")},
			{FieldID: "mask", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, DType: tensor.Bool, Shape: shape("N", "H", "W")},
			{FieldID: "extra", Kind: spec.KindTensorList, Target: spec.TargetCallKwargs, Shape: shape("*", "W")},
		},
	}
	r := MustCompile(task)
	check := func(pixels, mask *tensor.Tensor, extra ...*tensor.Tensor) []string {
		c := r.Check()
		Tensor(&c, 0, pixels)
		Tensor(&c, 1, mask)
		Tensors(&c, 2, extra)
		if err := c.Err(); err != nil {
			return strings.Split(err.Error(), "\n")
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"valid", check(zeros(tensor.Float32, 3, 64, 32), zeros(tensor.Bool, 64, 32), zeros(tensor.Uint8, 2, 32)), nil},
		{"wrong dtype", check(zeros(tensor.Int64, 3, 64, 32), nil),
			[]string{"pixels: want float32[3,H,W] (each item of [N,3,H,W]), got int64[3,64,32]"}},
		{"wrong rank", check(zeros(tensor.Float32, 1, 3, 64, 32), nil),
			[]string{"pixels: want float32[3,H,W] (each item of [N,3,H,W]), got float32[1,3,64,32]"}},
		{"fixed size", check(zeros(tensor.Float32, 4, 64, 32), nil),
			[]string{"pixels: want float32[3,H,W] (each item of [N,3,H,W]), got float32[4,64,32]"}},
		{"named dimension across fields", check(zeros(tensor.Float32, 3, 64, 32), zeros(tensor.Bool, 32, 32)),
			[]string{"mask: want bool[H,W] (each item of [N,H,W]), got bool[32,32]: H is 32 here but 64 in pixels"}},
		{"named dimension across list items", check(zeros(tensor.Float32, 3, 64, 32), nil, zeros(tensor.Uint8, 1, 32), zeros(tensor.Uint8, 1, 16)),
			[]string{"extra[1]: want tensor[*,W], got uint8[1,16]: W is 16 here but 32 in pixels"}},
		{"dimension constraint", check(zeros(tensor.Float32, 3, 60, 32), nil),
			[]string{"pixels: dimension H is 60, but it must be a multiple of 8"}},
	} {
		if d := cmp.Diff(tc.want, tc.got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

// Declared outputs are matched as written, batch dimension included.
func TestOutputContracts(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "embedding", Kind: spec.ArtifactEmbedding, DType: tensor.Float32, Shape: shape("N", "64")},
		{ArtifactID: "logits", Kind: spec.ArtifactTensor, Shape: shape("N", "10")},
		{ArtifactID: "caption", Kind: spec.ArtifactText},
	}}
	r := CompileOutputs(task)
	if err := r.Check(map[string]any{"embedding": zeros(tensor.Float32, 2, 64), "logits": zeros(tensor.Float32, 2, 10), "caption": "x"}); err != nil {
		t.Errorf("valid outputs: %v", err)
	}
	err := r.Check(map[string]any{"embedding": zeros(tensor.Float32, 2, 64), "logits": zeros(tensor.Float32, 3, 10)})
	want := `the model's output does not match the manifest: artifact "logits": want tensor[N,10], got float32[3,10]: N is 3 here but 2 in "embedding"`
	if err == nil || err.Error() != want || !errors.Is(err, ErrOutputContract) {
		t.Errorf("Check = %v\nwant %s", err, want)
	}
	err = r.Check(map[string]any{"embedding": zeros(tensor.Float32, 2, 32)})
	want = `the model's output does not match the manifest: artifact "embedding": want float32[N,64], got float32[2,32]`
	if err == nil || err.Error() != want || !errors.Is(err, ErrOutputContract) {
		t.Errorf("Check = %v\nwant %s", err, want)
	}
}

// A record's keys are matched by their fields' contracts; each dict of a
// record_list binds its own named dimensions (K detections per image),
// while a dimension bound by another artifact holds in every dict.
func TestOutputContractsRecords(t *testing.T) {
	fields := []spec.ArtifactFieldSpec{
		{Name: "boxes", DType: tensor.Float32, Shape: shape("K", "4")},
		{Name: "labels", DType: tensor.Int64, Shape: shape("K")},
		{Name: "scores", Shape: shape("K")},
	}
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "features", Kind: spec.ArtifactTensor, Shape: shape("C")},
		{ArtifactID: "detections", Kind: spec.ArtifactRecordList, Fields: fields},
		{ArtifactID: "first", Kind: spec.ArtifactRecord, Fields: []spec.ArtifactFieldSpec{{Name: "mask", Shape: shape("C", "*")}}},
	}}
	r := CompileOutputs(task)
	det := func(k int64, labels tensor.DType) map[string]any {
		return map[string]any{"boxes": zeros(tensor.Float32, k, 4), "labels": zeros(labels, k), "scores": zeros(tensor.Float32, k), "extra": "ignored"}
	}
	ok := map[string]any{
		"features":   zeros(tensor.Float32, 3),
		"detections": []any{det(2, tensor.Int64), det(5, tensor.Int64), map[string]any{}},
		"first":      map[string]any{"mask": zeros(tensor.Uint8, 3, 7)},
	}
	if err := r.Check(ok); err != nil {
		t.Errorf("valid outputs: %v", err)
	}
	for _, tc := range []struct {
		name string
		out  map[string]any
		want string
	}{
		{"a dtype in the second dict", map[string]any{"detections": []any{det(2, tensor.Int64), det(5, tensor.Int32)}},
			`artifact "detections"[1] key "labels": want int64[K], got int32[5]`},
		{"a dimension within one dict", map[string]any{"detections": []any{map[string]any{"boxes": zeros(tensor.Float32, 2, 4), "scores": zeros(tensor.Float32, 3)}}},
			`artifact "detections"[0] key "scores": want tensor[K], got float32[3]: K is 3 here but 2 in "detections"[0] key "boxes"`},
		{"a dimension bound by another artifact", map[string]any{"features": zeros(tensor.Float32, 3), "first": map[string]any{"mask": zeros(tensor.Uint8, 4, 7)}},
			`artifact "first" key "mask": want tensor[C,*], got uint8[4,7]: C is 4 here but 3 in "features"`},
	} {
		err := r.Check(tc.out)
		if want := "the model's output does not match the manifest: " + tc.want; err == nil || err.Error() != want || !errors.Is(err, ErrOutputContract) {
			t.Errorf("%s: Check = %v\nwant %s", tc.name, err, want)
		}
	}
}
