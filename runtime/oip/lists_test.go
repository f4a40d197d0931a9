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

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// listTask returns a task with a tensor artifact and three tensor_list
// artifacts.
func listTask() *spec.InferenceTaskProfile {
	return &spec.InferenceTaskProfile{TaskID: "split", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "total", Kind: spec.ArtifactTensor, Required: true},
		{ArtifactID: "parts", Kind: spec.ArtifactTensorList, Required: true},
		{ArtifactID: "none", Kind: spec.ArtifactTensorList},
		{ArtifactID: "extra", Kind: spec.ArtifactTensorList},
	}}
}

// listOutputs are outputs of listTask as the in-process client returns
// them: parts of three dtypes and shapes, an empty list, and extra absent.
func listOutputs() map[string]any {
	return map[string]any{
		"total": tensor.FromFloat32([]float32{6.5}),
		"parts": []any{
			tensor.FromFloat32([]float32{0.1, -2.5e-8, float32(math.Inf(-1)), 3, float32(math.NaN()), 1e30}, 2, 3),
			tensor.FromInt64([]int64{math.MinInt64, 0, math.MaxInt64}, 3),
			&tensor.Tensor{DType: tensor.Bool, Shape: []int64{0, 4}, Data: []byte{}},
		},
		"none": []*tensor.Tensor{},
	}
}

// sameTensors reports whether got holds exactly the tensors of want (a
// []any or []*tensor.Tensor), bit for bit.
func sameTensors(t *testing.T, what string, got any, want any) {
	t.Helper()
	ws, err := tensor.AsTensorList(want)
	if err != nil {
		t.Fatal(err)
	}
	gs, ok := got.([]*tensor.Tensor)
	if !ok || gs == nil || len(gs) != len(ws) {
		t.Fatalf("%s: got %#v, want %d tensors", what, got, len(ws))
	}
	for i := range ws {
		if gs[i].DType != ws[i].DType || !reflect.DeepEqual(gs[i].Shape, ws[i].Shape) || string(gs[i].Data) != string(ws[i].Data) {
			t.Errorf("%s element %d: got %v %v % x, want %v %v % x", what, i, gs[i].DType, gs[i].Shape, gs[i].Data, ws[i].DType, ws[i].Shape, ws[i].Data)
		}
	}
}

