package oip_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// redoclyVersion is the independent OpenAPI validator the document is
// checked with (from the npm registry).
const redoclyVersion = "2.77.0"

// redocly returns the path of the redocly CLI: $WFGEN_REDOCLY when set,
// else a copy installed once with npm under the user cache folder
// (wfgen/redocly-cli-VERSION). The test is skipped only when npm is
// missing.
func redocly(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WFGEN_REDOCLY"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "wfgen", "redocly-cli-"+redoclyVersion)
	bin := filepath.Join(dir, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: cannot install @redocly/cli " + redoclyVersion + " to validate the OpenAPI document (CI has npm)")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", tmp, "@redocly/cli@"+redoclyVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install @redocly/cli@%s: %v\n%s", redoclyVersion, err, out)
	}
	// Another test process may have installed it meanwhile: either copy works.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(bin); serr != nil {
			t.Fatalf("installing redocly: %v", err)
		}
	}
	return bin
}

func allSpecs(t *testing.T) []*spec.ModelInferenceSpec {
	t.Helper()
	fams, diags, err := validate.Paths([]string{filepath.Join("..", "..", "manifests")})
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifests: %v %v", err, diags)
	}
	var specs []*spec.ModelInferenceSpec
	for _, f := range fams {
		specs = append(specs, f.Spec)
	}
	return specs
}

// TestOpenAPIValidatesWithRedocly lints the document of every curated
// family, and of one family alone, with @redocly/cli: no error and no
// warning of its recommended rules.
func TestOpenAPIValidatesWithRedocly(t *testing.T) {
	bin := redocly(t)
	specs := allSpecs(t)
	dir := t.TempDir()
	for name, set := range map[string][]*spec.ModelInferenceSpec{"all": specs, "one": specs[:1]} {
		doc, err := oip.OpenAPI(set...)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := oip.OpenAPI(set...)
		if !bytes.Equal(doc, again) {
			t.Errorf("%s: the document differs between two runs", name)
		}
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "lint", "--format=json", path)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var report struct {
			Totals   struct{ Errors, Warnings int } `json:"totals"`
			Version  string                         `json:"version"`
			Problems []json.RawMessage              `json:"problems"`
		}
		if jerr := json.Unmarshal(out, &report); jerr != nil || err != nil {
			t.Fatalf("redocly lint %s: %v %v\n%s\n%s", name, err, jerr, out, stderr.Bytes())
		}
		if report.Version != redoclyVersion || report.Totals.Errors != 0 || report.Totals.Warnings != 0 {
			t.Errorf("redocly %s lint %s: %d errors, %d warnings:\n%s", report.Version, name, report.Totals.Errors, report.Totals.Warnings, out)
		}
	}
}

// TestOpenAPISchemasDescribeRealMessages checks requests and responses the
// mapping produces against the document's own schemas, and that a request
// breaking a field's rule is rejected by them too.
func TestOpenAPISchemasDescribeRealMessages(t *testing.T) {
	world := loadModel(t, "tiny-world")
	enc := loadModel(t, "tiny-encoder")
	doc, err := oip.OpenAPI(world.Spec, enc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource("doc.json", bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	check := func(schema string, msg any, wantValid bool) {
		t.Helper()
		sch, err := c.Compile("doc.json#/components/schemas/" + schema)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(msg)
		var v any
		json.Unmarshal(b, &v)
		err = sch.Validate(v)
		if wantValid && err != nil {
			t.Errorf("%s: %s\n%v", schema, b, err)
		}
		if !wantValid && err == nil {
			t.Errorf("%s: %s validated, want it rejected", schema, b)
		}
	}
	gen, _ := world.Spec.Task("generate")
	in, err := oip.EncodeInputs(gen, map[string]any{"prompt": "hi", "seed": int64(4), "num_frames": int64(17)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("tiny-world.generate.InferRequest", oip.InferenceRequest{ID: "r1", Inputs: in}, true)
	bad := append([]oip.Tensor(nil), in...)
	bad[2].Data = json.RawMessage(`[40]`) // num_frames above its maximum
	check("tiny-world.generate.InferRequest", oip.InferenceRequest{Inputs: bad}, false)
	check("tiny-world.generate.InferRequest", oip.InferenceRequest{Inputs: in[1:]}, false) // prompt missing

	step, _ := world.Spec.Task("step")
	in, _ = oip.EncodeInputs(step, map[string]any{"speed": 1.5}, nil)
	check("tiny-world.step.InferRequest", oip.InferenceRequest{Parameters: oip.Parameters{"task": "step", "max_chunks": 3}, Inputs: in}, true)
	check("tiny-world.step.InferRequest", oip.InferenceRequest{Inputs: in}, false) // not the default task: task required

	embed, _ := enc.Spec.Task("embed")
	in, _ = oip.EncodeInputs(embed, map[string]any{"tokens": tensor.FromInt64([]int64{1, 2}, 2), "normalize": false}, nil)
	check("tiny-encoder.embed.InferRequest", oip.InferenceRequest{Inputs: in}, true)
	out, _ := oip.EncodeOutputs(embed, map[string]any{"embedding": tensor.FromFloat32(make([]float32, 64), 64)}, nil)
	check("tiny-encoder.embed.InferResponse", oip.InferenceResponse{ModelName: "tiny-encoder", ModelVersion: "default", Outputs: out}, true)
	out, _ = oip.EncodeOutputs(embed, map[string]any{"embedding": tensor.FromFloat32([]float32{0.5, 0.25}, 2)}, nil)
	check("tiny-encoder.embed.InferResponse", oip.InferenceResponse{ModelName: "tiny-encoder", ModelVersion: "default", Outputs: out}, false) // not the declared [64]
	video := tensor.FromUint8(make([]uint8, 2*2*2*3), 2, 2, 2, 3)
	out, _ = oip.EncodeOutputs(gen, map[string]any{"video": video}, nil)
	check("tiny-world.generate.InferResponse", oip.InferenceResponse{ModelName: "tiny-world", Outputs: out}, true)
	check("ModelMetadata", world.Metadata(), true)
}
