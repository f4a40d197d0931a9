package artifactio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// fixtureArrays builds, in Go, the arrays testdata/npy/make_fixtures.py
// saves with NumPy.
func fixtureArrays() map[string]*tensor.Tensor {
	f4 := make([]float32, 6)
	for i := range f4 {
		f4[i] = float32(i)*0.5 - 1
	}
	f2 := make([]float32, 5)
	for i := range f2 {
		f2[i] = float32(i) * float32(0.1)
	}
	i4 := make([]byte, 24*4)
	for i := range 24 {
		binary.LittleEndian.PutUint32(i4[4*i:], uint32(int32(i-12)))
	}
	u1 := make([]byte, 12)
	for i := range u1 {
		u1[i] = byte(i * 20)
	}
	u1000 := make([]byte, 1000)
	for i := range u1000 {
		u1000[i] = byte(i % 251)
	}
	return map[string]*tensor.Tensor{
		"f4_2x3":    tensor.FromFloat32(f4, 2, 3),
		"f2_5":      FromFloat16(f2, 5),
		"i8_3":      tensor.FromInt64([]int64{-3, 0, 1 << 40}, 3),
		"i4_2x3x4":  {DType: tensor.Int32, Shape: []int64{2, 3, 4}, Data: i4},
		"u1_3x4":    tensor.FromUint8(u1, 3, 4),
		"b1_3":      {DType: tensor.Bool, Shape: []int64{3}, Data: []byte{1, 0, 1}},
		"f4_scalar": tensor.FromFloat32([]float32{2.5}),
		"f4_0x4":    tensor.FromFloat32(nil, 0, 4),
		"u1_1000":   tensor.FromUint8(u1000, 1000),
	}
}

