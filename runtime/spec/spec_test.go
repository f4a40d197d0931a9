package spec

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// specFixture is a small family with two variants and two tasks.
func specFixture() *ModelInferenceSpec {
	return &ModelInferenceSpec{
		ModelFamilyID:    "fixture",
		DisplayName:      "Fixture",
		DefaultVariantID: "base",
		DefaultTaskID:    "generate",
		Variants: []InferenceVariantSpec{
			{VariantID: "base", Label: "Base", Aliases: []string{"b"}, Checkpoints: []InferenceCheckpointRef{
				{Role: "vae", URI: "vae.pt", Required: true, Status: "unknown"},
				{Role: "model", URI: "model.pt", Required: true, Status: "available"},
			}},
			{VariantID: "large", Label: "Large", Aliases: []string{"l", "xl"}},
		},
		Tasks: []InferenceTaskProfile{
			{TaskID: "generate", Label: "Generate", Aliases: []string{"t2v"},
				Inputs:  []InferenceFieldSpec{{FieldID: "prompt", Kind: KindString, Target: TargetCallKwargs}},
				Outputs: []InferenceArtifactSpec{{ArtifactID: "video", Kind: ArtifactVideo}}},
			{TaskID: "step", Method: "step", Stream: true},
		},
	}
}

func TestVariantLookup(t *testing.T) {
	s := specFixture()
	for id, want := range map[string]string{"": "base", "base": "base", "b": "base", "large": "large", "xl": "large"} {
		v, err := s.Variant(id)
		if err != nil || v.VariantID != want {
			t.Errorf("Variant(%q) = %v, %v; want %s", id, v, err, want)
		}
	}
	// The result points into the spec.
	if v, _ := s.Variant("large"); v != &s.Variants[1] {
		t.Error("Variant returns a copy")
	}
	_, err := s.Variant("huge")
	if !errors.Is(err, ErrUnknownID) {
		t.Fatalf("Variant(huge) error = %v, want ErrUnknownID", err)
	}
	for _, part := range []string{`"fixture"`, `"huge"`, "base", "large"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s", err, part)
		}
	}
	// A default that names no variant is an error too.
	s.DefaultVariantID = "gone"
	if _, err := s.Variant(""); !errors.Is(err, ErrUnknownID) {
		t.Errorf("Variant(\"\") with a missing default = %v", err)
	}
}

func TestIDWinsOverAlias(t *testing.T) {
	s := specFixture()
	// An alias equal to another variant's id (which validation forbids)
	// never hides that variant.
	s.Variants[1].Aliases = append(s.Variants[1].Aliases, "base")
	if v, err := s.Variant("base"); err != nil || v.VariantID != "base" {
		t.Errorf("Variant(base) = %v, %v", v, err)
	}
	s.Tasks[1].Aliases = []string{"generate"}
	if tk, err := s.Task("generate"); err != nil || tk.TaskID != "generate" {
		t.Errorf("Task(generate) = %v, %v", tk, err)
	}
}

func TestTaskLookup(t *testing.T) {
	s := specFixture()
	for id, want := range map[string]string{"": "generate", "t2v": "generate", "step": "step"} {
		tk, err := s.Task(id)
		if err != nil || tk.TaskID != want {
			t.Errorf("Task(%q) = %v, %v; want %s", id, tk, err, want)
		}
	}
	_, err := s.Task("nope")
	if !errors.Is(err, ErrUnknownID) || !strings.Contains(err.Error(), "generate, step") {
		t.Errorf("Task(nope) error = %v", err)
	}
	gen, _ := s.Task("")
	if gen.MethodName() != DefaultMethod || DefaultMethod != "forward" {
		t.Errorf("default method = %q", gen.MethodName())
	}
	if st, _ := s.Task("step"); st.MethodName() != "step" {
		t.Errorf("step method = %q", st.MethodName())
	}
	if f, ok := gen.Field("prompt"); !ok || f != &gen.Inputs[0] {
		t.Error("Field(prompt) not found")
	}
	if _, ok := gen.Field("seed"); ok {
		t.Error("Field(seed) found")
	}
	if a, ok := gen.Artifact("video"); !ok || a.Kind != ArtifactVideo {
		t.Error("Artifact(video) not found")
	}
	if _, ok := gen.Artifact("audio"); ok {
		t.Error("Artifact(audio) found")
	}
}

