package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Following docs/manifest.md — "wfgen schema -o manifests/manifest.schema.json"
// beside the manifests — the schema is not read as a manifest by "wfgen
// validate manifests" nor by the README's go:generate line ("wfgen
// generate -o DIR manifests"): both skip it with a note and handle the
// manifests. (Before, it gave 8 problems and nothing was generated.)
func TestSchemaBesideManifests(t *testing.T) {
	tmp := t.TempDir()
	t.Chdir(tmp)
	t.Setenv("WFGEN_CACHE", "off")
	goMod(t)
	copyManifest(t, "kinds/input/kinds.yaml", "manifests")
	code, schema, errs := wfgen("schema")
	if code != 0 {
		t.Fatalf("schema: exit %d\n%s", code, errs)
	}
	if err := os.WriteFile(filepath.Join("manifests", "x.schema.json"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	const note = `: note: skipped manifests/x.schema.json, a JSON Schema document ("$schema": "https://json-schema.org/draft/2020-12/schema"), not a manifest` + "\n"
	code, out, errs := wfgen("validate", "manifests")
	if code != 0 || out != "" || errs != "wfgen validate"+note+"1 manifest(s) valid\n" {
		t.Errorf("validate manifests: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = wfgen("generate", "-o", "models", "manifests")
	if code != 0 || !strings.HasPrefix(errs, "wfgen generate"+note) {
		t.Errorf("generate -o models manifests: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join("models", "goldenkinds", "goldenkinds.go")); err != nil {
		t.Errorf("generate wrote no package: %v", err)
	}
	if code, out, errs = wfgen("generate", "--check", "-o", "models", "manifests"); code != 0 {
		t.Errorf("generate --check: exit %d\n%s%s", code, out, errs)
	}
	// Named explicitly, it is a problem: it is not a manifest.
	code, out, _ = wfgen("validate", filepath.Join("manifests", "x.schema.json"))
	if want := filepath.Join("manifests", "x.schema.json") + ":2:3: this file is a JSON Schema document"; code != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("validate manifests/x.schema.json: exit %d, want 1 and %q\n%s", code, want, out)
	}
}
