package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wfgenRun runs the CLI in-process and returns its exit code and output.
func wfgenRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidateBuiltinManifests(t *testing.T) {
	code, out, errs := wfgenRun("validate", filepath.Join("..", "..", "manifests"))
	if code != 0 || out != "" {
		t.Fatalf("validate manifests/: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "manifest(s) valid") {
		t.Errorf("no summary on stderr: %q", errs)
	}
}

func TestValidateDoneWhen(t *testing.T) {
	path := filepath.Join("..", "..", "gen", "validate", "testdata", "invalid", "three-problems.yaml")
	code, out, _ := wfgenRun("validate", path)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantPrefixes := []string{path + ":8:17: ", path + ":11:5: ", path + ":15:18: "}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("want %d lines, got:\n%s", len(wantPrefixes), out)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], p)
		}
	}

	code, out, _ = wfgenRun("validate", "--format", "json", path)
	var diags []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Path    string `json:"path"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &diags); err != nil || code != 1 || len(diags) != 3 {
		t.Fatalf("json: exit %d, %v, %s", code, err, out)
	}
	if diags[0].Path != "/variants/1/variant_id" || diags[1].Path != "/tasks/0/lable" || diags[2].Path != "/tasks/0/inputs/0/default" {
		t.Errorf("json paths = %+v", diags)
	}

	code, out, _ = wfgenRun("validate", "--format=github", path)
	if code != 1 || !strings.HasPrefix(out, "::error file="+path+",line=8,col=17::duplicate variant id") || strings.Count(out, "::error ") != 3 {
		t.Errorf("github: exit %d\n%s", code, out)
	}
}

func TestValidateUsage(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no wfgen.yaml (this repository's would give the paths)
	for _, args := range [][]string{
		{"validate"},
		{"validate", "--format", "xml", dir},
		{"validate", "--no-such-flag", dir},
		{"validate", filepath.Join(dir, "missing.yaml")},
	} {
		if code, out, errs := wfgenRun(args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and a message", args, code, out, errs)
		}
	}
	// An empty folder holds no invalid manifest.
	if code, _, _ := wfgenRun("validate", dir); code != 0 {
		t.Errorf("empty folder: exit %d", code)
	}
	// A JSON manifest with a syntax error is invalid (1), not an I/O error.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"a\": [1,\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := wfgenRun("validate", bad); code != 1 || !strings.HasPrefix(out, bad+":3:1: invalid JSON") {
		t.Errorf("bad JSON: exit %d, %q", code, out)
	}
}

// Two manifests of one family, validated together, fail with the second
// one's position; each alone is valid.
func TestValidateAcrossFiles(t *testing.T) {
	src := filepath.Join("..", "..", "gen", "validate", "testdata", "valid")
	yamlPath, jsonPath := filepath.Join(src, "full.yaml"), filepath.Join(src, "full.json")
	for _, p := range []string{yamlPath, jsonPath} {
		if code, out, errs := wfgenRun("validate", p); code != 0 {
			t.Fatalf("validate %s: exit %d\n%s%s", p, code, out, errs)
		}
	}
	code, out, errs := wfgenRun("validate", yamlPath, jsonPath)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	if !strings.HasPrefix(out, jsonPath+":") || !strings.Contains(out, `family name "full-family" is also used by `+yamlPath) {
		t.Errorf("output does not point into %s at the reused family name:\n%s", jsonPath, out)
	}
	if !strings.Contains(errs, "1 manifest(s) valid") {
		t.Errorf("summary %q, want 1 manifest valid", errs)
	}
}

// TestValidateAgainstCheckpoint: a manifest whose checkpoint is next to it
// is checked against the checkpoint's signatures, without libtorch; a
// mismatch fails validate (exit 1) with the field's position.
func TestValidateAgainstCheckpoint(t *testing.T) {
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", "")
	dir := t.TempDir()
	echoArchive(t, filepath.Join(dir, "echo.pt"))
	manifest := filepath.Join(dir, "echo.yaml")
	if err := os.WriteFile(manifest, []byte(`schema_version: 1
model_family_id: echo
variants:
  - variant_id: default
    checkpoints: [{role: model, uri: echo.pt}]
tasks:
  - task_id: default
    inputs:
      - {field_id: x, kind: tensor, required: true}
      - {field_id: k, kind: string, default: two}
    outputs: [{artifact_id: y, kind: tensor}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := wfgenRun("validate", manifest)
	want := manifest + `:10:9: task "default" does not match method forward of checkpoint echo.pt: field "k": expected argument k of type str (field kind string), found k: int` + "\n"
	if code != 1 || out != want {
		t.Errorf("validate: exit %d\n%s%s\nwant exit 1 and\n%s", code, out, errs, want)
	}
	if err := os.Remove(filepath.Join(dir, "echo.pt")); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := wfgenRun("validate", manifest); code != 0 {
		t.Errorf("without the checkpoint: exit %d\n%s%s", code, out, errs)
	}
}
