package artifactio

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

type tensorJSON struct {
	DType string          `json:"dtype"`
	Shape []int64         `json:"shape"`
	Data  json.RawMessage `json:"data"`
}

func decodeTensorJSON(t *testing.T, b []byte) tensorJSON {
	t.Helper()
	var tj tensorJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tj); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return tj
}

func TestEncodeJSONFloat32Exact(t *testing.T) {
	vals := []float32{0.1, -1e-7, 3.4028235e38, 1.5, 0, float32(math.Copysign(0, -1))}
	var buf bytes.Buffer
	if err := EncodeJSON(&buf, tensor.FromFloat32(vals, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "}\n") {
		t.Errorf("output %q does not end in a newline", buf.String())
	}
	tj := decodeTensorJSON(t, buf.Bytes())
	if tj.DType != "float32" || !equalShape(tj.Shape, []int64{2, 3}) {
		t.Fatalf("dtype %s shape %v", tj.DType, tj.Shape)
	}
	var rows [][]float32
	if err := json.Unmarshal(tj.Data, &rows); err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		got := rows[i/3][i%3]
		if math.Float32bits(got) != math.Float32bits(v) {
			t.Errorf("element %d = %v, want %v", i, got, v)
		}
	}
	if strings.Contains(buf.String(), "0.10000000149") {
		t.Error("float32 written with float64 digits")
	}
}

func TestEncodeJSONOtherDTypes(t *testing.T) {
	cases := []struct {
		t    *tensor.Tensor
		data string
	}{
		{FromFloat16([]float32{0.1, 65504, -2}, 3), "[0.099975586,65504,-2]"},
		{FromBFloat16([]float32{1, 3.140625}, 2), "[1,3.140625]"},
		{tensor.FromInt64([]int64{-1, 1 << 62}, 1, 2), "[[-1,4611686018427387904]]"},
		{&tensor.Tensor{DType: tensor.Int32, Shape: []int64{2}, Data: []byte{0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0}}, "[-1,7]"},
		{tensor.FromUint8([]byte{0, 255}, 2, 1), "[[0],[255]]"},
		{&tensor.Tensor{DType: tensor.Bool, Shape: []int64{2}, Data: []byte{0, 5}}, "[false,true]"},
		{tensor.FromFloat32([]float32{2.5}), "2.5"},
		{tensor.FromFloat32(nil, 0, 3), "[]"},
		{tensor.FromFloat32(nil, 2, 0), "[[],[]]"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		if err := EncodeJSON(&buf, c.t); err != nil {
			t.Fatalf("%s%v: %v", c.t.DType, c.t.Shape, err)
		}
		tj := decodeTensorJSON(t, buf.Bytes())
		if string(tj.Data) != c.data || tj.DType != string(c.t.DType) {
			t.Errorf("%s%v: data %s (dtype %s), want %s", c.t.DType, c.t.Shape, tj.Data, tj.DType, c.data)
		}
	}
}

func TestWriteJSONRejectsNaNAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.json")
	err := WriteJSON(p, tensor.FromFloat32([]float32{1, 2, 3, float32(math.NaN())}, 2, 2))
	if err == nil || !strings.Contains(err.Error(), "[1 1]") || !strings.Contains(err.Error(), ".npy") {
		t.Fatalf("error %v, want one naming element [1 1] and suggesting .npy", err)
	}
	assertOnly(t, dir)
	var buf bytes.Buffer
	if err := EncodeJSON(&buf, FromFloat16([]float32{float32(math.Inf(1))}, 1)); err == nil {
		t.Error("an infinite float16 was encoded")
	}
	if buf.Len() != 0 {
		t.Errorf("a failed encode wrote %q", buf.String())
	}
}

func TestWriteDispatch(t *testing.T) {
	dir := t.TempDir()
	v := testVideo(2, 4, 5, 3, 8)
	img := &tensor.Image{Pixels: tensor.FromUint8(v.Frames.Data[:60], 4, 5, 3)}
	emb := &tensor.Embedding{Vector: tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)}
	good := []struct {
		name     string
		artifact any
	}{
		{"v.gif", v}, {"v.npy", *v}, {"i.png", img}, {"i.npy", img},
		{"e.npy", emb}, {"e.json", *emb}, {"t.json", emb.Vector}, {"t.NPY", emb.Vector},
		{"s.txt", "hello"}, {"j.json", json.RawMessage(`{"a":1}`)},
	}
	for _, c := range good {
		if err := Write(filepath.Join(dir, c.name), c.artifact); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	decodeGIF(t, mustRead(t, filepath.Join(dir, "v.gif")))
	if got, err := ReadNPY(filepath.Join(dir, "v.npy")); err != nil || !bytes.Equal(got.Data, v.Frames.Data) || !equalShape(got.Shape, v.Frames.Shape) {
		t.Errorf("v.npy: %v", err)
	}
	assertImageEqual(t, "i.png", readPNG(t, filepath.Join(dir, "i.png")), img.Pixels.Data, 4, 5, 3)
	if s := string(mustRead(t, filepath.Join(dir, "j.json"))); s != "{\"a\":1}\n" {
		t.Errorf("j.json = %q", s)
	}
	if s := string(mustRead(t, filepath.Join(dir, "s.txt"))); s != "hello" {
		t.Errorf("s.txt = %q", s)
	}
	bad := []struct {
		name     string
		artifact any
		want     string
	}{
		{"v.png", v, "accepted: .gif, .npy"},
		{"i.gif", img, "accepted: .png, .npy"},
		{"e.png", emb, "accepted: .npy, .json"},
		{"x.json", 42, "not an artifact"},
		{"j.json", json.RawMessage(`{`), "not valid JSON"},
		{"e2.npy", &tensor.Embedding{Vector: tensor.FromInt64([]int64{1}, 1)}, "floating"},
	}
	for _, c := range bad {
		err := Write(filepath.Join(dir, c.name), c.artifact)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	assertOnly(t, dir, "e.json", "e.npy", "i.npy", "i.png", "j.json", "s.txt", "t.NPY", "t.json", "v.gif", "v.npy")
}

func TestConcatVideos(t *testing.T) {
	a, b := testVideo(2, 3, 4, 3, 12), testVideo(3, 3, 4, 3, 99)
	got, err := ConcatVideos(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !equalShape(got.Frames.Shape, []int64{5, 3, 4, 3}) || got.FPS != 12 {
		t.Fatalf("shape %v fps %v, want [5 3 4 3] at 12", got.Frames.Shape, got.FPS)
	}
	if !bytes.Equal(got.Frames.Data, append(append([]byte{}, a.Frames.Data...), b.Frames.Data...)) {
		t.Error("frames are not a's then b's")
	}
	if _, err := ConcatVideos(a, testVideo(1, 3, 5, 3, 1)); err == nil || !strings.Contains(err.Error(), "video 1") {
		t.Errorf("mismatched sizes: %v", err)
	}
	if _, err := ConcatVideos(); err == nil {
		t.Error("concat of nothing succeeded")
	}
}
