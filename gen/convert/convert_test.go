package convert

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/validate"
)

// pythonDict is json.dump(spec.to_dict()) as the Python runtime writes it,
// made by testdata/to_dict.py (TestPythonDictIsCurrent).
var pythonDict = filepath.Join("testdata", "to_dict.json")

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The committed dict is what testdata/to_dict.py writes, when python3 is
// at hand to run it.
func TestPythonDictIsCurrent(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run testdata/to_dict.py")
	}
	cmd := exec.Command(py, "to_dict.py")
	cmd.Dir = "testdata"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 to_dict.py: %v", err)
	}
	if d := cmp.Diff(string(read(t, pythonDict)), string(out)); d != "" {
		t.Errorf("testdata/to_dict.json is not what to_dict.py writes; run (cd gen/convert/testdata && python3 to_dict.py > to_dict.json):\n%s", d)
	}
}

// As it is, the Python runtime's dict is not a manifest: wfgen validate
// reports the missing schema_version and each variant's model_ref and
// checkpoint_map (3 problems for one variant; docs/differences.md).
func TestPythonDictFailsValidate(t *testing.T) {
	_, diags := validate.Bytes(pythonDict, read(t, pythonDict))
	var got []string
	for _, d := range diags {
		got = append(got, d.Path)
	}
	want := []string{"", "/variants/0/model_ref", "/variants/0/checkpoint_map", "/variants/1/model_ref", "/variants/1/checkpoint_map"}
	if !slices.Equal(got, want) || !strings.Contains(diags[0].Message, `missing the required key "schema_version"`) {
		t.Errorf("validate the Python dict: %v, want problems at %q", diags, want)
	}
}

// wfgen convert turns it into a valid manifest (testdata/to_dict.yaml),
// whose spec gives back, through Go's ToDict, every value of the Python
// dict but the two derived ones.
func TestConvertPythonDict(t *testing.T) {
	res, diags := PythonDict(pythonDict, read(t, pythonDict))
	if len(diags) > 0 || res == nil {
		t.Fatalf("convert: %v", diags)
	}
	if len(res.Warnings) > 0 {
		t.Errorf("warnings: %q", res.Warnings)
	}
	golden := filepath.Join("testdata", "to_dict.yaml")
	if d := cmp.Diff(string(read(t, golden)), string(res.YAML)); d != "" {
		t.Errorf("converted manifest differs from %s (-want +got; go run ./cmd/wfgen convert -o gen/convert/testdata/to_dict.yaml gen/convert/testdata/to_dict.json rewrites it):\n%s", golden, d)
	}
	fam, diags := validate.Bytes(golden, res.YAML)
	if fam == nil {
		t.Fatalf("the converted manifest is not valid: %v", diags)
	}
	goDict, err := fam.Spec.ToDict()
	if err != nil {
		t.Fatal(err)
	}
	var pyDict map[string]any
	if err := json.Unmarshal(read(t, pythonDict), &pyDict); err != nil {
		t.Fatal(err)
	}
	for _, v := range pyDict["variants"].([]any) {
		delete(v.(map[string]any), "model_ref")
		delete(v.(map[string]any), "checkpoint_map")
	}
	b, err := json.Marshal(goDict)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(pyDict, back); d != "" {
		t.Errorf("Go's ToDict of the converted manifest differs from the Python dict (-python +go):\n%s", d)
	}
	if got := fam.Spec.Variants[0].PrimaryCheckpointURI(); got != "my-world-model.pt" {
		t.Errorf("primary checkpoint %q", got)
	}
}

