package spec

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func family(id string, aliases ...string) *ModelInferenceSpec {
	s := GenericModelInferenceSpec(id, GenericHints{})
	s.Aliases = aliases
	return s
}

func TestRegistryRegisterGet(t *testing.T) {
	var r Registry // the zero value is ready
	if r.Get("a") != nil || len(r.List()) != 0 {
		t.Fatal("empty registry is not empty")
	}
	a := family("alpha", "a", "first")
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alpha", "a", "first"} {
		if r.Get(id) != a {
			t.Errorf("Get(%q) did not return the registered spec", id)
		}
	}
	if r.Get("beta") != nil {
		t.Error("Get(unregistered) is not nil")
	}
}

// TestRegistryConflicts checks that a taken id or alias is an error and
// that a failed registration changes nothing.
func TestRegistryConflicts(t *testing.T) {
	var r Registry
	a := family("alpha", "a")
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		spec *ModelInferenceSpec
		want string
	}{
		{family("alpha"), `name "alpha" is already taken by family "alpha"`},
		{family("beta", "a"), `name "a" is already taken by family "alpha"`},
		{family("a"), `name "a" is already taken by family "alpha"`},
		{family("gamma", "g", "g"), `name "g" given twice`},
		{family("delta", "delta"), `name "delta" given twice`},
		{nil, "without model_family_id"},
		{&ModelInferenceSpec{}, "without model_family_id"},
	}
	for _, c := range cases {
		err := r.Register(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Register(%v) = %v, want an error containing %q", c.spec, err, c.want)
		}
	}
	if r.Get("alpha") != a || r.Get("a") != a {
		t.Error("a failed registration replaced the first family")
	}
	for _, id := range []string{"beta", "gamma", "g", "delta"} {
		if r.Get(id) != nil {
			t.Errorf("a failed registration left %q behind", id)
		}
	}
	if len(r.List()) != 1 {
		t.Errorf("List = %v", r.List())
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a taken id did not panic")
		}
	}()
	r.MustRegister(family("alpha"))
}

func TestRegistryListSorted(t *testing.T) {
	var r Registry
	for _, id := range []string{"zeta", "alpha", "mu", "beta"} {
		r.MustRegister(family(id, id+"-alias"))
	}
	var ids []string
	for _, s := range r.List() {
		ids = append(ids, s.ModelFamilyID)
	}
	if want := []string{"alpha", "beta", "mu", "zeta"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("List = %v, want %v (sorted, aliases not repeated)", ids, want)
	}
}

func TestRegistrySpecFallback(t *testing.T) {
	var r Registry
	a := family("alpha", "a")
	r.MustRegister(a)
	if r.Spec("a", GenericHints{DisplayName: "ignored"}) != a {
		t.Error("Spec did not return the registered family")
	}
	g := r.Spec("unknown-model", GenericHints{WorkloadType: "video"})
	if g == nil || g.ModelFamilyID != "unknown-model" || g.WorkloadType != "video" {
		t.Errorf("Spec fallback = %+v", g)
	}
	// The fallback says it is one; a registered family is not one, even
	// when it was itself built generically and then registered under its
	// own notes.
	if !g.IsGenericFallback() || !slices.Contains(g.Notes, GenericFallbackNote) {
		t.Errorf("fallback notes = %q: it does not say it is a generic fallback", g.Notes)
	}
	curated := &ModelInferenceSpec{ModelFamilyID: "curated", Variants: a.Variants, Tasks: a.Tasks}
	r.MustRegister(curated)
	if got := r.Spec("curated", GenericHints{}); got != curated || got.IsGenericFallback() {
		t.Error("a curated family is reported as a generic fallback")
	}
	var nilSpec *ModelInferenceSpec
	if nilSpec.IsGenericFallback() {
		t.Error("a nil spec is a generic fallback")
	}
	if r.Get("unknown-model") != nil {
		t.Error("the generic fallback was registered")
	}
}