// A tensor_list artifact travels as its elements parts.0, parts.1, ...
// with their count in the response parameter parts.count, as JSON and as
// binary, and comes back bit for bit; an empty list comes back empty (not
// absent), an absent one absent.
func TestListOutputsRoundTrip(t *testing.T) {
	task := listTask()
	out := listOutputs()
	for _, binary := range []bool{false, true} {
		name := "json"
		var bin func(string) bool
		if binary {
			name, bin = "binary", func(string) bool { return true }
		}
		t.Run(name, func(t *testing.T) {
			resp := &oip.InferenceResponse{ModelName: "m", Parameters: oip.Parameters{"task": "split"}}
			if err := oip.EncodeResponse(resp, task, out, nil, bin); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range resp.Outputs {
				names = append(names, o.Name)
			}
			if want := []string{"total", "parts.0", "parts.1", "parts.2"}; !reflect.DeepEqual(names, want) {
				t.Errorf("outputs %v, want %v", names, want)
			}
			if resp.Parameters["parts.count"] != int64(3) || resp.Parameters["none.count"] != int64(0) || resp.Parameters["task"] != "split" {
				t.Errorf("parameters %v", resp.Parameters)
			}
			if _, ok := resp.Parameters["extra.count"]; ok {
				t.Errorf("an absent list has a count: %v", resp.Parameters)
			}
			header, data, err := resp.EncodeBody()
			if err != nil {
				t.Fatal(err)
			}
			body := header
			for _, d := range data {
				body = append(body, d...)
			}
			back, err := oip.DecodeBinaryResponse(body, int64(len(header)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := oip.DecodeResponse(task, back)
			if err != nil {
				t.Fatal(err)
			}
			sameTensors(t, "parts", got["parts"], out["parts"])
			sameTensors(t, "none", got["none"], out["none"])
			if _, ok := got["extra"]; ok {
				t.Errorf("extra: got %v, want absent", got["extra"])
			}
			if tot := got["total"].(*tensor.Tensor); string(tot.Data) != string(out["total"].(*tensor.Tensor).Data) {
				t.Errorf("total: %v", tot)
			}
		})
	}

	// An output filter naming the list selects all of its elements.
	resp := &oip.InferenceResponse{}
	if err := oip.EncodeResponse(resp, task, out, []oip.RequestOutput{{Name: "parts"}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 3 || resp.Outputs[2].Name != "parts.2" || len(resp.Parameters) != 1 {
		t.Errorf("outputs [parts]: %v, parameters %v", resp.Outputs, resp.Parameters)
	}
	// An element is not an artifact a request can name.
	if err := oip.CheckOutputs(task, []oip.RequestOutput{{Name: "parts.0"}}); !errors.Is(err, oip.ErrBadRequest) {
		t.Errorf("outputs [parts.0]: %v, want a bad request", err)
	}
	// Without a place for the count, a list is refused, not sent lossy.
	if _, err := oip.EncodeOutputs(task, out, nil); err == nil || !strings.Contains(err.Error(), "EncodeResponse") {
		t.Errorf("EncodeOutputs of a tensor_list: %v", err)
	}
}

func TestParseElementName(t *testing.T) {
	for name, want := range map[string]struct {
		id string
		i  int
		ok bool
	}{
		"parts.0": {"parts", 0, true}, "parts.12": {"parts", 12, true}, "a.b.3": {"a.b", 3, true},
		"parts": {}, "parts.": {}, ".3": {}, "parts.01": {}, "parts.-1": {}, "parts.+1": {}, "parts.1e3": {},
		"parts.count": {}, "parts.99999999999999999999999": {}, "parts. 1": {},
	} {
		id, i, ok := oip.ParseElementName(name)
		if id != want.id || i != want.i || ok != want.ok {
			t.Errorf("ParseElementName(%q) = %q, %d, %v, want %q, %d, %v", name, id, i, ok, want.id, want.i, want.ok)
		}
		if ok && oip.ElementName(id, i) != name {
			t.Errorf("ElementName(%q, %d) = %q, want %q", id, i, oip.ElementName(id, i), name)
		}
	}
}

// element is a JSON FP32 [1] output named name.
func element(name string) oip.Tensor {
	return oip.Tensor{Name: name, Datatype: oip.FP32, Shape: []int64{1}, Data: json.RawMessage(`[1]`)}
}

// A malformed list from a server is an error that names the artifact,
// never a panic and never a silently shorter or longer list.
func TestListDecodeErrors(t *testing.T) {
	task := listTask()
	total := element("total")
	for _, c := range []struct {
		name   string
		outs   []string
		params oip.Parameters
		want   string
	}{
		{"gap", []string{"parts.0", "parts.2"}, oip.Parameters{"parts.count": int64(2)}, `element parts.1 is missing (a list of 2 is parts.0 to parts.1), and parts.2 is beyond it`},
		{"duplicate", []string{"parts.0", "parts.0"}, oip.Parameters{"parts.count": int64(2)}, `output "parts.0": given twice`},
		{"huge index", []string{"parts.0", "parts.9223372036854775807"}, oip.Parameters{"parts.count": int64(2)}, `parts.9223372036854775807 is beyond it`},
		{"huge count", []string{"parts.0"}, oip.Parameters{"parts.count": json.Number("4611686018427387904")}, `says 4611686018427387904 elements, and the response has 1`},
		{"count beyond int64", nil, oip.Parameters{"parts.count": json.Number("99999999999999999999")}, `response parameter "parts.count": want the element count, an integer`},
		{"negative count", nil, oip.Parameters{"parts.count": int64(-1)}, `is -1, not an element count`},
		{"count as a string", nil, oip.Parameters{"parts.count": "2"}, `want the element count, an integer`},
		{"float count", nil, oip.Parameters{"parts.count": json.Number("1.5")}, `want the element count, an integer`},
		{"more than the count", []string{"parts.0", "parts.1"}, oip.Parameters{"parts.count": int64(1)}, `says 1 elements, and the response has 2`},
		{"fewer than the count", []string{"parts.0"}, oip.Parameters{"parts.count": int64(2)}, `says 2 elements, and the response has 1`},
		{"no count", []string{"parts.0"}, nil, `the response has 1 elements (parts.0) but no parameter "parts.count"`},
		{"the list as one tensor", []string{"parts"}, oip.Parameters{"parts.count": int64(0)}, `artifact "parts" is a tensor_list, which travels as its elements parts.0, parts.1, ...`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &oip.InferenceResponse{Parameters: c.params, Outputs: []oip.Tensor{total}}
			for _, n := range c.outs {
				resp.Outputs = append(resp.Outputs, element(n))
			}
			got, err := oip.DecodeResponse(task, resp)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, %v; want an error saying %s", got, err, c.want)
			}
		})
	}
	// Names that are no element (a leading zero, an index beyond an int)
	// are outputs of no artifact, ignored as such; the count still holds.
	resp := &oip.InferenceResponse{Parameters: oip.Parameters{"parts.count": int64(1)},
		Outputs: []oip.Tensor{element("parts.0"), element("parts.00"), element("parts.99999999999999999999")}}
	if got, err := oip.DecodeResponse(task, resp); err != nil || len(got["parts"].([]*tensor.Tensor)) != 1 {
		t.Errorf("non-element names: %v, %v", got, err)
	}
	// DecodeOutputs has no parameters: a list's elements need DecodeResponse.
	if _, err := oip.DecodeOutputs(task, resp.Outputs); err == nil || !strings.Contains(err.Error(), "DecodeResponse") {
		t.Errorf("DecodeOutputs of list elements: %v", err)
	}
}

// FuzzDecodeListResponse feeds arbitrary response JSON to DecodeResponse
// for a task with tensor_list, record and record_list artifacts: nothing
// may panic, and what decodes holds lists of exactly their count, records
// of exactly their count of keys, and every required key of every dict,
// each from its own output.
func FuzzDecodeListResponse(f *testing.F) {
	for _, s := range []string{
		`{"model_name":"m","parameters":{"parts.count":2},"outputs":[{"name":"parts.1","datatype":"FP32","shape":[1],"data":[1]},{"name":"parts.0","datatype":"INT64","shape":[0],"data":[]}]}`,
		`{"parameters":{"parts.count":0,"none.count":0},"outputs":[]}`,
		`{"parameters":{"parts.count":3},"outputs":[{"name":"parts.0","datatype":"FP32","shape":[1],"data":[1]},{"name":"parts.2","datatype":"FP32","shape":[1],"data":[1]},{"name":"parts.2","datatype":"FP32","shape":[1],"data":[1]}]}`,
		`{"parameters":{"parts.count":9223372036854775807},"outputs":[{"name":"parts.9223372036854775806","datatype":"FP32","shape":[1],"data":[1]}]}`,
		`{"parameters":{"parts.count":-3},"outputs":[]}`,
		`{"parameters":{"parts.count":"x"},"outputs":[{"name":"parts","datatype":"FP32","shape":[1],"data":[1]}]}`,
		`{"outputs":[{"name":"parts.0","datatype":"FP32","shape":[2],"data":[1]}],"parameters":{"parts.count":1}}`,
		`{"parameters":{"losses.count":1,"detections.count":2},"outputs":[{"name":"losses.classification","datatype":"FP32","shape":[],"data":[1]},` +
			`{"name":"detections.0.boxes","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]},{"name":"detections.0.labels","datatype":"INT64","shape":[1],"data":[7]},` +
			`{"name":"detections.1.boxes","datatype":"FP32","shape":[0,4],"data":[]},{"name":"detections.1.labels","datatype":"INT64","shape":[0],"data":[]}]}`,
		`{"parameters":{"losses.count":0,"detections.count":0,"aux.count":0},"outputs":[]}`,
		`{"parameters":{"detections.count":3},"outputs":[{"name":"detections.2.boxes","datatype":"FP32","shape":[1],"data":[1]},{"name":"detections.2.labels","datatype":"INT64","shape":[1],"data":[1]}]}`,
		`{"parameters":{"losses.count":2},"outputs":[{"name":"losses.classification","datatype":"FP32","shape":[1],"data":[1]},{"name":"losses.x","datatype":"FP32","shape":[1],"data":[1]}]}`,
		`{"parameters":{"detections.count":1},"outputs":[{"name":"detections.0.0.boxes","datatype":"FP32","shape":[1],"data":[1]},{"name":"detections","datatype":"FP32","shape":[1],"data":[1]}]}`,
	} {
		f.Add([]byte(s))
	}
	task := listTask()
	task.Outputs = append(task.Outputs, recordTask().Outputs...)
	f.Fuzz(func(t *testing.T, body []byte) {
		var resp oip.InferenceResponse
		if json.Unmarshal(body, &resp) != nil {
			return
		}
		got, err := oip.DecodeResponse(task, &resp)
		if err != nil {
			return
		}
		for _, id := range []string{"parts", "none", "extra"} {
			v, ok := got[id]
			if !ok {
				continue
			}
			n, _, _ := resp.Parameters.IntParam(oip.CountParameter(id))
			if ts := v.([]*tensor.Tensor); int64(len(ts)) != n {
				t.Fatalf("%s: %d tensors for a count of %d", id, len(ts), n)
			}
			for i := range n {
				if !hasOutput(resp.Outputs, oip.ElementName(id, int(i))) {
					t.Fatalf("%s: element %d decoded without its output", id, i)
				}
			}
		}
		for _, a := range task.Outputs[4:] {
			v, ok := got[a.ArtifactID]
			if !ok {
				continue
			}
			n, _, _ := resp.Parameters.IntParam(oip.CountParameter(a.ArtifactID))
			checkDict := func(d map[string]any, name func(key string) string) {
				for _, f := range a.Fields {
					_, has := d[f.Name]
					if f.Required && !has || has && !hasOutput(resp.Outputs, name(f.Name)) {
						t.Fatalf("%s: key %s decoded %v without its output %s", a.ArtifactID, f.Name, has, name(f.Name))
					}
				}
			}
			if a.Kind == spec.ArtifactRecord {
				d := v.(map[string]any)
				if int64(len(d)) != n {
					t.Fatalf("%s: %d keys for a count of %d", a.ArtifactID, len(d), n)
				}
				checkDict(d, func(k string) string { return oip.KeyName(a.ArtifactID, k) })
				continue
			}
			list := v.([]any)
			if int64(len(list)) != n {
				t.Fatalf("%s: %d dicts for a count of %d", a.ArtifactID, len(list), n)
			}
			for i, d := range list {
				checkDict(d.(map[string]any), func(k string) string { return oip.ItemKeyName(a.ArtifactID, i, k) })
			}
		}
	})
}

func hasOutput(outs []oip.Tensor, name string) bool {
	for _, o := range outs {
		if o.Name == name {
			return true
		}
	}
	return false
}

// The OpenAPI document's response schema names a list's elements by
// pattern: a real answer validates, the list as one tensor or an element
// with a leading zero does not.
func TestListOpenAPI(t *testing.T) {
	f, diags, err := validate.File(filepath.Join("..", "..", "golden", "structured", "input", "structured.yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest: %v %v", err, diags)
	}
	doc, err := oip.OpenAPI(f.Spec)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource("doc.json", bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("doc.json#/components/schemas/golden-structured.split.InferResponse")
	if err != nil {
		t.Fatal(err)
	}
	split, _ := f.Spec.Task("split")
	resp := &oip.InferenceResponse{ModelName: "golden-structured", Parameters: oip.Parameters{"task": "split"}}
	parts := []*tensor.Tensor{tensor.FromFloat32([]float32{1, 2}, 1, 2), tensor.FromFloat32([]float32{3, 4, 5, 6}, 2, 2)}
	if err := oip.EncodeResponse(resp, split, map[string]any{"total": tensor.FromFloat32([]float32{21}), "parts": parts}, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rename string
		valid  bool
	}{{"parts.1", true}, {"parts", false}, {"parts.01", false}, {"parts.x", false}} {
		resp.Outputs[2].Name = c.rename
		b, _ := json.Marshal(resp)
		var v any
		json.Unmarshal(b, &v)
		if err := sch.Validate(v); (err == nil) != c.valid {
			t.Errorf("an element named %q: validation error %v, want valid %v", c.rename, err, c.valid)
		}
	}
}