// model_ref and checkpoint_map are checked against the checkpoints before
// they are dropped: a value the checkpoints do not give would be lost, so
// it is an error at its key; a model_ref that is not the checkpoint wfgen
// runs is a warning. Problems of the converted manifest are reported at
// their place in the input.
func TestConvertChecksDerivedValues(t *testing.T) {
	const head = `{
  "model_family_id": "fam",
  "display_name": "Fam",
  "variants": [
    {
      "variant_id": "default",
      "label": "Default",
      "checkpoints": [
        {"role": "config", "uri": "c.json", "required": true, "status": "unknown"},
        {"role": "model", "uri": "m.pt", "required": true, "status": "unknown"}
      ],
`
	const tail = `
    }
  ],
  "tasks": [
    {
      "task_id": "default", "label": "Default",
      "inputs": [{"field_id": "prompt", "label": "Prompt", "kind": "%s"}],
      "outputs": [{"artifact_id": "video", "kind": "video"}]
    }
  ]
}
`
	for _, c := range []struct {
		name, derived, kind string
		want                []string
		warning             string
	}{
		{name: "as written", derived: `"model_ref": "c.json", "checkpoint_map": {"config": "c.json", "model": "m.pt"}`, kind: "string",
			warning: `variant "default": model_ref is "c.json", but wfgen runs the checkpoint with role "model" (else the first), "m.pt" (docs/differences.md, primary checkpoint)`},
		{name: "edited map", derived: `"model_ref": "m.pt", "checkpoint_map": {"model": "other.pt"}`, kind: "string",
			want: []string{`x.json:12:28: variant "default": checkpoint_map {"model": "other.pt"} is not what its checkpoints give ({"config": "c.json", "model": "m.pt"}), so this dict was edited after to_dict; a manifest keeps the checkpoints only: make them say what is meant and remove checkpoint_map`}},
		{name: "ref of no checkpoint", derived: `"model_ref": "org/model", "checkpoint_map": {"config": "c.json", "model": "m.pt"}`, kind: "string",
			want: []string{`x.json:12:7: variant "default": model_ref "org/model" is the URI of none of its checkpoints, and a manifest keeps the checkpoints only: add the checkpoint (role: model, uri: "org/model") or remove model_ref`}},
		{name: "not a map", derived: `"model_ref": 3, "checkpoint_map": []`, kind: "string",
			want: []string{
				`x.json:12:7: variant "default": model_ref is not a string, as the Python runtime writes it`,
				`x.json:12:23: variant "default": checkpoint_map is not a mapping of roles to URIs, as the Python runtime writes it`}},
		{name: "kind wfgen lacks", derived: `"model_ref": "m.pt"`, kind: "prompt",
			want: []string{`x.json:18:68: tasks[0].inputs[0].kind: "prompt" is not allowed; must be one of "string", "int"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := head + "      " + c.derived + strings.Replace(tail, "%s", c.kind, 1)
			res, diags := PythonDict("x.json", []byte(data))
			var got []string
			for _, d := range diags {
				got = append(got, d.String())
			}
			if len(got) != len(c.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], c.want[i]) {
					t.Errorf("problem %d:\n%s\nwant:\n%s", i, got[i], c.want[i])
				}
			}
			if len(c.want) > 0 {
				if res != nil {
					t.Errorf("a result with problems:\n%s", res.YAML)
				}
				return
			}
			if !slices.Equal(res.Warnings, []string{c.warning}) {
				t.Errorf("warnings %q, want %q", res.Warnings, c.warning)
			}
			if strings.Contains(string(res.YAML), "model_ref") || strings.Contains(string(res.YAML), "checkpoint_map") || !strings.Contains(string(res.YAML), "\nschema_version: 1\n") {
				t.Errorf("converted:\n%s", res.YAML)
			}
		})
	}
}

// What is not a spec dict says so, located.
func TestConvertRefuses(t *testing.T) {
	for in, want := range map[string]string{
		`[1, 2]`:  `x.json:1:1: a spec dict is a mapping (ModelInferenceSpec.to_dict()), not a list`,
		`{"a": }`: `x.json:1:7: invalid JSON`,
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`: `x.json:1:2: this file is a JSON Schema document`,
	} {
		_, diags := PythonDict("x.json", []byte(in))
		if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), want) {
			t.Errorf("PythonDict(%s) = %v, want %s...", in, diags, want)
		}
	}
}
