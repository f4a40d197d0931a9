package spec

import (
	"strings"
	"testing"
)

// The names of the wire mapping cannot collide: a record's keys have no
// '.' and are not all digits (ID.0 is a list element, ID.0.KEY a
// record_list's key), and no artifact id is the name of another
// artifact's part.
func TestOutputProblemsWireNames(t *testing.T) {
	task := &InferenceTaskProfile{TaskID: "t", Outputs: []InferenceArtifactSpec{
		{ArtifactID: "det", Kind: ArtifactRecordList, Fields: []ArtifactFieldSpec{
			{Name: "boxes"}, {Name: "0"}, {Name: "a.b"}, {Name: "x2"}, {Name: "1e3"}, {Name: "count"}}},
		{ArtifactID: "det.0", Kind: ArtifactTensor},
		{ArtifactID: "parts", Kind: ArtifactTensorList},
		{ArtifactID: "parts.count", Kind: ArtifactTensor},
		{ArtifactID: "total", Kind: ArtifactTensor},
		{ArtifactID: "total.x", Kind: ArtifactTensor},
	}}
	var got []string
	for _, p := range task.OutputProblems() {
		got = append(got, p.Path+": "+p.Message)
	}
	want := []string{
		`outputs/0/fields/1/name: artifact "det": key "0": on the wire a key is a part`,
		`outputs/0/fields/2/name: artifact "det": key "a.b": on the wire a key is a part`,
		`outputs/1/artifact_id: artifact "det.0": on the wire, the record_list artifact "det" travels as outputs named det.*`,
		`outputs/3/artifact_id: artifact "parts.count": on the wire, the tensor_list artifact "parts" travels as outputs named parts.*`,
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d: %s\nwant %s...", i, got[i], want[i])
		}
	}
}
