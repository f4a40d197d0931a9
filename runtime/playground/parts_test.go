package playground

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// A dict or tuple field is one page field per part, named as the part
// travels (features.a, pair.0), labelled with the part, with the part's
// presence.
func TestDescribeParts(t *testing.T) {
	s := &spec.ModelInferenceSpec{ModelFamilyID: "parts", Variants: []spec.InferenceVariantSpec{{VariantID: "v"}},
		Tasks: []spec.InferenceTaskProfile{{TaskID: "forward", Inputs: []spec.InferenceFieldSpec{
			{FieldID: "x", Kind: spec.KindTensor, Required: true},
			{FieldID: "features", Label: "Features", Kind: spec.KindTensorDict, Required: true, Fields: []spec.ArtifactFieldSpec{{Name: "a", Required: true}, {Name: "b"}}},
			{FieldID: "pair", Kind: spec.KindTensorTuple, Fields: []spec.ArtifactFieldSpec{{Name: "l", Required: true}, {Name: "r", Required: true}}},
			{FieldID: "n", Kind: spec.KindInt, Default: int64(2)},
		}, Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "y", Kind: spec.ArtifactTensor, Required: true}}}}}
	fam, err := Describe(s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fam.Tasks[0].Inputs {
		got = append(got, f.Name+"|"+f.Label+"|"+string(f.Kind)+"|"+f.Presence)
	}
	want := "x|x|tensor|required features.a|Features a|tensor_dict|required features.b|Features b|tensor_dict|optional pair.0|pair 0|tensor_tuple|optional pair.1|pair 1|tensor_tuple|optional n|n|int|defaulted"
	if strings.Join(got, " ") != want {
		t.Errorf("inputs\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
}