func TestCheckpoints(t *testing.T) {
	s := specFixture()
	base, large := &s.Variants[0], &s.Variants[1]
	if got := base.PrimaryCheckpointURI(); got != "model.pt" {
		t.Errorf("PrimaryCheckpointURI = %q, want the model role's", got)
	}
	if got := large.PrimaryCheckpointURI(); got != "" {
		t.Errorf("PrimaryCheckpointURI without checkpoints = %q", got)
	}
	large.Checkpoints = []InferenceCheckpointRef{{Role: "weights", URI: "w.pt"}, {Role: "vae", URI: "v.pt"}}
	if got := large.PrimaryCheckpointURI(); got != "w.pt" {
		t.Errorf("PrimaryCheckpointURI without a model role = %q, want the first", got)
	}
	if got := base.CheckpointMap(); !reflect.DeepEqual(got, map[string]string{"vae": "vae.pt", "model": "model.pt"}) {
		t.Errorf("CheckpointMap = %v", got)
	}
}

// TestPrimaryCheckpointIsTheModelRole pins a noticed difference
// (docs/differences.md): the primary checkpoint is the one with role
// "model", else the first — not the seed's role primary, base or
// checkpoint.
func TestPrimaryCheckpointIsTheModelRole(t *testing.T) {
	for _, c := range []struct {
		roles []string
		want  string
	}{
		{[]string{"primary", "model"}, "model.pt"},
		{[]string{"vae", "checkpoint"}, "vae.pt"},
		{[]string{"base", "primary"}, "base.pt"},
		{[]string{"text_encoder", "base"}, "text_encoder.pt"},
	} {
		v := InferenceVariantSpec{VariantID: "v"}
		for _, r := range c.roles {
			v.Checkpoints = append(v.Checkpoints, InferenceCheckpointRef{Role: r, URI: r + ".pt"})
		}
		if got := v.PrimaryCheckpointURI(); got != c.want {
			t.Errorf("roles %v: primary %q, want %q", c.roles, got, c.want)
		}
	}
}

// TestIDLookupIsExact pins a noticed difference (docs/differences.md):
// Variant and Task match ids and aliases exactly, where the seed
// normalises case, surrounding spaces and '_' for '-'.
func TestIDLookupIsExact(t *testing.T) {
	s := specFixture()
	s.Tasks[0].Aliases = append(s.Tasks[0].Aliases, "text-to-video")
	for _, id := range []string{"BASE", " base", "base ", "Large", "X-L"} {
		if v, err := s.Variant(id); !errors.Is(err, ErrUnknownID) {
			t.Errorf("Variant(%q) = %v, %v; want ErrUnknownID", id, v, err)
		}
	}
	for _, id := range []string{"Generate", "T2V", "text_to_video", " step"} {
		if tk, err := s.Task(id); !errors.Is(err, ErrUnknownID) {
			t.Errorf("Task(%q) = %v, %v; want ErrUnknownID", id, tk, err)
		}
	}
	if tk, err := s.Task("text-to-video"); err != nil || tk.TaskID != "generate" {
		t.Errorf("Task(text-to-video) = %v, %v", tk, err)
	}
}

// TestJSONDefaults checks that decoding applies the seed's defaults to
// absent keys and keeps given values.
func TestJSONDefaults(t *testing.T) {
	var s ModelInferenceSpec
	src := `{"model_family_id": "f", "variants": [{"variant_id": "v", "checkpoints": [{"role": "model", "uri": "m.pt"}]}],
		"tasks": [{"task_id": "t", "inputs": [{"field_id": "x"}, {"field_id": "y", "kind": "int", "target": "load_kwargs"}]}]}`
	if err := json.Unmarshal([]byte(src), &s); err != nil {
		t.Fatal(err)
	}
	if s.DefaultVariantID != "default" || s.DefaultTaskID != "default" {
		t.Errorf("default ids = %q, %q", s.DefaultVariantID, s.DefaultTaskID)
	}
	if s.Variants[0].Status != "unknown" {
		t.Errorf("variant status = %q", s.Variants[0].Status)
	}
	if c := s.Variants[0].Checkpoints[0]; !c.Required || c.Status != "unknown" {
		t.Errorf("checkpoint defaults = %+v", c)
	}
	x, y := s.Tasks[0].Inputs[0], s.Tasks[0].Inputs[1]
	if x.Kind != KindString || x.Target != TargetCallKwargs {
		t.Errorf("field defaults = %+v", x)
	}
	if y.Kind != KindInt || y.Target != TargetLoadKwargs {
		t.Errorf("given field values = %+v", y)
	}
	var c InferenceCheckpointRef
	if err := json.Unmarshal([]byte(`{"role": "model", "uri": "m", "required": false, "status": "available"}`), &c); err != nil || c.Required || c.Status != "available" {
		t.Errorf("explicit checkpoint values = %+v, %v", c, err)
	}
	if err := json.Unmarshal([]byte(`{"model_family_id": 3}`), &s); err == nil {
		t.Error("a wrong-typed family id decoded")
	}
}

