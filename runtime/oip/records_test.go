package oip_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// recordTask returns a detector's task: a record of two optional keys, a
// record_list of two required keys and an optional one, and an optional
// record that the outputs leave absent.
func recordTask() *spec.InferenceTaskProfile {
	return &spec.InferenceTaskProfile{TaskID: "detect", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "losses", Kind: spec.ArtifactRecord, Required: true, Fields: []spec.ArtifactFieldSpec{
			{Name: "classification"}, {Name: "bbox_regression"}}},
		{ArtifactID: "detections", Kind: spec.ArtifactRecordList, Required: true, Fields: []spec.ArtifactFieldSpec{
			{Name: "boxes", Required: true, DType: tensor.Float32, Shape: spec.Shape{"K", "4"}},
			{Name: "labels", Required: true, DType: tensor.Int64},
			{Name: "masks"}}},
		{ArtifactID: "aux", Kind: spec.ArtifactRecord, Fields: []spec.ArtifactFieldSpec{{Name: "x"}}},
	}}
}

// recordOutputs are outputs of recordTask as the in-process client
// returns them: losses with one key, three images (the second without
// detections, only the first with masks, keys the manifest does not
// declare), aux absent.
func recordOutputs() map[string]any {
	det := func(k int64, masks bool) map[string]any {
		boxes := make([]float32, 4*k)
		labels := make([]int64, k)
		for i := range boxes {
			boxes[i] = float32(i)*0.3 - 1e-7
		}
		for i := range labels {
			labels[i] = int64(i) - 1<<40
		}
		m := map[string]any{"boxes": tensor.FromFloat32(boxes, k, 4), "labels": tensor.FromInt64(labels, k), "undeclared": tensor.FromFloat32([]float32{1})}
		if masks {
			m["masks"] = &tensor.Tensor{DType: tensor.Bool, Shape: []int64{k}, Data: []byte{1, 0}[:k]}
		}
		return m
	}
	return map[string]any{
		"losses":     map[string]any{"bbox_regression": tensor.FromFloat32([]float32{0.25}), "other": tensor.FromFloat32([]float32{2})},
		"detections": []any{det(2, true), det(0, false), det(1, false)},
	}
}

// sameTensor fails unless got is the tensor want is, bit for bit.
func sameTensor(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := got.(*tensor.Tensor)
	w := want.(*tensor.Tensor)
	if g == nil || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || string(g.Data) != string(w.Data) {
		t.Errorf("%s: got %v, want %v %v % x", what, got, w.DType, w.Shape, w.Data)
	}
}

// sameDict fails unless got (a decoded dict) holds exactly want's keys
// that the artifact declares, bit for bit.
func sameDict(t *testing.T, what string, a *spec.InferenceArtifactSpec, got any, want map[string]any) {
	t.Helper()
	g, ok := got.(map[string]any)
	if !ok {
		t.Fatalf("%s: got %T, want a dict", what, got)
	}
	n := 0
	for _, f := range a.Fields {
		if w, ok := want[f.Name]; ok {
			n++
			sameTensor(t, what+" key "+f.Name, g[f.Name], w)
		}
	}
	if len(g) != n {
		t.Errorf("%s: got the keys %v, want %d", what, g, n)
	}
}

