package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBatchSizeProblems(t *testing.T) {
	for _, tc := range []struct {
		max  int
		pads []int
		want []Problem
	}{
		{8, nil, nil},
		{8, []int{1, 2, 4, 8}, nil},
		{1, []int{1}, nil},
		{5, []int{1, 16}, []Problem{
			{Path: "pad_to_batch_sizes/1", Message: "pad_to_batch_sizes entry 16 exceeds max_batch_size 5"},
		}},
		{8, []int{8, 4, 2}, []Problem{
			{Path: "pad_to_batch_sizes/1", Message: "pad_to_batch_sizes must be strictly increasing (4 follows 8)"},
			{Path: "pad_to_batch_sizes/2", Message: "pad_to_batch_sizes must be strictly increasing (2 follows 8)"},
		}},
		{4, []int{1, 2, 2, 4}, []Problem{
			{Path: "pad_to_batch_sizes/2", Message: "pad_to_batch_sizes must be strictly increasing (2 follows 2)"},
		}},
		{8, []int{0, 4}, []Problem{
			{Path: "pad_to_batch_sizes/0", Message: "pad_to_batch_sizes entry 0 must be at least 1"},
			{Path: "pad_to_batch_sizes", Message: "the largest of pad_to_batch_sizes is 4, but max_batch_size is 8; end the list with 8 so every batch has a static size"},
		}},
		{0, []int{2, 4}, []Problem{
			{Path: "max_batch_size", Message: "max_batch_size 0 must be at least 1"},
		}},
	} {
		got := BatchSizeProblems(tc.max, tc.pads)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("BatchSizeProblems(%d, %v) (-want +got):\n%s", tc.max, tc.pads, diff)
		}
	}
}

func TestBatchingProblems(t *testing.T) {
	field := func(id string, kind Kind, required bool) InferenceFieldSpec {
		return InferenceFieldSpec{FieldID: id, Kind: kind, Target: TargetCallKwargs, Required: required}
	}
	noTensor := []Problem{{Path: "batching", Key: true, Message: "batching stacks each item's tensor, image and video inputs into one call, but the task has no call_kwargs field of kind tensor, image or video (tensor_list values are not stacked), so all items would share one call; remove batching"}}
	for _, tc := range []struct {
		name string
		task InferenceTaskProfile
		want []Problem
	}{
		{"no batching", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("prompt", KindString, true)}}, nil},
		{"tensor", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("prompt", KindString, true), field("x", KindTensor, true)}}, nil},
		{"image", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("x", KindImage, true)}}, nil},
		{"video", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("x", KindVideo, true)}}, nil},
		{"no tensor", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("prompt", KindString, true), field("n", KindInt, false)}}, noTensor},
		{"tensor list", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("xs", KindTensorList, true)}}, noTensor},
		{"load_kwargs tensor", InferenceTaskProfile{Inputs: []InferenceFieldSpec{{FieldID: "x", Kind: KindTensor, Target: TargetLoadKwargs, Required: true}}}, noTensor},
		{"optional tensors", InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("x", KindTensor, false), field("y", KindImage, false)}}, []Problem{
			{Path: "batching", Key: true, Message: `batching stacks each item's tensor, image and video inputs into one call, but none of them is required ("x", "y"), so an item may bring nothing to stack; make one required or remove batching`},
		}},
		{"stream", InferenceTaskProfile{Stream: true, Inputs: []InferenceFieldSpec{field("x", KindTensor, true)}}, []Problem{
			{Path: "batching", Key: true, Message: "a stream task cannot be batched; remove batching or stream"},
		}},
	} {
		tc.task.TaskID = "t"
		if tc.name != "no batching" {
			tc.task.Batching = &BatchingSpec{MaxBatchSize: 4, PadToBatchSizes: []int{1, 2, 4}}
		}
		if diff := cmp.Diff(tc.want, tc.task.BatchingProblems()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	// Size problems are located under batching.
	task := InferenceTaskProfile{Inputs: []InferenceFieldSpec{field("x", KindTensor, true)}, Batching: &BatchingSpec{MaxBatchSize: 5, PadToBatchSizes: []int{1, 2, 4}}}
	want := []Problem{{Path: "batching/pad_to_batch_sizes", Message: "the largest of pad_to_batch_sizes is 4, but max_batch_size is 5; end the list with 5 so every batch has a static size"}}
	if diff := cmp.Diff(want, task.BatchingProblems()); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	if got, want := JoinProblems(append(noTensor, want...)), noTensor[0].Path+": "+noTensor[0].Message+"; "+want[0].Path+": "+want[0].Message; got != want {
		t.Errorf("JoinProblems = %q, want %q", got, want)
	}
}

// Every batched call checks its config with BatchSizeProblems: a config
// without a problem allocates nothing.
func TestBatchSizeProblemsNoProblemNoAllocation(t *testing.T) {
	pads := []int{1, 2, 4, 8}
	if n := testing.AllocsPerRun(100, func() {
		if ps := BatchSizeProblems(8, pads); ps != nil {
			t.Fatal(ps)
		}
	}); n != 0 {
		t.Errorf("BatchSizeProblems(8, %v) allocates %v times per call, want 0", pads, n)
	}
}
