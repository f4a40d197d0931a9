package validate

import (
	"strings"
	"testing"
)

// FuzzBytes validates arbitrary manifests: it must never panic, every
// diagnostic must point inside the file, and a manifest it accepts must be
// decoded with a known default variant and task.
func FuzzBytes(f *testing.F) {
	f.Add([]byte("schema_version: 1\nmodel_family_id: a\nvariants: [{variant_id: default}]\ntasks: [{task_id: default, outputs: [{artifact_id: o, kind: text}]}]\n"), false)
	f.Add([]byte(`{"schema_version": 1, "model_family_id": "a", "variants": [{"variant_id": "default"}], "tasks": [{"task_id": "default", "outputs": [{"artifact_id": "o", "kind": "text"}]}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		path := "fuzz.yaml"
		if isJSON {
			path = "fuzz.json"
		}
		file, diags := Bytes(path, data)
		lines := strings.Count(string(data), "\n") + 1
		for _, d := range diags {
			if d.File != path || d.Line < 1 || d.Column < 1 || d.Line > lines+1 || d.Message == "" {
				t.Fatalf("bad diagnostic %+v (file has %d lines)", d, lines)
			}
		}
		if (file == nil) == (len(diags) == 0) {
			t.Fatalf("file %v with %d diagnostics", file != nil, len(diags))
		}
		if file == nil {
			return
		}
		if file.Spec == nil {
			t.Fatal("valid file without a spec")
		}
		if _, err := file.Spec.Variant(""); err != nil {
			t.Fatalf("valid file without its default variant: %v", err)
		}
		if _, err := file.Spec.Task(""); err != nil {
			t.Fatalf("valid file without its default task: %v", err)
		}
	})
}
