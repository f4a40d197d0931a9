package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A to_dict the Python runtime wrote converts with one command into a
// manifest that validates (issue 44 §5); what cannot convert exits 1 with
// its problems located in the input, and nothing is written.
func TestConvertPythonDict(t *testing.T) {
	dict, err := filepath.Abs(filepath.Join("..", "..", "gen", "convert", "testdata", "to_dict.json"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if code, out, errs := wfgen("validate", dict); code != 1 || !strings.Contains(out, `unknown key "model_ref"`) {
		t.Errorf("validate the Python dict: exit %d\n%s%s", code, out, errs)
	}
	manifest := filepath.Join("manifests", "my-world-model.yaml")
	code, out, errs := wfgen("convert", "-o", manifest, dict)
	if code != 0 || out != "" || !strings.HasPrefix(errs, "wfgen convert: wrote "+manifest+"; check its checkpoints with: ") {
		t.Fatalf("convert -o: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := wfgen("validate", manifest); code != 0 {
		t.Errorf("validate the converted manifest: exit %d\n%s%s", code, out, errs)
	}
	code, stdout, _ := wfgen("convert", dict)
	if written, _ := os.ReadFile(manifest); code != 0 || stdout != string(written) {
		t.Errorf("convert to stdout: exit %d\n%s", code, stdout)
	}

	if code, _, errs := wfgen("convert", "-o", "m.json", dict); code != 2 || !strings.Contains(errs, "convert writes YAML") {
		t.Errorf("convert -o m.json: exit %d\n%s", code, errs)
	}
	if err := os.WriteFile("bad.json", []byte(`{"model_family_id": "f", "variants": [{"variant_id": "v", "label": "V", "model_ref": "org/m"}], "tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = wfgen("convert", "-o", "bad.yaml", "bad.json")
	if code != 1 || !strings.HasPrefix(out, `bad.json:1:73: variant "v": model_ref "org/m" is the URI of none of its checkpoints`) || !strings.Contains(errs, "nothing written") {
		t.Errorf("convert bad.json: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat("bad.yaml"); err == nil {
		t.Error("bad.yaml written")
	}
}
