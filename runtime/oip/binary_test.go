package oip_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// binaryRequest returns the body of req with the binary tensor data
// extension and the length of its JSON part.
func binaryRequest(t testing.TB, req *oip.InferenceRequest) ([]byte, int64) {
	t.Helper()
	header, data, err := req.EncodeBody()
	if err != nil {
		t.Fatal(err)
	}
	return append(header, bytes.Join(data, nil)...), int64(len(header))
}

// TestBinaryInputsDecodeAsJSON encodes the same kwargs as JSON and binary
// inputs: both decode to the same call kwargs, tensor bytes included
// (NaN, infinities and half floats too).
func TestBinaryInputsDecodeAsJSON(t *testing.T) {
	m := looseModel(t, "tiny-encoder")
	task, _ := m.Spec.Task("embed")
	f16 := &tensor.Tensor{DType: tensor.Float16, Shape: []int64{2, 3}, Data: []byte{0, 0x3c, 0, 0x7c, 0, 0xfc, 0, 0x7e, 0xff, 0x7b, 0, 0x80}}
	for _, tokens := range []*tensor.Tensor{
		tensor.FromInt64([]int64{1, -2, math.MaxInt64, math.MinInt64}, 2, 2),
		tensor.FromFloat32([]float32{1.5, float32(math.NaN()), float32(math.Inf(-1)), -0.0}, 4),
		f16,
		tensor.FromUint8([]uint8{0, 255}, 2),
		{DType: tensor.Bool, Shape: []int64{3}, Data: []byte{1, 0, 1}},
		tensor.FromInt64(nil, 0),
	} {
		call := map[string]any{"tokens": tokens, "normalize": false}
		js, err := oip.EncodeInputs(task, call, nil)
		if err != nil {
			t.Fatal(err)
		}
		bin, err := oip.EncodeInputsBinary(task, call, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bin[0].IsBinary() || bin[0].Data != nil || bin[1].IsBinary() {
			t.Fatalf("binary inputs %+v", bin)
		}
		body, n := binaryRequest(t, &oip.InferenceRequest{Inputs: bin})
		req, err := oip.DecodeBinaryRequest(body, n, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := m.Args(task, js, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := m.Args(task, req.Inputs, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		w, g := want["tokens"].(*tensor.Tensor), got["tokens"].(*tensor.Tensor)
		if w.DType != g.DType || !bytes.Equal(w.Data, g.Data) || len(g.Data) != len(tokens.Data) || got["normalize"] != false {
			t.Errorf("%s%v: JSON %v, binary %v", tokens.DType, tokens.Shape, w.Data, g.Data)
		}
		if len(g.Data) > 0 && &g.Data[0] == &body[n] {
			t.Error("the decoded tensor shares the body")
		}
	}
}

// TestBinaryScalarInputs sends every scalar and list field kind binary,
// in every datatype the kind accepts.
func TestBinaryScalarInputs(t *testing.T) {
	m := loadModel(t, "tiny-world")
	task, _ := m.Spec.Task("generate")
	le := binary.LittleEndian
	for _, c := range []struct {
		datatype oip.Datatype
		raw      []byte
		want     int64
	}{
		{oip.Int8, []byte{0x11}, 17},
		{oip.Uint8, []byte{200}, 200},
		{oip.Int16, le.AppendUint16(nil, 1234), 1234},
		{oip.Uint16, le.AppendUint16(nil, 65535), 65535},
		{oip.Int32, le.AppendUint32(nil, 99), 99},
		{oip.Uint32, le.AppendUint32(nil, 4000000000), 4000000000},
		{oip.Int64, le.AppendUint64(nil, 5), 5},
		{oip.Uint64, le.AppendUint64(nil, 6), 6},
	} {
		prompt := le.AppendUint32(nil, 3)
		prompt = append(prompt, "sea"...)
		req := &oip.InferenceRequest{Inputs: []oip.Tensor{
			{Name: "prompt", Datatype: oip.Bytes, Shape: []int64{1}, Parameters: oip.Parameters{oip.BinaryDataSize: int64(len(prompt))}, Raw: prompt},
			{Name: "seed", Datatype: c.datatype, Shape: []int64{1}, Parameters: oip.Parameters{oip.BinaryDataSize: int64(len(c.raw))}, Raw: c.raw},
		}}
		body, n := binaryRequest(t, req)
		dec, err := oip.DecodeBinaryRequest(body, n, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		call, _, err := m.Args(task, dec.Inputs, oip.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.datatype, err)
		}
		if call["seed"] != c.want || call["prompt"] != "sea" {
			t.Errorf("%s: %v", c.datatype, call)
		}
	}

	// Floats and bools of a stream task: speed FP16, FP32, FP64, BF16.
	step, _ := m.Spec.Task("step")
	for _, c := range []struct {
		datatype oip.Datatype
		raw      []byte
	}{
		{oip.FP16, le.AppendUint16(nil, 0x4200)},
		{oip.BF16, le.AppendUint16(nil, 0x4040)},
		{oip.FP32, le.AppendUint32(nil, math.Float32bits(3))},
		{oip.FP64, le.AppendUint64(nil, math.Float64bits(3))},
	} {
		req := &oip.InferenceRequest{Inputs: []oip.Tensor{{Name: "speed", Datatype: c.datatype, Shape: []int64{1}, Parameters: oip.Parameters{oip.BinaryDataSize: int64(len(c.raw))}, Raw: c.raw}}}
		body, n := binaryRequest(t, req)
		dec, err := oip.DecodeBinaryRequest(body, n, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		call, _, err := m.Args(step, dec.Inputs, oip.Limits{})
		if err != nil || call["speed"] != 3.0 {
			t.Errorf("%s: %v %v", c.datatype, call, err)
		}
	}
}

// TestBinaryOutputs encodes outputs binary (all, some, none), writes the
// body, decodes it as a client does, and gets the values back exactly.
func TestBinaryOutputs(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "video", Kind: spec.ArtifactVideo},
		{ArtifactID: "caption", Kind: spec.ArtifactText},
		{ArtifactID: "info", Kind: spec.ArtifactJSON},
		{ArtifactID: "emb", Kind: spec.ArtifactEmbedding},
		{ArtifactID: "empty", Kind: spec.ArtifactTensor},
	}}
	out := map[string]any{
		"video":   tensor.FromUint8([]uint8{0, 1, 2, 3, 254, 255}, 1, 1, 2, 3),
		"caption": "hi \"there\" \u00e9",
		"info":    map[string]any{"a": true},
		"emb":     tensor.FromFloat32([]float32{0.1, float32(math.NaN()), float32(math.Inf(1))}, 3),
		"empty":   tensor.FromFloat32(nil, 0, 4),
	}
	for _, c := range []struct {
		req        string // parameters and outputs of the request
		binary     []string
		wantBinary bool
	}{
		{`{"parameters":{"binary_data_output":true}}`, []string{"video", "caption", "info", "emb", "empty"}, true},
		{`{"outputs":[{"name":"emb","parameters":{"binary_data":true}},{"name":"caption"}]}`, []string{"emb"}, true},
		{`{"parameters":{"binary_data_output":true},"outputs":[{"name":"emb","parameters":{"binary_data":false}},{"name":"empty"}]}`, []string{"empty"}, true},
		{`{"parameters":{"binary_data_output":false},"outputs":[{"name":"emb","parameters":{"binary_data":false}}]}`, nil, false},
		{`{}`, nil, false},
	} {
		req, err := oip.DecodeRequest([]byte(c.req), oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		bin, err := oip.BinaryOutputs(req)
		if err != nil {
			t.Fatal(err)
		}
		if (bin != nil) != c.wantBinary {
			t.Fatalf("%s: binary %v", c.req, bin != nil)
		}
		outs, err := oip.EncodeOutputsBinary(task, out, req.Outputs, bin)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range outs {
			if o.IsBinary() {
				got = append(got, o.Name)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.binary, ",") {
			t.Errorf("%s: binary outputs %v, want %v", c.req, got, c.binary)
		}
		resp := &oip.InferenceResponse{ModelName: "m", Outputs: outs}
		header, data, err := resp.EncodeBody()
		if err != nil {
			t.Fatal(err)
		}
		if (data != nil) != c.wantBinary {
			t.Errorf("%s: data %v", c.req, data)
		}
		back, err := oip.DecodeBinaryResponse(append(header, bytes.Join(data, nil)...), int64(len(header)))
		if err != nil {
			t.Fatal(err)
		}
		vals, err := oip.DecodeOutputs(task, back.Outputs)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := oip.DecodeOutputs(task, mustJSON(t, task, out, req.Outputs))
		for k, w := range want {
			if wt, ok := w.(*tensor.Tensor); ok {
				g := vals[k].(*tensor.Tensor)
				if !bytes.Equal(wt.Data, g.Data) || wt.DType != g.DType || !slices.Equal(wt.Shape, g.Shape) {
					t.Errorf("%s: %s differs: %v %v", c.req, k, wt, g)
				}
			} else if vals[k] != w {
				t.Errorf("%s: %s is %q, want %q", c.req, k, vals[k], w)
			}
		}
	}
	// A parameter that is not a boolean.
	for _, body := range []string{`{"parameters":{"binary_data_output":1}}`, `{"outputs":[{"name":"emb","parameters":{"binary_data":"true"}}]}`} {
		req, _ := oip.DecodeRequest([]byte(body), oip.Limits{})
		if _, err := oip.BinaryOutputs(req); !errors.Is(err, oip.ErrBadRequest) {
			t.Errorf("%s: %v", body, err)
		}
	}
	// A response whose sizes do not add up.
	for _, c := range []struct{ body, want string }{
		{`{"outputs":[{"name":"emb","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":8}}]}1234`, "runs past the body"},
		{`{"outputs":[{"name":"emb","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]}12345`, "more binary data"},
		{`{"outputs":[}`, "JSON part"},
	} {
		if _, err := oip.DecodeBinaryResponse([]byte(c.body), int64(strings.LastIndexByte(c.body, '}')+1)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
}

func mustJSON(t *testing.T, task *spec.InferenceTaskProfile, out map[string]any, want []oip.RequestOutput) []oip.Tensor {
	t.Helper()
	ts, err := oip.EncodeOutputs(task, out, want)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// FuzzDecodeBinaryRequest feeds arbitrary bodies and JSON-part lengths to
// the binary request decoder and maps what decodes onto every task of the
// demo families, as the server does. Nothing may panic; every error is a
// protocol error (oip.ErrBadRequest); a decoded request's binary inputs
// hold exactly their binary_data_size bytes and share the body's binary
// part in order, with nothing left over. The kept corpus is in
// testdata/fuzz/FuzzDecodeBinaryRequest.
func FuzzDecodeBinaryRequest(f *testing.F) {
	models := []*oip.Model{loadModel(f, "tiny-encoder"), loadModel(f, "tiny-world"), partsModel(f)}
	le := binary.LittleEndian
	add := func(header string, parts ...[]byte) {
		f.Add(append([]byte(header), bytes.Join(parts, nil)...), int64(len(header)))
	}
	add(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2],"parameters":{"binary_data_size":16}},{"name":"normalize","datatype":"BOOL","shape":[1],"parameters":{"binary_data_size":1}}],"parameters":{"binary_data_output":true}}`,
		le.AppendUint64(le.AppendUint64(nil, 3), 9), []byte{1})
	add(`{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}},{"name":"seed","datatype":"UINT16","shape":[1],"parameters":{"binary_data_size":2}},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[5]}],"outputs":[{"name":"video","parameters":{"binary_data":true}}]}`,
		append(le.AppendUint32(nil, 2), "hi"...), le.AppendUint16(nil, 7))
	add(`{"parameters":{"task":"step"},"inputs":[{"name":"speed","datatype":"FP16","shape":[],"parameters":{"binary_data_size":2}}]}`, le.AppendUint16(nil, 0x7e00))
	add(`{"inputs":[{"name":"tokens","datatype":"FP32","shape":[0,3],"parameters":{"binary_data_size":0}}]}`)
	add(`{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":9}}]}`, le.AppendUint32(nil, 1), []byte("x"), le.AppendUint32(nil, 0))
	add(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"parameters":{"binary_data_size":32}}]}`, make([]byte, 31))
	add(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[1],"data":[1],"parameters":{"binary_data_size":8}}]}`, make([]byte, 8))
	add(`{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":4}}]}`, []byte{0xff, 0xff, 0xff, 0xff})
	add(`{"inputs":[{"name":"features.a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},{"name":"pair.1","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}]}`,
		le.AppendUint32(le.AppendUint32(nil, 0x3f800000), 0x40000000), le.AppendUint64(nil, 5))
	f.Add([]byte(`{"inputs":[]}`), int64(0))
	f.Add([]byte(`{"inputs":[]}`), int64(-5))
	f.Add([]byte(`{"inputs":[]}xyz`), int64(1<<40))
	lim := oip.Limits{MaxTensorBytes: 1 << 16, MaxInputs: 64}
	f.Fuzz(func(t *testing.T, body []byte, headerLen int64) {
		req, err := oip.DecodeBinaryRequest(body, headerLen, lim)
		if err != nil {
			if !errors.Is(err, oip.ErrBadRequest) {
				t.Fatalf("decode error %v is not a protocol error", err)
			}
			return
		}
		next := headerLen
		for _, in := range req.Inputs {
			if !in.IsBinary() {
				continue
			}
			if len(in.Raw) > 0 && &in.Raw[0] != &body[next] {
				t.Fatalf("input %q's data are not the body's next bytes", in.Name)
			}
			if size := in.Parameters[oip.BinaryDataSize]; strconvNumber(size) != int64(len(in.Raw)) {
				t.Fatalf("input %q: binary_data_size %v, %d bytes", in.Name, size, len(in.Raw))
			}
			next += int64(len(in.Raw))
		}
		if next != int64(len(body)) {
			t.Fatalf("%d bytes of %d taken", next, len(body))
		}
		if _, err := oip.BinaryOutputs(req); err != nil && !errors.Is(err, oip.ErrBadRequest) {
			t.Fatalf("binary outputs: %v", err)
		}
		for _, m := range models {
			for i := range m.Spec.Tasks {
				task := &m.Spec.Tasks[i]
				if _, _, err := m.Args(task, req.Inputs, lim); err != nil && !errors.Is(err, oip.ErrBadRequest) {
					t.Fatalf("%s %s: error %v is not a protocol error", m.Spec.ModelFamilyID, task.TaskID, err)
				}
			}
		}
	})
}

// strconvNumber reads a decoded binary_data_size.
func strconvNumber(v any) int64 {
	switch x := v.(type) {
	case interface{ Int64() (int64, error) }:
		n, _ := x.Int64()
		return n
	case float64:
		return int64(x)
	}
	return -1
}