// TestGenericSpec follows the seed's example: hints become one default
// variant and one default task whose fields are the supported call params.
func TestGenericSpec(t *testing.T) {
	load := map[string]any{"dtype": "bf16"}
	call := map[string]any{"num_frames": 9}
	s := GenericModelInferenceSpec("my-world-model", GenericHints{
		DisplayName:         "My World Model",
		DefaultModelRef:     "org/my-world-model",
		DefaultLoadKwargs:   load,
		DefaultCallKwargs:   call,
		SupportsStream:      true,
		WorkloadType:        "video",
		SupportedCallParams: []string{"prompt", "seed", "num_frames"},
	})
	if s.ModelFamilyID != "my-world-model" || s.DisplayName != "My World Model" || !s.SupportsStream || s.WorkloadType != "video" {
		t.Errorf("header = %+v", s)
	}
	v, err := s.Variant("")
	if err != nil || v.VariantID != "default" {
		t.Fatalf("variant() = %v, %v", v, err)
	}
	if v.PrimaryCheckpointURI() != "org/my-world-model" || !reflect.DeepEqual(v.LoadKwargs, load) {
		t.Errorf("variant = %+v", v)
	}
	task, err := s.Task("")
	if err != nil || task.TaskID == "" {
		t.Fatalf("task() = %v, %v", task, err)
	}
	var ids []string
	for _, f := range task.Inputs {
		ids = append(ids, f.FieldID)
		if f.Target != TargetCallKwargs || f.Required || f.Description != "" {
			t.Errorf("field %+v: want an optional, typed call kwarg", f)
		}
	}
	if !reflect.DeepEqual(ids, []string{"prompt", "seed", "num_frames"}) {
		t.Errorf("fields = %v", ids)
	}
	if k := []Kind{task.Inputs[0].Kind, task.Inputs[1].Kind, task.Inputs[2].Kind}; !reflect.DeepEqual(k, []Kind{KindString, KindInt, KindInt}) {
		t.Errorf("kinds of prompt, seed, num_frames = %v, want string, int, int", k)
	}
	if len(task.Outputs) != 1 || task.Outputs[0].ArtifactID != GenericOutputID || task.Outputs[0].Kind != ArtifactVideo || task.Outputs[0].Required {
		t.Errorf("outputs = %+v, want one optional video %q (workload_type video)", task.Outputs, GenericOutputID)
	}
	if !s.IsGenericFallback() || len(s.Notes) != 1 || s.Notes[0] != GenericFallbackNote {
		t.Errorf("notes = %q, want the generic fallback note", s.Notes)
	}
	if !reflect.DeepEqual(task.DefaultCallKwargs, call) {
		t.Errorf("default call kwargs = %v", task.DefaultCallKwargs)
	}
	// The hints' maps are copied.
	load["dtype"], call["num_frames"] = "fp32", 33
	if v.LoadKwargs["dtype"] != "bf16" || task.DefaultCallKwargs["num_frames"] != 9 {
		t.Error("the generic spec shares the hint maps")
	}
	// Without hints: the id is the display name and there is no checkpoint.
	bare := GenericModelInferenceSpec("bare", GenericHints{})
	if bare.DisplayName != "bare" || len(bare.Variants[0].Checkpoints) != 0 || len(bare.Tasks[0].Inputs) != 0 {
		t.Errorf("bare = %+v", bare)
	}
	if o := bare.Tasks[0].Outputs; len(o) != 1 || o[0].Kind != ArtifactTensor {
		t.Errorf("bare outputs = %+v, want one tensor", o)
	}
}