// A record travels as its keys losses.KEY, a record_list as the keys of
// its elements detections.I.KEY, each with its count in the response
// parameter ID.count, as JSON and as binary; they come back bit for bit
// in the in-process client's form: an element without detections keeps
// its place, a missing optional key stays missing, keys the manifest does
// not declare are not sent, an absent record stays absent.
func TestRecordOutputsRoundTrip(t *testing.T) {
	task := recordTask()
	out := recordOutputs()
	for _, binary := range []bool{false, true} {
		name := "json"
		var bin func(string) bool
		if binary {
			name, bin = "binary", func(string) bool { return true }
		}
		t.Run(name, func(t *testing.T) {
			resp := &oip.InferenceResponse{ModelName: "m"}
			if err := oip.EncodeResponse(resp, task, out, nil, bin); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range resp.Outputs {
				names = append(names, o.Name)
			}
			want := []string{"losses.bbox_regression", "detections.0.boxes", "detections.0.labels", "detections.0.masks",
				"detections.1.boxes", "detections.1.labels", "detections.2.boxes", "detections.2.labels"}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("outputs %v, want %v", names, want)
			}
			if !reflect.DeepEqual(resp.Parameters, oip.Parameters{"losses.count": int64(1), "detections.count": int64(3)}) {
				t.Errorf("parameters %v", resp.Parameters)
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
			sameDict(t, "losses", &task.Outputs[0], got["losses"], out["losses"].(map[string]any))
			dets, ok := got["detections"].([]any)
			if !ok || len(dets) != 3 {
				t.Fatalf("detections: %#v", got["detections"])
			}
			for i, w := range out["detections"].([]any) {
				sameDict(t, "detections "+string(rune('0'+i)), &task.Outputs[1], dets[i], w.(map[string]any))
			}
			if _, ok := got["aux"]; ok {
				t.Errorf("aux: got %v, want absent", got["aux"])
			}
		})
	}

	// A record without keys and an empty record_list are there, and
	// empty: their counts are 0.
	resp := &oip.InferenceResponse{}
	if err := oip.EncodeResponse(resp, task, map[string]any{"losses": map[string]any{}, "detections": []any{}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 0 || resp.Parameters["losses.count"] != int64(0) || resp.Parameters["detections.count"] != int64(0) {
		t.Errorf("empty: outputs %v, parameters %v", resp.Outputs, resp.Parameters)
	}
	got, err := oip.DecodeResponse(task, resp)
	if l, ok := got["losses"].(map[string]any); err != nil || !ok || len(l) != 0 {
		t.Errorf("an empty record: %#v, %v", got, err)
	}
	if d, ok := got["detections"].([]any); !ok || d == nil || len(d) != 0 {
		t.Errorf("an empty record_list: %#v", got["detections"])
	}

	// An output filter naming the artifact selects all of its tensors;
	// a tensor's own name is no artifact a request can name.
	resp = &oip.InferenceResponse{}
	if err := oip.EncodeResponse(resp, task, out, []oip.RequestOutput{{Name: "detections"}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 7 || resp.Outputs[6].Name != "detections.2.labels" || len(resp.Parameters) != 1 {
		t.Errorf("outputs [detections]: %v, parameters %v", resp.Outputs, resp.Parameters)
	}
	for _, name := range []string{"losses.classification", "detections.0.boxes", "detections.0"} {
		if err := oip.CheckOutputs(task, []oip.RequestOutput{{Name: name}}); !errors.Is(err, oip.ErrBadRequest) {
			t.Errorf("outputs [%s]: %v, want a bad request", name, err)
		}
	}
	// Without a place for the count, a record is refused, not sent lossy.
	if _, err := oip.EncodeOutputs(task, out, nil); err == nil || !strings.Contains(err.Error(), "EncodeResponse") {
		t.Errorf("EncodeOutputs of a record: %v", err)
	}
}

// What the model returned wrong is an error at the server, as in
// process: a required key missing, a value of another form.
func TestRecordEncodeErrors(t *testing.T) {
	task := recordTask()
	boxes := tensor.FromFloat32(make([]float32, 4), 1, 4)
	for _, c := range []struct {
		name string
		out  map[string]any
		want string
	}{
		{"a required key", map[string]any{"detections": []any{map[string]any{"boxes": boxes}}},
			`artifact "detections": element 0: required key(s) "labels" missing: the dict has the keys "boxes"`},
		{"no list", map[string]any{"detections": map[string]any{"boxes": boxes}},
			`artifact "detections": want a list of dicts of tensors (List[Dict[str, Tensor]]), got map[string]interface {}`},
		{"no dict", map[string]any{"losses": boxes}, `artifact "losses": want a dict of tensors (Dict[str, Tensor]), got *tensor.Tensor`},
		{"no tensor", map[string]any{"losses": map[string]any{"classification": "x"}}, `artifact "losses": key "classification": want a tensor, got`},
	} {
		resp := &oip.InferenceResponse{}
		if err := oip.EncodeResponse(resp, task, c.out, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %s", c.name, err, c.want)
		}
	}
}

// A malformed answer of a server is an error that names the artifact and
// the output, never a panic, never a record with a key missing or a list
// of another length.
func TestRecordDecodeErrors(t *testing.T) {
	task := recordTask()
	two := oip.Parameters{"detections.count": int64(2)}
	full := []string{"detections.0.boxes", "detections.0.labels", "detections.1.boxes", "detections.1.labels"}
	for _, c := range []struct {
		name   string
		outs   []string
		params oip.Parameters
		want   string
	}{
		{"a required key missing", []string{"detections.0.boxes", "detections.0.labels", "detections.1.boxes"}, two,
			`artifact "detections": element 1: required key "labels" missing: the response has no output detections.1.labels`},
		{"a gap", []string{"detections.0.boxes", "detections.0.labels", "detections.2.boxes", "detections.2.labels"}, oip.Parameters{"detections.count": int64(3)},
			`artifact "detections": element 1: required key "boxes" missing: the response has no output detections.1.boxes`},
		{"beyond the count", full, oip.Parameters{"detections.count": int64(1)},
			`response parameter "detections.count" says 1 elements, and the response has detections.1.boxes, beyond them`},
		{"a count beyond the elements", full, oip.Parameters{"detections.count": int64(4611686018427387904)},
			`element 2: required key "boxes" missing`},
		{"no count", full, nil, `artifact "detections": the response has tensors of it (detections.0.boxes) but no parameter "detections.count"`},
		{"a negative count", nil, oip.Parameters{"detections.count": int64(-2)}, `is -2, not a count`},
		{"a count as a string", nil, oip.Parameters{"detections.count": "2"}, `want the element count, an integer`},
		{"an unknown key", append([]string{"detections.1.masks_v2"}, full...), two,
			`output "detections.1.masks_v2": "masks_v2" is no key of artifact "detections" (record_list; keys: boxes, labels, masks)`},
		{"an unknown key of a record", []string{"losses.total"}, oip.Parameters{"losses.count": int64(1)},
			`output "losses.total": "total" is no key of artifact "losses" (record; keys: classification, bbox_regression)`},
		{"an empty key", []string{"losses."}, oip.Parameters{"losses.count": int64(1)}, `output "losses.": "" is no key of artifact "losses"`},
		{"no index", []string{"detections.boxes"}, two, `output "detections.boxes": artifact "detections" is a record_list, whose tensors are named detections.0.KEY`},
		{"a leading zero", []string{"detections.01.boxes"}, two, `output "detections.01.boxes": artifact "detections" is a record_list`},
		{"a record's keys miscounted", []string{"losses.classification"}, oip.Parameters{"losses.count": int64(2)},
			`response parameter "losses.count" says 2 keys, and the response has 1 (losses.classification)`},
		{"a record's keys without a count", []string{"losses.classification"}, nil, `no parameter "losses.count" giving the number of keys`},
		{"a key given twice", []string{"losses.classification", "losses.classification"}, oip.Parameters{"losses.count": int64(2)}, `output "losses.classification": given twice`},
		{"the record as one tensor", []string{"losses"}, oip.Parameters{"losses.count": int64(0)}, `artifact "losses" is a record, which travels as its keys losses.KEY`},
		{"the list as one tensor", []string{"detections"}, oip.Parameters{"detections.count": int64(0)}, `artifact "detections" is a record_list, which travels as the keys of its elements`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &oip.InferenceResponse{Parameters: c.params}
			for _, n := range c.outs {
				resp.Outputs = append(resp.Outputs, element(n))
			}
			got, err := oip.DecodeResponse(task, resp)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, %v; want an error saying %s", got, err, c.want)
			}
		})
	}

	// A record_list without required keys holds dicts without tensors;
	// the count alone cannot make a client allocate millions of them.
	opt := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "d", Kind: spec.ArtifactRecordList, Fields: []spec.ArtifactFieldSpec{{Name: "x"}}}}}
	got, err := oip.DecodeResponse(opt, &oip.InferenceResponse{Parameters: oip.Parameters{"d.count": int64(3)}, Outputs: []oip.Tensor{element("d.1.x")}})
	if d, ok := got["d"].([]any); err != nil || !ok || len(d) != 3 || len(d[0].(map[string]any)) != 0 || len(d[1].(map[string]any)) != 1 {
		t.Errorf("dicts without keys: %#v, %v", got, err)
	}
	if _, err := oip.DecodeResponse(opt, &oip.InferenceResponse{Parameters: oip.Parameters{"d.count": int64(1) << 40}}); err == nil || !strings.Contains(err.Error(), "dicts without keys") {
		t.Errorf("a huge count of dicts without keys: %v", err)
	}
	// DecodeOutputs has no parameters: a record's tensors need DecodeResponse.
	if _, err := oip.DecodeOutputs(task, []oip.Tensor{element("losses.classification")}); err == nil || !strings.Contains(err.Error(), "DecodeResponse") {
		t.Errorf("DecodeOutputs of a record's keys: %v", err)
	}
}

