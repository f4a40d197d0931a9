package torch

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// encodeOutput writes v in the output form the shim produces (tensor data
// inline), for round-trip tests and fuzz seeds.
func encodeOutput(v any) []byte {
	var b []byte
	u64 := func(x uint64) { b = binary.LittleEndian.AppendUint64(b, x) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	var enc func(v any)
	enc = func(v any) {
		switch x := v.(type) {
		case nil:
			b = append(b, tagNone)
		case bool:
			b = append(b, tagBool, 0)
			if x {
				b[len(b)-1] = 1
			}
		case int64:
			b = append(b, tagInt)
			u64(uint64(x))
		case float64:
			b = append(b, tagFloat)
			u64(math.Float64bits(x))
		case string:
			b = append(b, tagStr)
			str(x)
		case *tensor.Tensor:
			code, _ := dtypeCode(x.DType)
			b = append(b, tagTensor, byte(code))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(x.Shape)))
			for _, d := range x.Shape {
				u64(uint64(d))
			}
			u64(uint64(len(x.Data)))
			b = append(b, x.Data...)
		case []any:
			b = append(b, tagList)
			u64(uint64(len(x)))
			for _, it := range x {
				enc(it)
			}
		case map[string]any:
			b = append(b, tagDict)
			u64(uint64(len(x)))
			for k, it := range x {
				str(k)
				enc(it)
			}
		default:
			panic("encodeOutput: unsupported type")
		}
	}
	enc(v)
	return b
}

