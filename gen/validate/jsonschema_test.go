package validate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/schema"
)

// A JSON Schema document saved beside the manifests (docs/manifest.md has
// users write the manifest schema into manifests/) is skipped in a folder,
// through Options.Skipped, by every entry point of the walker — Check
// (wfgen validate), Scan (wfgen generate) and Paths — and is one
// diagnostic at its "$schema" key when named explicitly; a manifest whose
// own "$schema" links to the manifest schema is still a manifest.
func TestJSONSchemaDocumentsAreSkipped(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("full.yaml", string(good))
	// A JSON manifest linking to the manifest schema, as docs/manifest.md
	// shows: not a JSON Schema document.
	write("linked.json", `{"$schema": "https://github.com/worldfoundry/wfgen/schema/manifest.schema.json", "schema_version": 1,
 "model_family_id": "linked", "display_name": "Linked", "variants": [{"variant_id": "default", "label": "Default"}],
 "tasks": [{"task_id": "default", "label": "Default", "outputs": [{"artifact_id": "o", "kind": "json"}]}]}`)
	generated := write("manifest.schema.json", string(schema.JSON))
	draft7 := write("other.schema.yaml", "$schema: http://json-schema.org/draft-07/schema#\ntype: object\n")

	var skipped []string
	opts := Options{Skipped: func(p string, err error) {
		var js *manifest.JSONSchemaError
		if !errors.As(err, &js) {
			t.Errorf("skipped %s: %v, want a JSONSchemaError", p, err)
		}
		skipped = append(skipped, filepath.Base(p)+": "+err.Error())
	}}
	wantSkipped := []string{
		`manifest.schema.json: ` + generated + ` is a JSON Schema document ("$schema": "https://json-schema.org/draft/2020-12/schema"), not a manifest`,
		`other.schema.yaml: ` + draft7 + ` is a JSON Schema document ("$schema": "http://json-schema.org/draft-07/schema#"), not a manifest`,
	}
	checkSkipped := func(what string) {
		t.Helper()
		if strings.Join(skipped, "\n") != strings.Join(wantSkipped, "\n") {
			t.Errorf("%s skipped:\n%s\nwant:\n%s", what, strings.Join(skipped, "\n"), strings.Join(wantSkipped, "\n"))
		}
		skipped = nil
	}

	n, diags, err := opts.Check([]string{dir})
	if err != nil || len(diags) != 0 || n != 2 {
		t.Errorf("Check = %d, %v, %v; want the two manifests", n, diags, err)
	}
	checkSkipped("Check")
	scanned, diags, err := opts.Scan([]string{dir})
	if err != nil || len(diags) != 0 || len(scanned) != 2 {
		t.Errorf("Scan = %v, %v, %v; want the two manifests", scanned, diags, err)
	}
	checkSkipped("Scan")
	fams, diags, err := opts.Paths([]string{dir})
	if err != nil || len(diags) != 0 || len(fams) != 2 {
		t.Errorf("Paths = %d families, %v, %v; want the two manifests", len(fams), diags, err)
	}
	checkSkipped("Paths")

	// Named explicitly, it is not a manifest: one diagnostic at the key.
	_, diags, err = opts.Paths([]string{generated, draft7})
	if err != nil || len(diags) != 2 || len(skipped) != 0 {
		t.Fatalf("Paths(the schemas) = %v, %v, skipped %q", diags, err, skipped)
	}
	for i, want := range []string{
		generated + `:2:3: this file is a JSON Schema document ("$schema": "https://json-schema.org/draft/2020-12/schema"), not a manifest; name manifests only (in a folder, wfgen skips such files with a note)`,
		draft7 + `:1:1: this file is a JSON Schema document ("$schema": "http://json-schema.org/draft-07/schema#"), not a manifest; name manifests only (in a folder, wfgen skips such files with a note)`,
	} {
		if got := diags[i].String(); got != want || diags[i].Path != "/$schema" {
			t.Errorf("diagnostic %d = %s (path %q), want %s", i, got, diags[i].Path, want)
		}
	}
	if _, _, err := File(generated); !errors.As(err, new(*manifest.JSONSchemaError)) {
		t.Errorf("File(schema) error = %v, want a JSONSchemaError", err)
	}
	if _, diags := Bytes("x.json", schema.JSON); len(diags) != 1 || !strings.HasPrefix(diags[0].String(), "x.json:2:3: this file is a JSON Schema document") {
		t.Errorf("Bytes(schema) = %v", diags)
	}
}

func TestIsJSONSchemaDialect(t *testing.T) {
	for uri, want := range map[string]bool{
		"https://json-schema.org/draft/2020-12/schema":                      true,
		"http://json-schema.org/draft-07/schema#":                           true,
		"https://www.json-schema.org/draft/2019-09/schema":                  true,
		"https://JSON-Schema.org/draft/2020-12/schema":                      true,
		"../schema/manifest.schema.json":                                    false,
		"https://github.com/worldfoundry/wfgen/schema/manifest.schema.json": false,
		"json-schema.org/draft-07/schema":                                   false,
		"https://json-schema.org.example.com/schema":                        false,
		"": false,
	} {
		if got := manifest.IsJSONSchemaDialect(uri); got != want {
			t.Errorf("IsJSONSchemaDialect(%q) = %v, want %v", uri, got, want)
		}
	}
}

// The field and artifact kinds are closed lists (spec.FieldKinds,
// spec.ArtifactKinds), where the seed's kind is any string: a kind wfgen
// lacks is a problem at its value (docs/differences.md).
func TestKindListsAreClosed(t *testing.T) {
	const m = `schema_version: 1
model_family_id: fam
display_name: Fam
variants: [{variant_id: default, label: Default}]
tasks:
  - task_id: default
    label: Default
    inputs: [{field_id: clip, label: Clip, kind: audio}]
    outputs: [{artifact_id: out, kind: audio}]
`
	_, diags := Bytes("kinds.yaml", []byte(m))
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		`kinds.yaml:8:50: tasks[0].inputs[0].kind: "audio" is not allowed; must be one of "string", "int", "float", "bool", "tensor", "image", "video", "string_list", "int_list", "float_list", "bool_list", "tensor_list", "tensor_dict", "tensor_tuple"`,
		`kinds.yaml:9:40: artifact kind "audio" is not one of video, image, embedding, tensor, text, json, tensor_list, record, record_list`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