// EncodeNPY writes byte for byte what np.save wrote for the same arrays.
func TestEncodeNPYMatchesNumPyFixtures(t *testing.T) {
	for name, tt := range fixtureArrays() {
		want, err := os.ReadFile(filepath.Join("testdata", "npy", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := EncodeNPY(&buf, tt); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: EncodeNPY differs from np.save:\n got %q\nwant %q", name, buf.Bytes(), want)
		}
		got, err := DecodeNPY(bytes.NewReader(want))
		if err != nil {
			t.Fatalf("%s: decoding the NumPy file: %v", name, err)
		}
		assertTensorEqual(t, name, got, tt)
	}
}

func assertTensorEqual(t *testing.T, name string, got, want *tensor.Tensor) {
	t.Helper()
	if got.DType != want.DType || !equalShape(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("%s: got %s%v % x, want %s%v % x", name, got.DType, got.Shape, head(got.Data), want.DType, want.Shape, head(want.Data))
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(b []byte) []byte { return b[:min(len(b), 32)] }

func TestNPYHeaderIsAligned(t *testing.T) {
	for _, shape := range [][]int64{nil, {0}, {1}, {7, 3}, {123456789012, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}} {
		h, err := npyHeader("<f4", shape)
		if err != nil {
			t.Fatal(err)
		}
		if len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Errorf("shape %v: header of %d bytes, want a multiple of 64 ending in a newline", shape, len(h))
		}
		if n := int(binary.LittleEndian.Uint16(h[8:])); n != len(h)-10 {
			t.Errorf("shape %v: header length field %d, want %d", shape, n, len(h)-10)
		}
	}
}

func TestNPYRoundTripBFloat16AsFloat32(t *testing.T) {
	vals := []float32{1, -2.5, 0.0078125, 3e38}
	var buf bytes.Buffer
	if err := EncodeNPY(&buf, FromBFloat16(vals, 2, 2)); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeNPY(&buf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := got.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if want := BFloat16ToFloat32(Float32ToBFloat16(v)); f[i] != want {
			t.Errorf("element %d = %v, want %v", i, f[i], want)
		}
	}
}

func TestDecodeNPYBigEndian(t *testing.T) {
	hdr, err := npyHeader(">i4", []int64{2})
	if err != nil {
		t.Fatal(err)
	}
	data := append(hdr, 0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe)
	got, err := DecodeNPY(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got.DType != tensor.Int32 || int32(binary.LittleEndian.Uint32(got.Data)) != 258 || int32(binary.LittleEndian.Uint32(got.Data[4:])) != -2 {
		t.Errorf("got %s % x, want int32 [258 -2]", got.DType, got.Data)
	}
}

func TestDecodeNPYErrors(t *testing.T) {
	valid := func(descr, shape string, data int) []byte {
		dict := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }"
		dict += strings.Repeat(" ", 63-(10+len(dict))%64) + "\n"
		b := append([]byte(npyMagic), 1, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
		b = append(b, dict...)
		return append(b, make([]byte, data)...)
	}
	if _, err := DecodeNPY(bytes.NewReader(valid("<f4", "(2, 3)", 24))); err != nil {
		t.Fatalf("the valid base case fails: %v", err)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"bad magic", []byte("\x93NUMPX\x01\x00\x00\x00"), "bad magic"},
		{"version", []byte("\x93NUMPY\x09\x00\x00\x00"), "version 9.0"},
		{"short header", append([]byte(npyMagic), 1, 0, 100, 0, '{'), "header"},
		{"truncated data", valid("<f4", "(2, 3)", 23), "truncated"},
		{"trailing data", valid("<f4", "(2, 3)", 25), "more"},
		{"float64", valid("<f8", "(2,)", 16), `unsupported dtype "<f8"`},
		{"fortran", bytes.Replace(valid("<f4", "(2, 3)", 24), []byte("False"), []byte("True "), 1), "Fortran"},
		{"unknown key", bytes.Replace(valid("<f4", "(2,)", 8), []byte("'shape'"), []byte("'shope'"), 1), "unknown key"},
		{"negative dim", valid("<f4", "(-2,)", 0), "non-negative"},
		{"huge shape", valid("<f4", "(100000000000, 100000000000)", 0), "more than"},
		{"not a dict", bytes.Replace(valid("<f4", "(2,)", 8), []byte("{"), []byte("["), 1), "want '{'"},
	}
	for _, c := range cases {
		_, err := DecodeNPY(bytes.NewReader(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := DecodeNPY(bytes.NewReader(nil)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty input: %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestWriteNPYRejectsBadTensorAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.npy")
	err := WriteNPY(p, &tensor.Tensor{DType: tensor.Float32, Shape: []int64{3}, Data: make([]byte, 8)})
	if err == nil || !strings.Contains(err.Error(), "needs 12 bytes") {
		t.Fatalf("error %v, want one about the byte count", err)
	}
	assertOnly(t, dir)
	if err := WriteNPY(p, &tensor.Tensor{DType: "complex64", Shape: []int64{1}, Data: make([]byte, 8)}); err == nil {
		t.Fatal("an unknown dtype was written")
	}
	assertOnly(t, dir)
}

// NumPy loads what WriteNPY wrote, with the right dtype, shape and values.
func TestWriteNPYLoadsInNumPy(t *testing.T) {
	requireNumPy(t)
	dir := t.TempDir()
	arrays := fixtureArrays()
	arrays["bf16_2x2"] = FromBFloat16([]float32{1, -2.5, 0.0078125, 3e38}, 2, 2)
	arrays["f2_special"] = FromFloat16([]float32{float32(math.Inf(1)), -0.0, 65504, 6e-8}, 4)
	var names []string
	for name, tt := range arrays {
		if err := WriteNPY(filepath.Join(dir, name+".npy"), tt); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	out := runPython(t, `import sys, json, os, numpy as np
res = {}
for name in sys.argv[2:]:
    a = np.load(os.path.join(sys.argv[1], name + ".npy"))
    res[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "values": [repr(x) for x in a.ravel().tolist()]}
print(json.dumps(res))`, append([]string{dir}, names...)...)
	var got map[string]struct {
		DType  string   `json:"dtype"`
		Shape  []int64  `json:"shape"`
		Values []string `json:"values"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, tt := range arrays {
		g := got[name]
		if want := npyDescr[tt.DType]; g.DType != want {
			t.Errorf("%s: numpy dtype %s, want %s", name, g.DType, want)
		}
		if !equalShape(g.Shape, tt.Shape) && !(len(g.Shape) == 0 && len(tt.Shape) == 0) {
			t.Errorf("%s: numpy shape %v, want %v", name, g.Shape, tt.Shape)
		}
		want := pyReprs(t, tt)
		if len(g.Values) != len(want) {
			t.Fatalf("%s: numpy has %d values, want %d", name, len(g.Values), len(want))
		}
		for i := range want {
			if g.Values[i] != want[i] {
				t.Errorf("%s: value %d is %s in numpy, want %s", name, i, g.Values[i], want[i])
			}
		}
	}
}

// pyReprs returns Python's repr of each element as tolist() gives it
// (floats widened to Python float).
func pyReprs(t *testing.T, tt *tensor.Tensor) []string {
	t.Helper()
	var out []string
	switch tt.DType {
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
		vals, err := FloatValues(tt)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			out = append(out, pyFloatRepr(float64(v)))
		}
	case tensor.Int64:
		v, _ := tt.Int64s()
		for _, x := range v {
			out = append(out, formatInt(x))
		}
	case tensor.Int32:
		for i := 0; i < len(tt.Data); i += 4 {
			out = append(out, formatInt(int64(int32(binary.LittleEndian.Uint32(tt.Data[i:])))))
		}
	case tensor.Uint8:
		for _, b := range tt.Data {
			out = append(out, formatInt(int64(b)))
		}
	case tensor.Bool:
		for _, b := range tt.Data {
			out = append(out, map[bool]string{true: "True", false: "False"}[b != 0])
		}
	}
	return out
}
