package client

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/spec"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

type mode string

func TestMergeKwargsPrecedenceAndForms(t *testing.T) {
	t.Parallel()
	n := int64(7)
	var unset *float64
	tensor := wftensor.FromFloat32([]float32{1, 2}, 2)
	got, err := MergeKwargs(
		map[string]any{"steps": 10, "mode": "a", "keep": true},
		map[string]any{"steps": int32(20), "scale": float32(1.5)},
		map[string]any{"steps": &n, "mode": mode("b"), "scale": unset, "ids": []int{1, 2}, "x": tensor},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"steps": int64(7), "mode": "b", "keep": true, "ids": []any{int64(1), int64(2)}, "x": tensor}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("merge (-want +got):\n%s", d)
	}
	if _, err := MergeKwargs(map[string]any{"f": func() {}}); err == nil || !strings.Contains(err.Error(), `kwarg "f"`) {
		t.Fatalf("func value: %v", err)
	}
	bad := &wftensor.Tensor{DType: wftensor.Float32, Shape: []int64{3}, Data: make([]byte, 4)}
	if _, err := MergeKwargs(map[string]any{"t": bad}); err == nil || !strings.Contains(err.Error(), "needs 12 bytes") {
		t.Fatalf("malformed tensor: %v", err)
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	one := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "video", Kind: "video", Required: true}}}
	two := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "video", Kind: "video", Required: true}, {ArtifactID: "caption", Kind: "text"}}}

	got, err := Outputs(one, "x")
	if err != nil || got["video"] != "x" {
		t.Fatalf("single: %v %v", got, err)
	}
	if _, err := Outputs(two, "x"); err == nil || !strings.Contains(err.Error(), "declares 2 artifacts") {
		t.Fatalf("single value for two artifacts: %v", err)
	}
	got, err = Outputs(two, map[string]any{"video": "v", "extra": 1})
	if err != nil || len(got) != 1 || got["video"] != "v" {
		t.Fatalf("dict: %v %v", got, err)
	}
	_, err = Outputs(two, map[string]any{"caption": "c"})
	if err == nil || !strings.Contains(err.Error(), "required artifact(s) [video]") || !strings.Contains(err.Error(), "[caption]") {
		t.Fatalf("missing required: %v", err)
	}
}

// A nested tuple's elements are artifacts at their paths
// (contract.TuplePaths); a None tuple on the way leaves its artifacts
// missing, an error for a required one; a value that is no tuple where
// the path goes on is an error naming where.
func TestTupleOutputsNested(t *testing.T) {
	t.Parallel()
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "hidden", Kind: "tensor", Required: true}, {ArtifactID: "pooled", Kind: "tensor"}, {ArtifactID: "attention", Kind: "tensor"}}}
	paths := [][]int{{0}, {1, 0}, {1, 1}}
	got, err := outputs(task, []any{"h", []any{"p", "a"}}, paths)
	if err != nil || got["hidden"] != "h" || got["pooled"] != "p" || got["attention"] != "a" {
		t.Errorf("nested: %v %v", got, err)
	}
	got, err = outputs(task, []any{"h", nil}, paths)
	if err != nil || len(got) != 1 || got["hidden"] != "h" {
		t.Errorf("a None nested tuple: %v %v", got, err)
	}
	task.Outputs[1].Required = true
	if _, err := outputs(task, []any{"h", nil}, paths); err == nil || !strings.Contains(err.Error(), "required artifact(s) [pooled]") {
		t.Errorf("a None nested tuple holding a required artifact: %v", err)
	}
	if _, err := outputs(task, []any{"h", "p"}, paths); err == nil || !strings.Contains(err.Error(), "at element [1] of its tuple") {
		t.Errorf("no tuple where the schema has one: %v", err)
	}
}