func sampleValues() []any {
	return []any{
		nil, true, false, int64(-3), 2.5, "", "héllo",
		tensor.FromFloat32([]float32{1, 2, 3}, 3),
		&tensor.Tensor{DType: tensor.Bool, Shape: []int64{}, Data: []byte{1}},
		&tensor.Tensor{DType: tensor.BFloat16, Shape: []int64{0, 2}, Data: []byte{}},
		[]any{}, []any{int64(1), "a", []any{nil}},
		map[string]any{"y": tensor.FromInt64([]int64{4}, 1), "meta": map[string]any{"n": int64(2)}},
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	for _, v := range sampleValues() {
		for _, copyData := range []bool{false, true} {
			got, err := decodeValue(encodeOutput(v), copyData)
			if err != nil {
				t.Fatalf("decode(%#v): %v", v, err)
			}
			if !reflect.DeepEqual(normTensors(got), normTensors(v)) {
				t.Errorf("round trip of %#v = %#v", v, got)
			}
		}
	}
}

// normTensors makes nil and empty tensor data compare equal.
func normTensors(v any) any {
	switch x := v.(type) {
	case *tensor.Tensor:
		c := *x
		if len(c.Data) == 0 {
			c.Data = nil
		}
		if len(c.Shape) == 0 {
			c.Shape = nil
		}
		return &c
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normTensors(x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, it := range x {
			out[k] = normTensors(it)
		}
		return out
	}
	return v
}

func TestDecodeAliasesOrCopies(t *testing.T) {
	blob := encodeOutput(tensor.FromFloat32([]float32{1, 2}, 2))
	v, _ := decodeValue(blob, false)
	alias := v.(*tensor.Tensor)
	c, _ := decodeValue(blob, true)
	cp := c.(*tensor.Tensor)
	blob[len(blob)-1] ^= 0xff
	if alias.Data[7] != blob[len(blob)-1] {
		t.Error("aliasing decode copied the data")
	}
	if cp.Data[7] == blob[len(blob)-1] {
		t.Error("copying decode aliased the data")
	}
	if cap(alias.Data) != len(alias.Data) {
		t.Error("aliased tensor data can grow into the blob")
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := encodeOutput(map[string]any{"t": tensor.FromFloat32([]float32{1}, 1)})
	cases := map[string][]byte{
		"empty":       {},
		"unknown tag": {99},
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte{}, good...), 0),
		"huge list":   append([]byte{tagList}, binary.LittleEndian.AppendUint64(nil, 1<<62)...),
		"bad dtype":   {tagTensor, 42, 0, 0, 0, 0},
		"too deep":    []byte(strings.Repeat(string([]byte{tagList, 1, 0, 0, 0, 0, 0, 0, 0}), maxDepth+2)),
	}
	// A tensor whose byte count does not match its shape.
	bad := []byte{tagTensor, 1}
	bad = binary.LittleEndian.AppendUint32(bad, 1)
	bad = binary.LittleEndian.AppendUint64(bad, 2)
	bad = binary.LittleEndian.AppendUint64(bad, 4)
	cases["short data"] = append(bad, 0, 0, 0, 0)
	for name, b := range cases {
		if _, err := decodeValue(b, false); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestEncodeKwargs(t *testing.T) {
	x := tensor.FromFloat32([]float32{1}, 1)
	e, err := encodeKwargs(map[string]any{"b": []*tensor.Tensor{x, x}, "a": int(3), "c": []float32{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ptrs) != 2 {
		t.Errorf("pointer array has %d entries, want 2", len(e.ptrs))
	}
	if n := binary.LittleEndian.Uint64(e.buf); n != 3 {
		t.Errorf("kwargs count = %d, want 3", n)
	}
	e.release()
	for _, bad := range []map[string]any{
		{"x": (*tensor.Tensor)(nil)},
		{"x": &tensor.Tensor{DType: tensor.Float32, Shape: []int64{2}, Data: []byte{1}}},
		{"x": complex(1, 2)},
		{"x": []any{make(chan int)}},
		{"x": map[string]any{"k": uint64(1)}},
	} {
		if _, err := encodeKwargs(bad); err == nil || !strings.Contains(err.Error(), `argument "x"`) {
			t.Errorf("encodeKwargs(%v) error = %v", bad, err)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, v := range sampleValues() {
		f.Add(encodeOutput(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeValue(b, false)
		if err != nil {
			return
		}
		// Whatever decodes is well formed.
		var check func(v any)
		check = func(v any) {
			switch x := v.(type) {
			case *tensor.Tensor:
				if err := x.Check(); err != nil {
					t.Fatalf("decoded a bad tensor: %v", err)
				}
			case []any:
				for _, it := range x {
					check(it)
				}
			case map[string]any:
				for _, it := range x {
					check(it)
				}
			}
		}
		check(v)
	})
}

// encodeInfo writes a module-info blob, for tests and fuzz seeds.
func encodeInfo(info moduleInfo) []byte {
	var b []byte
	u64 := func(x uint64) { b = binary.LittleEndian.AppendUint64(b, x) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	if info.compiled {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	str(info.device)
	u64(uint64(len(info.methods)))
	for _, name := range info.methods {
		s := info.schemas[name]
		str(name)
		u64(uint64(len(s.Arguments)))
		for _, a := range s.Arguments {
			str(a.Name)
			str(a.Type)
			if a.HasDefault {
				b = append(b, 1)
				b = append(b, encodeOutput(a.Default)...)
			} else {
				b = append(b, 0)
			}
		}
		u64(uint64(len(s.Returns)))
		for _, r := range s.Returns {
			str(r)
		}
	}
	return b
}

func sampleInfo() moduleInfo {
	return moduleInfo{compiled: true, device: "cpu", methods: []string{"forward", "aux"}, schemas: map[string]engine.MethodSchema{
		"forward": {Name: "forward", Arguments: []engine.Argument{{Name: "x", Type: "Tensor"},
			{Name: "n", Type: "int", HasDefault: true, Default: int64(3)}}, Returns: []string{"Dict[str, Tensor]"}},
		"aux": {Name: "aux", Arguments: []engine.Argument{}, Returns: []string{"NoneType"}},
	}}
}

func TestDecodeInfo(t *testing.T) {
	want := sampleInfo()
	got, err := decodeInfo(encodeInfo(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decodeInfo = %#v, want %#v", got, want)
	}
	dup := want
	dup.methods = []string{"forward", "forward"}
	if _, err := decodeInfo(encodeInfo(dup)); err == nil {
		t.Error("duplicate method accepted")
	}
	b := encodeInfo(want)
	if _, err := decodeInfo(b[:len(b)-3]); err == nil {
		t.Error("truncated info accepted")
	}
}

func FuzzDecodeInfo(f *testing.F) {
	f.Add(encodeInfo(sampleInfo()))
	f.Add(encodeInfo(moduleInfo{device: "cuda:0"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeInfo(b)
		if err != nil {
			return
		}
		if len(info.methods) != len(info.schemas) {
			t.Fatalf("%d methods, %d schemas", len(info.methods), len(info.schemas))
		}
	})
}