// seedKeys are the keys of the seed's to_dict for each type.
var seedKeys = map[string][]string{
	"spec":       {"model_family_id", "display_name", "variants", "tasks", "default_variant_id", "default_task_id", "aliases", "notes"},
	"variant":    {"variant_id", "label", "checkpoints", "status", "load_kwargs", "call_kwargs", "aliases", "notes"},
	"checkpoint": {"role", "uri", "required", "status"},
	"task":       {"task_id", "label", "inputs", "outputs", "description", "default_call_kwargs", "aliases"},
	"field":      {"field_id", "label", "kind", "target", "required", "default", "choices", "description"},
	"artifact":   {"artifact_id", "kind", "required", "preview", "description"},
}

func hasKeys(t *testing.T, what string, m map[string]any) {
	t.Helper()
	for _, k := range seedKeys[what] {
		if _, ok := m[k]; !ok {
			var have []string
			for h := range m {
				have = append(have, h)
			}
			sort.Strings(have)
			t.Errorf("%s dict lacks the seed key %q (has %v)", what, k, have)
		}
	}
}

// TestToDict checks the JSON form: every seed key is present, the spec's
// extensions are left out when unset, and the form decodes back to the
// same spec.
func TestToDict(t *testing.T) {
	s := specFixture()
	s.Tasks[0].Inputs[0].Default = "a cat"
	s.Tasks[0].Inputs[0].Choices = []string{"a cat", "a dog"}
	d, err := s.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	hasKeys(t, "spec", d)
	v := d["variants"].([]any)[0].(map[string]any)
	hasKeys(t, "variant", v)
	hasKeys(t, "checkpoint", v["checkpoints"].([]any)[0].(map[string]any))
	task := d["tasks"].([]any)[0].(map[string]any)
	hasKeys(t, "task", task)
	field := task["inputs"].([]any)[0].(map[string]any)
	hasKeys(t, "field", field)
	hasKeys(t, "artifact", task["outputs"].([]any)[0].(map[string]any))
	if field["default"] != "a cat" || !reflect.DeepEqual(field["choices"], []any{"a cat", "a dog"}) {
		t.Errorf("field dict = %v", field)
	}
	for _, k := range []string{"realtime", "go_package", "deprecated", "supports_stream"} {
		if _, ok := d[k]; ok {
			t.Errorf("unset extension %q is in the dict", k)
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back ModelInferenceSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// to_dict gives [] and {} for empty lists and maps; they decode as
	// empty, not nil, which is the same spec; and the seed's default for
	// an empty status, which means the same.
	for i := range s.Variants {
		if s.Variants[i].Status == "" {
			s.Variants[i].Status = StatusUnknown
		}
	}
	if d := cmp.Diff(s, &back, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("round trip differs (-want +got):\n%s", d)
	}
}

func TestKindLists(t *testing.T) {
	if len(FieldKinds) != 14 || !slices.Contains(FieldKinds, KindTensorList) || !slices.Contains(FieldKinds, KindTensorDict) || !slices.Contains(FieldKinds, KindTensorTuple) || !slices.Contains(FieldKinds, KindString) {
		t.Errorf("FieldKinds = %v", FieldKinds)
	}
	if len(ArtifactKinds) != 9 || !slices.Contains(ArtifactKinds, ArtifactRecordList) || !slices.Contains(ArtifactKinds, ArtifactEmbedding) || !slices.Contains(ArtifactKinds, ArtifactTensorList) {
		t.Errorf("ArtifactKinds = %v", ArtifactKinds)
	}
}

func TestToDictGivesEmptyListsAndMapsNotNull(t *testing.T) {
	s := GenericModelInferenceSpec("fam", GenericHints{})
	s.Tasks[0].Inputs = []InferenceFieldSpec{{FieldID: "x", Kind: KindString, Target: TargetCallKwargs}}
	d, err := s.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := d["aliases"].([]any); !ok || len(got) != 0 {
		t.Errorf("aliases = %#v, want []", d["aliases"])
	}
	v := d["variants"].([]any)[0].(map[string]any)
	if got, ok := v["checkpoints"].([]any); !ok || len(got) != 0 {
		t.Errorf("checkpoints = %#v, want []", v["checkpoints"])
	}
	task := d["tasks"].([]any)[0].(map[string]any)
	if got, ok := task["default_call_kwargs"].(map[string]any); !ok || len(got) != 0 {
		t.Errorf("default_call_kwargs = %#v, want {}", task["default_call_kwargs"])
	}
	f := task["inputs"].([]any)[0].(map[string]any)
	if got, ok := f["choices"].([]any); !ok || len(got) != 0 {
		t.Errorf("choices = %#v, want []", f["choices"])
	}
	if f["default"] != nil {
		t.Errorf("default = %#v, want null", f["default"])
	}
}

func TestVideoFPS(t *testing.T) {
	withFPS := &InferenceArtifactSpec{ArtifactID: "v", Kind: ArtifactVideo, FPS: 5}
	without := &InferenceArtifactSpec{ArtifactID: "w", Kind: ArtifactVideo}
	family := &ModelInferenceSpec{Realtime: &RealtimeSpec{FPS: 25}}
	bare := &ModelInferenceSpec{}
	for _, tc := range []struct {
		spec *ModelInferenceSpec
		a    *InferenceArtifactSpec
		want int
	}{
		{family, withFPS, 5}, {bare, withFPS, 5},
		{family, without, 25}, {bare, without, DefaultVideoFPS},
		{&ModelInferenceSpec{Realtime: &RealtimeSpec{}}, without, DefaultVideoFPS},
		{nil, nil, DefaultVideoFPS},
	} {
		if got := tc.spec.VideoFPS(tc.a); got != tc.want {
			t.Errorf("VideoFPS(%+v) with %+v = %d, want %d", tc.a, tc.spec, got, tc.want)
		}
	}
	var s ModelInferenceSpec
	if err := json.Unmarshal([]byte(`{"tasks": [{"task_id": "t", "outputs": [{"artifact_id": "v", "kind": "video", "fps": 12}]}]}`), &s); err != nil {
		t.Fatal(err)
	}
	if got := s.VideoFPS(&s.Tasks[0].Outputs[0]); got != 12 {
		t.Errorf("decoded fps %d, want 12", got)
	}
	if ps := withFPS.FPSProblems(); ps != nil {
		t.Errorf("video with fps: %v", ps)
	}
	if ps := (&InferenceArtifactSpec{Kind: ArtifactImage, FPS: 5}).FPSProblems(); len(ps) != 1 || ps[0].Path != "fps" || !ps[0].Key ||
		ps[0].Message != "fps is the playback rate of a video artifact, and this artifact's kind is image: remove fps" {
		t.Errorf("image with fps: %v", ps)
	}
	if ps := (&InferenceArtifactSpec{Kind: ArtifactVideo, FPS: -2}).FPSProblems(); len(ps) != 1 || ps[0].Message != "fps -2 must be at least 1" {
		t.Errorf("negative fps: %v", ps)
	}
}

// TestPartToDict checks the to_dict of each sub-dataclass: the seed's keys,
// [] and {} for empty lists and maps, and exactly the dict the spec's own
// ToDict nests for that part.
func TestPartToDict(t *testing.T) {
	s := specFixture()
	s.Tasks[0].Inputs[0].Default = "a cat"
	whole, err := s.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	v0 := whole["variants"].([]any)[0].(map[string]any)
	task0 := whole["tasks"].([]any)[0].(map[string]any)
	parts := []struct {
		what string
		dict func() (map[string]any, error)
		want map[string]any
	}{
		{"variant", s.Variants[0].ToDict, v0},
		{"checkpoint", s.Variants[0].Checkpoints[1].ToDict, v0["checkpoints"].([]any)[1].(map[string]any)},
		{"task", s.Tasks[0].ToDict, task0},
		{"field", s.Tasks[0].Inputs[0].ToDict, task0["inputs"].([]any)[0].(map[string]any)},
		{"artifact", s.Tasks[0].Outputs[0].ToDict, task0["outputs"].([]any)[0].(map[string]any)},
	}
	for _, p := range parts {
		d, err := p.dict()
		if err != nil {
			t.Fatalf("%s: %v", p.what, err)
		}
		hasKeys(t, p.what, d)
		if diff := cmp.Diff(p.want, d); diff != "" {
			t.Errorf("%s.ToDict differs from the part of the spec's dict (-spec +part):\n%s", p.what, diff)
		}
	}

	// Parts built in Go with nil lists and maps give [] and {}, as the seed's
	// to_dict does, and a field keeps its null default.
	empty := map[string]func() (map[string]any, error){
		"variant":    (&InferenceVariantSpec{VariantID: "v", Checkpoints: []InferenceCheckpointRef{{Role: "model", URI: "m.pt"}}}).ToDict,
		"checkpoint": (&InferenceCheckpointRef{Role: "model", URI: "m.pt"}).ToDict,
		"task":       (&InferenceTaskProfile{TaskID: "t"}).ToDict,
		"field":      (&InferenceFieldSpec{FieldID: "f"}).ToDict,
		"artifact":   (&InferenceArtifactSpec{ArtifactID: "a", Kind: ArtifactJSON}).ToDict,
	}
	wantEmpty := map[string]map[string]any{
		"variant": {"load_kwargs": map[string]any{}, "call_kwargs": map[string]any{}, "aliases": []any{}, "notes": []any{}},
		"task":    {"inputs": []any{}, "outputs": []any{}, "default_call_kwargs": map[string]any{}, "aliases": []any{}},
		"field":   {"choices": []any{}, "default": nil},
	}
	for what, f := range empty {
		d, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		hasKeys(t, what, d)
		// Nothing else: a part set only where the seed has keys gives the
		// seed's keys alone — no derived model_ref or checkpoint_map in a
		// variant's dict (docs/differences.md).
		if keys := slices.Sorted(maps.Keys(d)); !slices.Equal(keys, slices.Sorted(slices.Values(seedKeys[what]))) {
			t.Errorf("%s dict keys %v, want exactly the seed's %v", what, keys, seedKeys[what])
		}
		for k, want := range wantEmpty[what] {
			if got, ok := d[k]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s dict %q = %#v, want %#v", what, k, got, want)
			}
		}
	}
}

// A variant's op_libraries replace the family's when the key is set, an
// empty list included; absent, the family's apply.
func TestOpLibrariesFor(t *testing.T) {
	s := &ModelInferenceSpec{OpLibraries: []string{"family.so"}}
	for _, tc := range []struct {
		v    *InferenceVariantSpec
		want []string
	}{
		{nil, []string{"family.so"}},
		{&InferenceVariantSpec{}, []string{"family.so"}},
		{&InferenceVariantSpec{OpLibraries: []string{"variant.so"}}, []string{"variant.so"}},
		{&InferenceVariantSpec{OpLibraries: []string{}}, []string{}},
	} {
		if got := s.OpLibrariesFor(tc.v); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("OpLibrariesFor(%+v) = %#v, want %#v", tc.v, got, tc.want)
		}
	}
	var none *ModelInferenceSpec
	if got := none.OpLibrariesFor(nil); got != nil {
		t.Errorf("a nil spec: %v", got)
	}
	// The empty list survives JSON, so a variant's override does.
	var v InferenceVariantSpec
	if err := json.Unmarshal([]byte(`{"variant_id":"x","op_libraries":[]}`), &v); err != nil || v.OpLibraries == nil {
		t.Fatalf("decoded %#v, %v", v.OpLibraries, err)
	}
	b, err := json.Marshal(&v)
	if err != nil || !strings.Contains(string(b), `"op_libraries":[]`) {
		t.Errorf("encoded %s, %v", b, err)
	}
	if b, _ := json.Marshal(&InferenceVariantSpec{}); strings.Contains(string(b), "op_libraries") {
		t.Errorf("an unset key is written: %s", b)
	}
}
