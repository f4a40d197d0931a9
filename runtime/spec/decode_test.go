package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

// Decoding errors name the spec types and the path of the field from the
// decoded value, never the local copies the UnmarshalJSON methods decode
// into.
func TestDecodeErrorsNameTheSpecTypes(t *testing.T) {
	for _, tc := range []struct {
		into func() any
		json string
		want string
	}{
		{func() any { return new(ModelInferenceSpec) }, `{"model_family_id": 3}`,
			"json: cannot unmarshal number into Go struct field ModelInferenceSpec.model_family_id of type string"},
		{func() any { return new(ModelInferenceSpec) }, `{"variants": [{"variant_id": "a", "checkpoints": [{"role": "model", "uri": "x", "required": "yes"}]}]}`,
			"json: cannot unmarshal string into Go struct field ModelInferenceSpec.variants.checkpoints.required of type bool"},
		{func() any { return new(ModelInferenceSpec) }, `{"variants": [{"variant_id": "a", "checkpoints": [3]}]}`,
			"json: cannot unmarshal number into Go struct field ModelInferenceSpec.variants.checkpoints of type spec.InferenceCheckpointRef"},
		{func() any { return new(ModelInferenceSpec) }, `{"tasks": [{"task_id": "t", "inputs": [{"field_id": "x", "kind": 3}]}]}`,
			"json: cannot unmarshal number into Go struct field ModelInferenceSpec.tasks.inputs.kind of type spec.Kind"},
		{func() any { return new(ModelInferenceSpec) }, `{"tasks": [{"task_id": "t", "batching": {"max_batch_size": "x"}}]}`,
			"json: cannot unmarshal string into Go struct field ModelInferenceSpec.tasks.batching.max_batch_size of type int"},
		{func() any { return new(ModelInferenceSpec) }, `{"realtime": {"fps": "x"}}`,
			"json: cannot unmarshal string into Go struct field ModelInferenceSpec.realtime.fps of type int"},
		{func() any { return new(ModelInferenceSpec) }, `{"tasks": 3}`,
			"json: cannot unmarshal number into Go struct field ModelInferenceSpec.tasks of type []spec.InferenceTaskProfile"},
		{func() any { return new(InferenceVariantSpec) }, `{"variant_id": 5}`,
			"json: cannot unmarshal number into Go struct field InferenceVariantSpec.variant_id of type string"},
		{func() any { return new(InferenceFieldSpec) }, `[1]`,
			"json: cannot unmarshal array into Go value of type spec.InferenceFieldSpec"},
		{func() any { return new(RealtimeSpec) }, `"fast"`,
			"json: cannot unmarshal string into Go value of type spec.RealtimeSpec"},
	} {
		err := json.Unmarshal([]byte(tc.json), tc.into())
		// encoding/json writes the path from the decoded value in full up
		// to Go 1.26; Go 1.27 writes list indices into it, or only its last
		// field, or only the value's type: the spec type (or the value's)
		// and the field are what every version must get right.
		if err == nil || !sameMessage(err.Error(), tc.want) && !sameFacts(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.json, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "plain") {
			t.Errorf("%s: %v names the internal type", tc.json, err)
		}
	}
}

// sameMessage reports whether got is want, or want with the field path
// cut to its type and last field ("T.a.b.c" as "T.c").
func sameMessage(got, want string) bool {
	if got == want {
		return true
	}
	const field = "Go struct field "
	i := strings.Index(want, field)
	if i < 0 {
		return false
	}
	rest := want[i+len(field):]
	path, tail, _ := strings.Cut(rest, " ")
	parts := strings.Split(path, ".")
	short := parts[0] + "." + parts[len(parts)-1]
	return got == want[:i+len(field)]+short+" "+tail
}

// sameFacts reports whether got names what want names — the JSON value,
// the last field of the path and the Go type — whatever the path between.
func sameFacts(got, want string) bool {
	const field = "Go struct field "
	i := strings.Index(want, field)
	if i < 0 {
		return false
	}
	path, tail, _ := strings.Cut(want[i+len(field):], " ")
	parts := strings.Split(path, ".")
	value := want[:strings.Index(want, " into ")]
	return strings.HasPrefix(got, value) && strings.HasSuffix(got, strings.TrimPrefix(tail, "of ")) &&
		(strings.Contains(got, "."+parts[len(parts)-1]+" ") || strings.Contains(got, "Go value of type"))
}
