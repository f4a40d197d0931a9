package spec

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// literalFixture is a spec written in Go that leaves every key with a seed
// default out, and minimalJSON the same spec as a manifest author writes
// it.
func literalFixture() *ModelInferenceSpec {
	return &ModelInferenceSpec{
		ModelFamilyID: "lit",
		Variants: []InferenceVariantSpec{{VariantID: "default", Checkpoints: []InferenceCheckpointRef{
			{Role: "model", URI: "m.pt", Required: true},
		}}},
		Tasks: []InferenceTaskProfile{{TaskID: "default",
			Inputs:  []InferenceFieldSpec{{FieldID: "prompt"}, {FieldID: "x", Kind: KindTensor}},
			Outputs: []InferenceArtifactSpec{{ArtifactID: "y", Kind: ArtifactTensor}},
		}},
	}
}

const minimalJSON = `{"model_family_id": "lit",
	"variants": [{"variant_id": "default", "checkpoints": [{"role": "model", "uri": "m.pt"}]}],
	"tasks": [{"task_id": "default", "inputs": [{"field_id": "prompt"}, {"field_id": "x", "kind": "tensor"}],
		"outputs": [{"artifact_id": "y", "kind": "tensor"}]}]}`

// TestSeedDefaultsHoldForLiterals: the seed's defaults — kind "string",
// target "call_kwargs", status "unknown", default variant and task ids
// "default" — hold for a spec written in Go as for the same spec decoded:
// its ToDict is the decoded spec's, lookups and kind questions answer
// alike, and a round trip through JSON gives the decoded spec.
func TestSeedDefaultsHoldForLiterals(t *testing.T) {
	lit := literalFixture()
	var dec ModelInferenceSpec
	if err := json.Unmarshal([]byte(minimalJSON), &dec); err != nil {
		t.Fatal(err)
	}
	ld, err := lit.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	dd, err := dec.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(dd, ld); d != "" {
		t.Errorf("ToDict of the literal differs from the decoded spec's (-decoded +literal):\n%s", d)
	}
	field := ld["tasks"].([]any)[0].(map[string]any)["inputs"].([]any)[0].(map[string]any)
	variant := ld["variants"].([]any)[0].(map[string]any)
	checkpoint := variant["checkpoints"].([]any)[0].(map[string]any)
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"kind", field["kind"], "string"}, {"target", field["target"], "call_kwargs"},
		{"variant status", variant["status"], "unknown"}, {"checkpoint status", checkpoint["status"], "unknown"},
		{"default_variant_id", ld["default_variant_id"], "default"}, {"default_task_id", ld["default_task_id"], "default"},
	} {
		if c.got != c.want {
			t.Errorf("ToDict of a literal: %s = %#v, want %#v", c.key, c.got, c.want)
		}
	}
	// Each part's own ToDict and JSON form say the same.
	if fd, err := lit.Tasks[0].Inputs[0].ToDict(); err != nil || fd["kind"] != "string" || fd["target"] != "call_kwargs" {
		t.Errorf("field ToDict = %v, %v", fd, err)
	}
	if b, err := json.Marshal(lit.Variants[0]); err != nil || string(b) != `{"variant_id":"default","label":"","checkpoints":[{"role":"model","uri":"m.pt","required":true,"status":"unknown"}],"status":"unknown","load_kwargs":null,"call_kwargs":null,"aliases":null,"notes":null}` {
		t.Errorf("variant JSON = %s, %v", b, err)
	}
	// A round trip through JSON gives the decoded spec.
	b, err := json.Marshal(lit)
	if err != nil {
		t.Fatal(err)
	}
	var back ModelInferenceSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&dec, &back); d != "" {
		t.Errorf("literal → JSON → spec differs from the decoded spec (-decoded +round trip):\n%s", d)
	}

	// Lookups and kind questions answer for the literal as for the decoded spec.
	for _, s := range []*ModelInferenceSpec{lit, &dec} {
		if v, err := s.Variant(""); err != nil || v.VariantID != "default" {
			t.Errorf("Variant(\"\") = %v, %v", v, err)
		}
		if tk, err := s.Task(""); err != nil || tk.TaskID != "default" {
			t.Errorf("Task(\"\") = %v, %v", tk, err)
		}
		if s.DefaultVariant() != "default" || s.DefaultTask() != "default" {
			t.Errorf("DefaultVariant, DefaultTask = %q, %q", s.DefaultVariant(), s.DefaultTask())
		}
		prompt, x := &s.Tasks[0].Inputs[0], &s.Tasks[0].Inputs[1]
		if !prompt.CallKwarg() || !x.CallKwarg() || !x.IsStacked() || prompt.IsStacked() {
			t.Errorf("targets: prompt call %v stacked %v, x call %v stacked %v", prompt.CallKwarg(), prompt.IsStacked(), x.CallKwarg(), x.IsStacked())
		}
		k := prompt.Kind
		if !k.Valid() || k.Elem() != KindString || !k.Textual() || k.Phrase() != "a string" || k.TorchScriptType() != "str" ||
			!k.Allows(ConstraintMinLength) || !k.Allows(ConstraintPattern) || k.Effective() != KindString {
			t.Errorf("kind %q does not answer as string", k)
		}
	}
	// Given values are kept.
	given := InferenceFieldSpec{FieldID: "n", Kind: KindInt, Target: TargetLoadKwargs}
	if fd, _ := given.ToDict(); fd["kind"] != "int" || fd["target"] != "load_kwargs" || given.CallKwarg() {
		t.Errorf("given kind and target: %v, call kwarg %v", fd, given.CallKwarg())
	}
	status := InferenceVariantSpec{VariantID: "v", Status: "available", Checkpoints: []InferenceCheckpointRef{{Role: "model", URI: "m", Status: "unavailable"}}}
	if vd, _ := status.ToDict(); vd["status"] != "available" || vd["checkpoints"].([]any)[0].(map[string]any)["status"] != "unavailable" {
		t.Errorf("given statuses: %v", vd)
	}
	ids := ModelInferenceSpec{ModelFamilyID: "f", DefaultVariantID: "v", DefaultTaskID: "t"}
	if sd, _ := ids.ToDict(); sd["default_variant_id"] != "v" || sd["default_task_id"] != "t" {
		t.Errorf("given default ids: %v", sd)
	}
}

// TestCheckpointRequiredLiteral pins the one seed default a Go literal
// cannot carry (docs/differences.md): a checkpoint's Required is a bool,
// false when a literal leaves it out, where decoding applies the seed's
// true.
func TestCheckpointRequiredLiteral(t *testing.T) {
	lit := InferenceCheckpointRef{Role: "model", URI: "m.pt"}
	var dec InferenceCheckpointRef
	if err := json.Unmarshal([]byte(`{"role": "model", "uri": "m.pt"}`), &dec); err != nil {
		t.Fatal(err)
	}
	ld, _ := lit.ToDict()
	dd, _ := dec.ToDict()
	if ld["required"] != false || dd["required"] != true {
		t.Errorf("required: literal %v, decoded %v; the difference docs/differences.md describes is gone", ld["required"], dd["required"])
	}
	delete(ld, "required")
	delete(dd, "required")
	if d := cmp.Diff(dd, ld); d != "" {
		t.Errorf("the literal and the decoded reference differ in more than required:\n%s", d)
	}
}
