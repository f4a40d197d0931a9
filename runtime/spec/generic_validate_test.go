package spec_test

import (
	"encoding/json"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// TestGenericSpecValidates checks that the generic fallback is a valid
// manifest: its to_dict form (and its plain JSON form), with the manifest's
// schema_version, passes wfgen validate as JSON and as YAML, and the
// validated family has the inferred field kinds.
func TestGenericSpecValidates(t *testing.T) {
	hints := map[string]spec.GenericHints{
		"seed-example": {
			DisplayName: "My World Model", DefaultModelRef: "org/my-world-model", WorkloadType: "video",
			SupportedCallParams: []string{"prompt", "seed", "num_frames"},
		},
		"bare": {},
		"defaults": {
			WorkloadType:        "embedding",
			SupportedCallParams: []string{"prompt", "num_frames", "guidance", "mode", "tags", "flag"},
			DefaultCallKwargs:   map[string]any{"num_frames": 9.0, "guidance": 7, "mode": "fast", "tags": []any{"a", "b"}},
			DefaultLoadKwargs:   map[string]any{"dtype": "bf16"},
			SupportsStream:      true,
		},
	}
	for name, h := range hints {
		t.Run(name, func(t *testing.T) {
			s := spec.GenericModelInferenceSpec("my-world-model", h)
			d, err := s.ToDict()
			if err != nil {
				t.Fatal(err)
			}
			d["schema_version"] = manifest.SchemaVersion
			asJSON, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			asYAML, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := json.Marshal(manifest.Document{SchemaVersion: manifest.SchemaVersion, ModelInferenceSpec: *s})
			if err != nil {
				t.Fatal(err)
			}
			for file, data := range map[string][]byte{"generic.json": asJSON, "generic.yaml": asYAML, "plain.json": plain} {
				fam, diags := validate.Bytes(file, data)
				for _, dg := range diags {
					t.Errorf("%s: %v", file, dg)
				}
				if fam == nil {
					t.Fatalf("%s: not valid:\n%s", file, data)
				}
				task, err := fam.Spec.Task("")
				if err != nil {
					t.Fatal(err)
				}
				for i, f := range task.Inputs {
					if want := s.Tasks[0].Inputs[i]; f.FieldID != want.FieldID || f.Kind != want.Kind {
						t.Errorf("%s: field %s kind %s, want %s", file, f.FieldID, f.Kind, want.Kind)
					}
				}
				if !fam.Spec.IsGenericFallback() {
					t.Errorf("%s: the validated family lost the generic fallback note", file)
				}
			}
		})
	}
}
