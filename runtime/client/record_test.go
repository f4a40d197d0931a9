package client

import (
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// detection is the struct wfgen generates for a record_list artifact with
// the keys boxes, labels and scores.
type detection struct {
	Boxes, Labels, Scores *tensor.Tensor
}

var detectionsSpec = spec.InferenceArtifactSpec{ArtifactID: "detections", Kind: spec.ArtifactRecordList, Required: true, Fields: []spec.ArtifactFieldSpec{
	{Name: "boxes", Required: true}, {Name: "labels", Required: true}, {Name: "scores"},
}}

// A record_list becomes a slice of the struct holding the engine's own
// tensors (no copy); other keys are ignored, a missing optional key is
// nil, a missing required key an error naming it.
func TestDecodeRecordList(t *testing.T) {
	boxes, labels, scores := tensor.FromFloat32(make([]float32, 8), 2, 4), tensor.FromInt64([]int64{1, 2}, 2), tensor.FromFloat32([]float32{0.5, 0.25}, 2)
	out := map[string]any{"detections": []any{
		map[string]any{"boxes": boxes, "labels": labels, "scores": scores, "masks": "not a key of the manifest"},
		map[string]any{"labels": labels, "boxes": boxes},
	}}
	var got []detection
	if err := decodeArtifact(nil, &detectionsSpec, out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Boxes != boxes || got[0].Labels != labels || got[0].Scores != scores ||
		got[1].Boxes != boxes || got[1].Labels != labels || got[1].Scores != nil {
		t.Errorf("decoded %+v", got)
	}

	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"a missing required key", []any{map[string]any{"boxes": boxes, "labels": labels}, map[string]any{"scores": scores, "boxes": boxes}},
			`artifact "detections": element 1: required key(s) "labels" missing: the dict has the keys "boxes", "scores"`},
		{"no list", map[string]any{"boxes": boxes},
			`artifact "detections": want a list of dicts of tensors (List[Dict[str, Tensor]]), got map[string]interface {}`},
		{"no dict", []any{boxes},
			`artifact "detections": element 0: want a dict of tensors (Dict[str, Tensor]), got tensor float32[2 4]`},
		{"no tensor", []any{map[string]any{"boxes": int64(3), "labels": labels}},
			`artifact "detections": element 0: key "boxes": want a tensor, got`},
	} {
		var d []detection
		err := decodeArtifact(nil, &detectionsSpec, map[string]any{"detections": tc.v}, &d)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %s", tc.name, err, tc.want)
		}
	}
}

// A record becomes a pointer to the struct; an optional record the model
// did not return stays nil.
func TestDecodeRecord(t *testing.T) {
	a := spec.InferenceArtifactSpec{ArtifactID: "heads", Kind: spec.ArtifactRecord, Fields: []spec.ArtifactFieldSpec{{Name: "out", Required: true}, {Name: "aux"}}}
	type heads struct{ Out, Aux *tensor.Tensor }
	x := tensor.FromFloat32([]float32{1}, 1)
	var got *heads
	if err := decodeArtifact(nil, &a, map[string]any{"heads": map[string]any{"out": x}}, &got); err != nil || got == nil || got.Out != x || got.Aux != nil {
		t.Errorf("decoded %+v, %v", got, err)
	}
	got = nil
	if err := decodeArtifact(nil, &a, map[string]any{}, &got); err != nil || got != nil {
		t.Errorf("an optional record not returned: %+v, %v", got, err)
	}
	if err := recordType(&a, reflectTypeOf[[]heads]()); err == nil || !strings.Contains(err.Error(), "needs a ptr of a struct") {
		t.Errorf("recordType of a slice for a record: %v", err)
	}
	type short struct{ Out *tensor.Tensor }
	if err := recordType(&a, reflectTypeOf[*short]()); err == nil || !strings.Contains(err.Error(), "has 1 fields for the 2 keys") {
		t.Errorf("recordType of a struct missing a key: %v", err)
	}
}

// The only artifact of a task, a record, is the dict the method returns
// whole, not a dict keyed by artifact id.
func TestOutputsRecordReturned(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "out", Kind: spec.ArtifactRecord, Fields: []spec.ArtifactFieldSpec{{Name: "out"}}}}}
	x := tensor.FromFloat32([]float32{1}, 1)
	got, err := Outputs(task, map[string]any{"out": x})
	if m, ok := got["out"].(map[string]any); err != nil || !ok || m["out"] != x {
		t.Errorf("Outputs = %v, %v", got, err)
	}
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// detections is a detector's output for n images of k boxes each, as the
// engine returns it.
func detections(n, k int) map[string]any {
	list := make([]any, n)
	for i := range list {
		list[i] = map[string]any{
			"boxes":  tensor.FromFloat32(make([]float32, 4*k), int64(k), 4),
			"labels": tensor.FromInt64(make([]int64, k), int64(k)),
			"scores": tensor.FromFloat32(make([]float32, k), int64(k)),
		}
	}
	return map[string]any{"detections": list}
}

// Decoding a record_list allocates the slice of structs and nothing else:
// no tensor is copied, whatever the number of images and boxes.
func TestDecodeRecordListAllocs(t *testing.T) {
	out := detections(8, 300)
	var got []detection
	allocs := testing.AllocsPerRun(100, func() {
		if err := decodeArtifact(nil, &detectionsSpec, out, &got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("decoding 8 dicts: %.0f allocations, want 1 (the slice)", allocs)
	}
}

// BenchmarkDecodeRecordList decodes a detector's output for 8 images of 300
// boxes into the generated struct slice.
func BenchmarkDecodeRecordList(b *testing.B) {
	out := detections(8, 300)
	var got []detection
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeArtifact(nil, &detectionsSpec, out, &got); err != nil {
			b.Fatal(err)
		}
	}
}

// Records among other artifacts of a dict keyed by artifact id
// (Dict[str, Dict[str, Tensor]]) are that dict's values.
func TestOutputsRecordsByArtifactID(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "heads", Kind: spec.ArtifactRecord, Required: true, Fields: []spec.ArtifactFieldSpec{{Name: "out", Required: true}}},
		detectionsSpec,
	}}
	x := tensor.FromFloat32([]float32{1}, 1)
	raw := map[string]any{"heads": map[string]any{"out": x}, "detections": []any{map[string]any{"boxes": x, "labels": x}}}
	out, err := Outputs(task, raw)
	if err != nil {
		t.Fatal(err)
	}
	type heads struct{ Out *tensor.Tensor }
	var h *heads
	var d []detection
	if err := decodeArtifact(nil, &task.Outputs[0], out, &h); err != nil || h.Out != x {
		t.Errorf("heads: %+v, %v", h, err)
	}
	if err := decodeArtifact(nil, &task.Outputs[1], out, &d); err != nil || len(d) != 1 || d[0].Boxes != x || d[0].Scores != nil {
		t.Errorf("detections: %+v, %v", d, err)
	}
}

// An empty record_list is an empty slice, not nil: the model returned a
// list, of no dicts (as an empty tensor_list is an empty slice).
func TestDecodeRecordListEmpty(t *testing.T) {
	var got []detection
	if err := decodeArtifact(nil, &detectionsSpec, map[string]any{"detections": []any{}}, &got); err != nil || got == nil || len(got) != 0 {
		t.Errorf("decoded %#v (nil %v), %v; want an empty slice", got, got == nil, err)
	}
}