// TestGenericKinds checks how the generic fallback types a call param: by
// its default value, then by its well-known name, else an untyped string
// field that says so.
func TestGenericKinds(t *testing.T) {
	cases := []struct {
		param   string
		value   any // nil: no default call kwarg
		want    Kind
		untyped bool
	}{
		{"seed", nil, KindInt, false},
		{"num_frames", nil, KindInt, false},
		{"height", nil, KindInt, false},
		{"width", nil, KindInt, false},
		{"steps", nil, KindInt, false},
		{"num-inference-steps", nil, KindInt, false},
		{"guidance", nil, KindFloat, false},
		{"cfg", nil, KindFloat, false},
		{"Guidance_Scale", nil, KindFloat, false},
		{"prompt", nil, KindString, false},
		{"negative_prompt", nil, KindString, false},
		{"offload", nil, KindBool, false},
		{"mystery", nil, KindString, true},
		{"mystery", true, KindBool, false},
		{"mystery", int64(3), KindInt, false},
		{"mystery", 2.5, KindFloat, false},
		{"mystery", "x", KindString, false},
		{"mystery", []any{1.5, 2.0}, KindFloatList, false},
		{"mystery", []any{"a", "b"}, KindStringList, false},
		{"mystery", []int64{1}, KindIntList, false},
		{"num_frames", 9.0, KindInt, false},            // JSON numbers are float64
		{"num_frames", 9.5, KindFloat, false},          // the value wins over the name
		{"guidance", 7, KindFloat, false},              // an int fits a float param
		{"seed", "random", KindString, false},          // so does a string default
		{"mystery", []any{1.0, "a"}, KindString, true}, // mixed list: untyped
		{"mystery", map[string]any{}, KindString, true},
	}
	for _, c := range cases {
		h := GenericHints{SupportedCallParams: []string{c.param}}
		if c.value != nil {
			h.DefaultCallKwargs = map[string]any{c.param: c.value}
		}
		f := GenericModelInferenceSpec("fam", h).Tasks[0].Inputs[0]
		if f.Kind != c.want || (f.Description == UntypedFieldDescription) != c.untyped {
			t.Errorf("%s (default %v): kind %s, description %q; want %s, untyped %v", c.param, c.value, f.Kind, f.Description, c.want, c.untyped)
		}
	}
	s := GenericModelInferenceSpec("fam", GenericHints{SupportedCallParams: []string{"seed", "prompt", "seed"}})
	if len(s.Tasks[0].Inputs) != 2 {
		t.Errorf("a repeated param gave %d fields, want 2", len(s.Tasks[0].Inputs))
	}
	for wl, want := range map[string]ArtifactKind{"video": ArtifactVideo, "World": ArtifactVideo, "image": ArtifactImage,
		"embedding": ArtifactEmbedding, "text": ArtifactText, "json": ArtifactJSON, "audio": ArtifactTensor, "": ArtifactTensor} {
		if got := GenericModelInferenceSpec("fam", GenericHints{WorkloadType: wl}).Tasks[0].Outputs[0].Kind; got != want {
			t.Errorf("workload %q: output kind %s, want %s", wl, got, want)
		}
	}
}

func TestRegistryConcurrent(t *testing.T) {
	var r Registry
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprintf("fam-%d-%d", w, i)
				if err := r.Register(family(id, id+"-a")); err != nil {
					errs <- err
				}
				// Everyone also races for one shared name; exactly one wins.
				_ = r.Register(family("shared", fmt.Sprintf("shared-%d-%d", w, i)))
				if r.Get(id+"-a") == nil {
					errs <- fmt.Errorf("%s not visible after Register", id)
				}
				_ = r.List()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(r.List()); n != 8*50+1 {
		t.Errorf("List has %d families, want %d", n, 8*50+1)
	}
	shared := r.Get("shared")
	if shared == nil || len(shared.Aliases) != 1 || r.Get(shared.Aliases[0]) != shared {
		t.Errorf("shared = %+v", shared)
	}
}

func TestDefaultRegistryFunctions(t *testing.T) {
	// A fresh default registry, so that the test can run again (-count) and
	// leaves the process's registry as it found it.
	saved := DefaultRegistry
	DefaultRegistry = &Registry{}
	t.Cleanup(func() { DefaultRegistry = saved })
	s := family("runtime-registry-test-family", "runtime-registry-test-alias")
	if err := Register(s); err != nil {
		t.Fatal(err)
	}
	if GetModelInferenceSpec("runtime-registry-test-alias") != s {
		t.Error("GetModelInferenceSpec did not find the family by alias")
	}
	found := false
	for _, x := range ListModelInferenceSpecs() {
		found = found || x == s
	}
	if !found {
		t.Error("ListModelInferenceSpecs lacks the family")
	}
	if ModelInferenceSpecFor("runtime-registry-test-family", GenericHints{}) != s {
		t.Error("ModelInferenceSpecFor did not return the registered family")
	}
	if g := ModelInferenceSpecFor("runtime-registry-test-unknown", GenericHints{}); g == nil || g == s || GetModelInferenceSpec("runtime-registry-test-unknown") != nil {
		t.Error("ModelInferenceSpecFor(unknown) is not an unregistered generic spec")
	}
	if err := Register(family("runtime-registry-test-family")); err == nil {
		t.Error("registering a taken id in DefaultRegistry succeeded")
	}
}