// Model metadata describes a record under its id, with the names its
// tensors travel as, its count parameter and each key's datatype and
// shape.
func TestRecordMetadata(t *testing.T) {
	mds := oip.TaskOutputs(recordTask())
	det := mds[1]
	if det.Name != "detections" || det.Datatype != oip.AnyDatatype || det.Shape != nil ||
		det.Parameters["kind"] != "record_list" || det.Parameters["count_parameter"] != "detections.count" ||
		det.Parameters["elements"] != "detections.0.boxes, detections.0.labels, detections.0.masks, detections.1.boxes, ..." {
		t.Errorf("detections: %+v", det)
	}
	var fields []struct {
		Name     string
		Datatype oip.Datatype
		Shape    []int64
		Required bool
	}
	if err := json.Unmarshal([]byte(det.Parameters["fields"].(string)), &fields); err != nil {
		t.Fatal(err)
	}
	if len(fields) != 3 || fields[0].Name != "boxes" || fields[0].Datatype != oip.FP32 || !reflect.DeepEqual(fields[0].Shape, []int64{-1, 4}) || !fields[0].Required ||
		fields[1].Datatype != oip.Int64 || fields[1].Shape != nil || fields[2].Required {
		t.Errorf("detections' fields: %s", det.Parameters["fields"])
	}
	if l := mds[0]; l.Parameters["elements"] != "losses.classification, losses.bbox_regression" || l.Parameters["count_parameter"] != "losses.count" {
		t.Errorf("losses: %+v", l)
	}
}

