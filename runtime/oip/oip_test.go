package oip_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func loadModel(t testing.TB, name string) *oip.Model {
	t.Helper()
	f, diags, err := validate.File(filepath.Join("..", "..", "manifests", name+".yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	m, err := oip.NewModel(f.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// looseModel is loadModel with the tensor contracts (dtype, shape) of its
// inputs removed, for tests of how tensors of any datatype and rank are
// decoded.
func looseModel(t testing.TB, name string) *oip.Model {
	t.Helper()
	f, diags, err := validate.File(filepath.Join("..", "..", "manifests", name+".yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	for i := range f.Spec.Tasks {
		for j := range f.Spec.Tasks[i].Inputs {
			in := &f.Spec.Tasks[i].Inputs[j]
			in.DType, in.Shape = "", nil
		}
	}
	m, err := oip.NewModel(f.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// roundTrip encodes call kwargs as a request body, decodes it as a server
// does and maps it back onto the task's fields.
func roundTrip(t *testing.T, m *oip.Model, task string, call map[string]any) (map[string]any, error) {
	t.Helper()
	tk, err := m.Spec.Task(task)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := oip.EncodeInputs(tk, call, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(oip.InferenceRequest{Parameters: oip.Parameters{"task": task}, Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	req, err := oip.DecodeRequest(body, oip.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Task(req.Parameters)
	if err != nil || got.TaskID != tk.TaskID {
		t.Fatalf("task from parameters: %v %v", got, err)
	}
	c, _, err := m.Args(got, req.Inputs, oip.Limits{})
	return c, err
}

func TestInputsRoundTripWithDefaults(t *testing.T) {
	world := loadModel(t, "tiny-world")
	got, err := roundTrip(t, world, "generate", map[string]any{"prompt": "a red ball ✓ \"quoted\"", "seed": int64(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"prompt": "a red ball ✓ \"quoted\"", "seed": int64(3), "num_frames": int64(9), "height": int64(32), "width": int64(32)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	got, err = roundTrip(t, world, "step", map[string]any{"speed": 0.25})
	if err != nil || got["speed"] != 0.25 {
		t.Errorf("step: %v %v", got, err)
	}

	enc := loadModel(t, "tiny-encoder")
	tok := tensor.FromInt64([]int64{1, -2, 3, math.MaxInt64, math.MinInt64, 0}, 6)
	got, err = roundTrip(t, enc, "embed", map[string]any{"tokens": tok, "normalize": false})
	if err != nil {
		t.Fatal(err)
	}
	if gt := got["tokens"].(*tensor.Tensor); !reflect.DeepEqual(gt, tok) || got["normalize"] != false {
		t.Errorf("tokens %v normalize %v, want %v false", gt, got["normalize"], tok)
	}
}

// request builds a request body with one input.
func request(name string, dt oip.Datatype, shape []int64, data string) string {
	s, _ := json.Marshal(shape)
	return `{"inputs":[{"name":"` + name + `","datatype":"` + string(dt) + `","shape":` + string(s) + `,"data":` + data + `}]}`
}

func args(m *oip.Model, task, body string, lim oip.Limits) (map[string]any, error) {
	req, err := oip.DecodeRequest([]byte(body), lim)
	if err != nil {
		return nil, err
	}
	tk, err := m.Task(oip.Parameters{"task": task})
	if err != nil {
		return nil, err
	}
	c, _, err := m.Args(tk, req.Inputs, lim)
	return c, err
}

func TestNestedDataEqualsFlat(t *testing.T) {
	enc := looseModel(t, "tiny-encoder")
	flat, err := args(enc, "embed", request("tokens", oip.Int32, []int64{2, 3}, "[1,2,3,4,5,6]"), oip.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	nested, err := args(enc, "embed", request("tokens", oip.Int32, []int64{2, 3}, " [ [1, 2,3] ,[4,5,6]] "), oip.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(flat["tokens"], nested["tokens"]) || flat["tokens"].(*tensor.Tensor).DType != tensor.Int32 {
		t.Errorf("flat %v, nested %v", flat["tokens"], nested["tokens"])
	}
	fl, err := args(enc, "embed", request("tokens", oip.FP32, []int64{3}, `[1.5,"NaN","-Infinity"]`), oip.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := fl["tokens"].(*tensor.Tensor).Float32s()
	if vals[0] != 1.5 || !math.IsNaN(float64(vals[1])) || !math.IsInf(float64(vals[2]), -1) {
		t.Errorf("floats %v", vals)
	}
}

func TestRequestErrors(t *testing.T) {
	world := loadModel(t, "tiny-world")
	enc := loadModel(t, "tiny-encoder")
	prompt := func(dt oip.Datatype, shape []int64, data string) string {
		return strings.Replace(request("prompt", dt, shape, data), `"inputs":[`, `"inputs":[{"name":"seed","datatype":"INT64","shape":[1],"data":[1]},`, 1)
	}
	cases := []struct {
		name  string
		model *oip.Model
		task  string
		body  string
		lim   oip.Limits
		want  string
	}{
		{"malformed JSON", world, "generate", `{"inputs":[`, oip.Limits{}, "malformed request body"},
		{"not an object", world, "generate", `[1,2]`, oip.Limits{}, "malformed request body"},
		{"empty", world, "generate", ``, oip.Limits{}, "empty body"},
		{"trailing data", world, "generate", `{"inputs":[]} {}`, oip.Limits{}, "data after the JSON object"},
		{"inputs not an array", world, "generate", `{"inputs":{}}`, oip.Limits{}, "inputs: JSON object where an array was expected"},
		{"unnamed input", world, "generate", request("", oip.Bytes, []int64{1}, `["x"]`), oip.Limits{}, "inputs[0]: no name"},
		{"unknown datatype", world, "generate", request("prompt", "STRING", []int64{1}, `["x"]`), oip.Limits{}, `datatype "STRING" is not an OIP datatype`},
		{"negative dim", world, "generate", request("prompt", oip.Bytes, []int64{-1}, `["x"]`), oip.Limits{}, "negative dimension"},
		{"float dim", world, "generate", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1e30],"data":["x"]}]}`, oip.Limits{}, "inputs.shape: number 1e30 is not a whole number that fits int64 (write it with digits only)"},
		{"no shape", world, "generate", `{"inputs":[{"name":"prompt","datatype":"BYTES","data":["x"]}]}`, oip.Limits{}, "no shape"},
		{"data not array", world, "generate", request("prompt", oip.Bytes, []int64{1}, `"x"`), oip.Limits{}, "data must be a JSON array"},
		{"duplicate input", world, "generate", `{"inputs":[{"name":"a","datatype":"BOOL","shape":[1],"data":[true]},{"name":"a","datatype":"BOOL","shape":[1],"data":[true]}]}`, oip.Limits{}, `input "a": given twice`},
		{"too many inputs", world, "generate", prompt(oip.Bytes, []int64{1}, `["x"]`), oip.Limits{MaxInputs: 1}, "at most 1 are allowed"},
		{"unknown task", world, "nope", prompt(oip.Bytes, []int64{1}, `["x"]`), oip.Limits{}, `has no task "nope"`},
		{"unknown input", world, "generate", request("colour", oip.Bytes, []int64{1}, `["x"]`), oip.Limits{}, `input "colour" is not a field of task "generate" (fields: prompt, seed`},
		{"missing required", world, "generate", request("seed", oip.Int64, []int64{1}, `[1]`), oip.Limits{}, "missing required input(s) prompt"},
		{"wrong datatype", world, "generate", prompt(oip.FP32, []int64{1}, `[1]`), oip.Limits{}, `input "prompt": datatype FP32, but field kind string takes BYTES`},
		{"wrong shape", world, "generate", prompt(oip.Bytes, []int64{2}, `["a","b"]`), oip.Limits{}, "shape [2], but a field of kind string is one value"},
		{"count mismatch", enc, "embed", request("tokens", oip.Int64, []int64{2, 2}, `[1,2,3]`), oip.Limits{}, "data has 3 elements, shape [2 2] holds 4"},
		{"too many elements", enc, "embed", request("tokens", oip.Int64, []int64{2}, `[1,2,3]`), oip.Limits{}, "more elements than shape [2] holds"},
		{"ragged nesting", enc, "embed", request("tokens", oip.Int64, []int64{2, 2}, `[[1,2],[3]]`), oip.Limits{}, "data has 1 elements at level 1"},
		{"mixed nesting", enc, "embed", request("tokens", oip.Int64, []int64{2, 2}, `[[1,2],3,4]`), oip.Limits{}, "mixes arrays and scalars"},
		{"too deep", enc, "embed", request("tokens", oip.Int64, []int64{2}, `[[1],[2]]`), oip.Limits{}, "nested deeper than shape"},
		{"object element", enc, "embed", request("tokens", oip.Int64, []int64{1}, `[{}]`), oip.Limits{}, "data elements must be scalars"},
		{"float for int", enc, "embed", request("tokens", oip.Int64, []int64{1}, `[1.5]`), oip.Limits{}, "1.5 is not a valid INT64 element"},
		{"int8 range", enc, "embed", request("tokens", oip.Uint8, []int64{1}, `[256]`), oip.Limits{}, "256 is not a valid UINT8 element"},
		{"no runtime dtype", enc, "embed", request("tokens", oip.FP64, []int64{1}, `[1]`), oip.Limits{}, "datatype FP64 has no runtime dtype"},
		{"string for number", enc, "embed", request("tokens", oip.FP32, []int64{1}, `["x"]`), oip.Limits{}, `"x" is not a number`},
		{"over tensor limit", enc, "embed", request("tokens", oip.Int64, []int64{1000}, `[1]`), oip.Limits{MaxTensorBytes: 4096}, "8000 bytes, above the limit of 4096 bytes"},
		{"huge shape, tiny data", enc, "embed", request("tokens", oip.Int64, []int64{1 << 40}, `[1]`), oip.Limits{}, "fewer elements than shape"},
		{"overflowing shape", enc, "embed", request("tokens", oip.Int64, []int64{1 << 40, 1 << 40}, `[1]`), oip.Limits{}, "too many elements"},
		{"rule violated", world, "generate", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[10]}]}`, oip.Limits{}, "num_frames: must be"},
		{"empty prompt", world, "generate", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":[""]}]}`, oip.Limits{}, "prompt: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := args(c.model, c.task, c.body, c.lim)
			if err == nil {
				if c.want == "" {
					return // decoded; the task parameter case is checked below
				}
				t.Fatalf("no error, want %q", c.want)
			}
			if !errors.Is(err, oip.ErrBadRequest) {
				t.Errorf("error %v does not match ErrBadRequest", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := world.Task(oip.Parameters{"task": json.Number("1")}); err == nil || !strings.Contains(err.Error(), `parameter "task" must be a string, got the number 1`) {
		t.Errorf("task parameter: %v", err)
	}
}

func TestVariantSelection(t *testing.T) {
	world := loadModel(t, "tiny-world")
	for _, c := range []struct {
		version string
		param   any
		want    string
	}{{"", nil, "default"}, {"default", nil, "default"}, {"", "default", "default"}, {"default", "default", "default"}} {
		p := oip.Parameters{}
		if c.param != nil {
			p["variant"] = c.param
		}
		v, err := world.Variant(c.version, p)
		if err != nil || v.VariantID != c.want {
			t.Errorf("version %q param %v: %v %v", c.version, c.param, v, err)
		}
	}
	if _, err := world.Variant("nope", nil); !errors.Is(err, oip.ErrBadRequest) || !strings.Contains(err.Error(), `no variant "nope"`) {
		t.Errorf("unknown version: %v", err)
	}
}

func TestOutputsRoundTrip(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "video", Kind: spec.ArtifactVideo},
		{ArtifactID: "caption", Kind: spec.ArtifactText},
		{ArtifactID: "info", Kind: spec.ArtifactJSON},
		{ArtifactID: "emb", Kind: spec.ArtifactEmbedding},
		{ArtifactID: "mask", Kind: spec.ArtifactTensor},
	}}
	video := tensor.FromUint8([]uint8{0, 1, 2, 3, 254, 255}, 1, 1, 2, 3)
	emb := tensor.FromFloat32([]float32{0.1, -2.5e-8, float32(math.Inf(1)), 3}, 4)
	mask := &tensor.Tensor{DType: tensor.Bool, Shape: []int64{2}, Data: []byte{1, 0}}
	out := map[string]any{"video": video, "caption": "hi \"there\"", "info": map[string]any{"b": []any{int64(1), "x"}, "a": true}, "emb": emb, "mask": mask}
	ts, err := oip.EncodeOutputs(task, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(oip.InferenceResponse{ModelName: "m", Outputs: ts})
	if err != nil {
		t.Fatal(err)
	}
	var resp oip.InferenceResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	got, err := oip.DecodeOutputs(task, resp.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"video": video, "caption": "hi \"there\"", "info": `{"a":true,"b":[1,"x"]}`, "emb": emb, "mask": mask}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	// The json artifact decodes to what the in-process value decodes to.
	inproc, _ := tensor.AsJSON(out["info"])
	remote, _ := tensor.AsJSON(got["info"])
	if !bytes.Equal(inproc, remote) {
		t.Errorf("json artifact: in-process %s, remote %s", inproc, remote)
	}

	only, err := oip.EncodeOutputs(task, out, []oip.RequestOutput{{Name: "caption"}})
	if err != nil || len(only) != 1 || only[0].Name != "caption" {
		t.Errorf("requested outputs: %v %v", only, err)
	}
	if err := oip.CheckOutputs(task, []oip.RequestOutput{{Name: "nope"}}); !errors.Is(err, oip.ErrBadRequest) {
		t.Errorf("unknown requested output: %v", err)
	}
}

func TestMetadata(t *testing.T) {
	md := loadModel(t, "tiny-world").Metadata()
	if md.Name != "tiny-world" || !reflect.DeepEqual(md.Versions, []string{"default"}) || md.Platform != oip.Platform {
		t.Errorf("metadata %+v", md)
	}
	b, _ := json.Marshal(md)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	in := got["inputs"].([]any)
	if len(in) != 5 {
		t.Fatalf("inputs %v", in)
	}
	prompt := in[0].(map[string]any)
	if prompt["name"] != "prompt" || prompt["datatype"] != "BYTES" || !reflect.DeepEqual(prompt["shape"], []any{1.0}) {
		t.Errorf("prompt %v", prompt)
	}
	seed := in[1].(map[string]any)
	if seed["datatype"] != "INT64" || seed["parameters"].(map[string]any)["default"] != 0.0 {
		t.Errorf("seed %v", seed)
	}
	out := got["outputs"].([]any)[0].(map[string]any)
	if out["name"] != "video" || out["datatype"] != "UINT8" || len(out["shape"].([]any)) != 4 {
		t.Errorf("video %v", out)
	}
	// Parameter values are scalars: the tasks are JSON text.
	var tasks map[string]any
	if err := json.Unmarshal([]byte(got["parameters"].(map[string]any)["tasks"].(string)), &tasks); err != nil {
		t.Fatal(err)
	}
	if step := tasks["step"].(map[string]any); step["stream"] != true {
		t.Errorf("step %v", step)
	}
	enc := loadModel(t, "tiny-encoder").Metadata()
	// The declared contracts, per item (the batch dimension N left out).
	if enc.Inputs[0].Datatype != oip.Int64 || !reflect.DeepEqual(enc.Inputs[0].Shape, []int64{-1}) ||
		enc.Outputs[0].Datatype != oip.FP32 || !reflect.DeepEqual(enc.Outputs[0].Shape, []int64{64}) ||
		!strings.Contains(enc.Parameters["tasks"].(string), `"max_batch_size":8`) {
		t.Errorf("encoder %+v", enc)
	}
}
