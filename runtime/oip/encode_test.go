package oip_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// appendMatchesMarshal fails t unless resp.AppendJSON writes exactly what
// json.Marshal writes.
func appendMatchesMarshal(t *testing.T, resp oip.InferenceResponse) {
	t.Helper()
	want, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := resp.AppendJSON([]byte("prefix"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
		t.Fatalf("AppendJSON\n%s\njson.Marshal\n%s", got, want)
	}
}

func TestAppendJSONIsMarshal(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
		{ArtifactID: "video", Kind: spec.ArtifactVideo},
		{ArtifactID: "caption", Kind: spec.ArtifactText},
		{ArtifactID: "info", Kind: spec.ArtifactJSON},
		{ArtifactID: "emb", Kind: spec.ArtifactEmbedding},
		{ArtifactID: "mask", Kind: spec.ArtifactTensor},
		{ArtifactID: "scalar", Kind: spec.ArtifactTensor},
	}}
	out := map[string]any{
		"video":   tensor.FromUint8([]uint8{0, 1, 2, 3, 254, 255}, 1, 1, 2, 3),
		"caption": "hi \"there\" <b>&</b> \u00e9\t\u2028",
		"info":    map[string]any{"b": []any{int64(1), "x"}, "a": true, "<": 1.5},
		"emb":     tensor.FromFloat32([]float32{0.1, -2.5e-8, float32(math.Inf(1)), float32(math.NaN()), 3}, 5),
		"mask":    &tensor.Tensor{DType: tensor.Bool, Shape: []int64{2}, Data: []byte{1, 0}},
		"scalar":  tensor.FromInt64([]int64{-9}),
	}
	ts, err := oip.EncodeOutputs(task, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendMatchesMarshal(t, oip.InferenceResponse{ModelName: "m", ModelVersion: "v<1>", ID: "req \"1\"", Outputs: ts,
		Parameters: oip.Parameters{"task": "t", "chunk_index": 3, "latency_ms": 1.25, "realtime": map[string]any{"fps": 24}, "b": json.Number("7")}})
	appendMatchesMarshal(t, oip.InferenceResponse{ModelName: "m"})
	appendMatchesMarshal(t, oip.InferenceResponse{ModelName: "", Outputs: []oip.Tensor{}})
	appendMatchesMarshal(t, oip.InferenceResponse{Outputs: []oip.Tensor{{Name: "x", Datatype: oip.FP32, Parameters: oip.Parameters{"k": "v"}}}})
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("m", "v", "id", "task", "embed", "emb", 1.5, int64(3))
	f.Add("<&>", "\x00\xff", "\u2028", "", "\"", "\\", math.Inf(1), int64(-1))
	f.Fuzz(func(t *testing.T, model, version, id, key, val, name string, x float64, n int64) {
		data, err := json.Marshal([]any{x, n, val})
		if err != nil { // NaN and infinities: what the encoders write instead
			data = []byte(`["NaN",1]`)
		}
		resp := oip.InferenceResponse{ModelName: model, ModelVersion: version, ID: id,
			Parameters: oip.Parameters{key: val, "n": n},
			Outputs:    []oip.Tensor{{Name: name, Shape: []int64{n, 0}, Datatype: oip.Datatype(val), Data: data}}}
		appendMatchesMarshal(t, resp)
	})
}

// BenchmarkResponse encodes the response to one text-encoder request (a
// 128-float embedding) both ways.
func BenchmarkResponse(b *testing.B) {
	task := &spec.InferenceTaskProfile{TaskID: "embed", Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "embedding", Kind: spec.ArtifactEmbedding}}}
	v := make([]float32, 128)
	for i := range v {
		v[i] = float32(math.Sin(float64(i))) / 11
	}
	ts, err := oip.EncodeOutputs(task, map[string]any{"embedding": tensor.FromFloat32(v, 128)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp := oip.InferenceResponse{ModelName: "text-encoder", ModelVersion: "default", ID: "r1", Parameters: oip.Parameters{"task": "embed"}, Outputs: ts}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := resp.AppendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