// The OpenAPI document's response schema names a record's outputs by
// pattern with each key's datatype: a real answer validates; an
// undeclared key, an element without its index, a key of another
// datatype do not.
func TestRecordOpenAPI(t *testing.T) {
	f, diags, err := validate.File(filepath.Join("..", "..", "golden", "records", "input", "records.yaml"))
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
	sch, err := c.Compile("doc.json#/components/schemas/golden-records.detect.InferResponse")
	if err != nil {
		t.Fatal(err)
	}
	detect, _ := f.Spec.Task("detect")
	resp := &oip.InferenceResponse{ModelName: "golden-records", Parameters: oip.Parameters{"task": "detect"}}
	out := map[string]any{
		"losses": map[string]any{"classification": tensor.FromFloat32([]float32{1})},
		"detections": []any{map[string]any{
			"boxes": tensor.FromFloat32([]float32{1, 2, 3, 4}, 1, 4), "labels": tensor.FromInt64([]int64{7}, 1), "scores": tensor.FromFloat32([]float32{0.5}, 1)}},
	}
	if err := oip.EncodeResponse(resp, detect, out, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		output, rename string
		datatype       oip.Datatype
		valid          bool
	}{
		{"detections.0.labels", "detections.0.labels", oip.Int64, true},
		{"detections.0.labels", "detections.12.labels", oip.Int64, true},
		{"losses.classification", "losses.bbox_regression", oip.FP32, true},
		{"detections.0.labels", "detections.0.masks", oip.Int64, false},
		{"detections.0.labels", "detections.labels", oip.Int64, false},
		{"detections.0.labels", "detections.01.labels", oip.Int64, false},
		{"detections.0.labels", "detections.0.labels", oip.FP32, false},
		{"detections.0.boxes", "detections.0.boxes", oip.FP32, true},
		{"losses.classification", "losses", oip.FP32, false},
	} {
		r := *resp
		r.Outputs = slices.Clone(resp.Outputs)
		i := slices.IndexFunc(r.Outputs, func(o oip.Tensor) bool { return o.Name == c.output })
		r.Outputs[i].Name, r.Outputs[i].Datatype = c.rename, c.datatype
		b, _ := json.Marshal(&r)
		var v any
		json.Unmarshal(b, &v)
		if err := sch.Validate(v); (err == nil) != c.valid {
			t.Errorf("%s as %s %s: validation error %v, want valid %v", c.output, c.rename, c.datatype, err, c.valid)
		}
	}
}
