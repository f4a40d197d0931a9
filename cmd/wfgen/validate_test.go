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
