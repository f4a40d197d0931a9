package namingcase

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration).

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNamesAndKeys pins the Go names the naming rules give odd ids (the
// test does not compile if one changes) and checks that JSON keys stay the
// manifest's field ids.
func TestNamesAndKeys(t *testing.T) {
	vs := []Variant{Variant3D, Variant1_3B, VariantGroU00DFE}
	ts := []Task{TaskType, TaskT2V, TaskU540DU524D, Task3D}
	if !cmp.Equal(vs, Variants()) || !cmp.Equal(ts, Tasks()) {
		t.Errorf("Variants() = %v, Tasks() = %v", Variants(), Tasks())
	}
	p := TypeParams{Func: "f", Range: 2, Go: true, X2NdPass: true, ModelID: "m", ImageURL: "u", TargetFPS: 30,
		RGBMean: []float64{1}, HTTPAPIJSON: "{}", UserIDs: []int64{1}, UserID: "x", NumSteps: 1, NumStepsAlt: 2}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"func":"f","range":2,"go":true,"_2nd_pass":true,"model_id":"m","image_url":"u","target_fps":30,` +
		`"rgb_mean":[1],"http_api_json":"{}","user_ids":[1],"userId":"x","num_steps":1,"numSteps":2}`
	if string(b) != want {
		t.Errorf("JSON = %s\nwant   %s", b, want)
	}
	var r TypeResult
	_ = r.RGB
	_ = r.OutputLink
	_ = r.GroU00DFE
	var u U540DU524DResult
	_ = u.U540DU524D
}
