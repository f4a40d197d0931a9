package torch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// The value blob is how values cross the cgo boundary, one blob per
// direction per call. All integers are little-endian.
//
//	value  = tag:u8 body
//	0 None | 1 Bool u8 | 2 Int i64 | 3 Float f64 | 4 Str u64 len, bytes
//	5 Tensor u8 dtype, u32 ndim, i64 dims[ndim], then
//	     input (Go → C++):  u32 index into the pointer array, u64 nbytes
//	     output (C++ → Go): u64 nbytes, bytes
//	6 List u64 n, values | 7 Tuple u64 n, values
//	8 Dict u64 n, n × (u64 klen, key bytes, value)
//
// A kwargs blob is u64 n, n × (u64 klen, key bytes, value). Tensor input data
// is not copied into the blob: the pointer array refers to the caller's
// (pinned) buffers and the C++ side copies them into libtorch memory.
const (
	tagNone   = 0
	tagBool   = 1
	tagInt    = 2
	tagFloat  = 3
	tagStr    = 4
	tagTensor = 5
	tagList   = 6
	tagTuple  = 7
	tagDict   = 8
)

// maxDepth bounds nesting in both directions (the C++ side has the same).
const maxDepth = 64

// maxDims bounds tensor rank in both directions.
const maxDims = 64

var dtypeCodes = map[tensor.DType]int{
	tensor.Float32:  1,
	tensor.Float16:  2,
	tensor.BFloat16: 3,
	tensor.Int64:    4,
	tensor.Int32:    5,
	tensor.Uint8:    6,
	tensor.Bool:     7,
}

var codeDTypes = [...]tensor.DType{1: tensor.Float32, 2: tensor.Float16, 3: tensor.BFloat16,
	4: tensor.Int64, 5: tensor.Int32, 6: tensor.Uint8, 7: tensor.Bool}

func dtypeCode(d tensor.DType) (int, error) {
	if c, ok := dtypeCodes[d]; ok {
		return c, nil
	}
	return 0, fmt.Errorf("unsupported dtype %q (supported: float32, float16, bfloat16, int64, int32, uint8, bool)", d)
}

// encoder builds a kwargs blob and the pointer array for tensor data.
type encoder struct {
	buf  []byte
	ptrs []unsafe.Pointer
}

func (e *encoder) u8(v uint8)   { e.buf = append(e.buf, v) }
func (e *encoder) u32(v uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }
func (e *encoder) u64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// pin pins every tensor buffer the blob refers to; call p.Unpin after the
// cgo call returns.
func (e *encoder) pin(p *runtime.Pinner) {
	for _, q := range e.ptrs {
		if q != nil {
			p.Pin(q)
		}
	}
}

var encoders = sync.Pool{New: func() any { return &encoder{buf: make([]byte, 0, 256)} }}

// encodeKwargs encodes keyword arguments (in map order: the shim matches
// them by name). Return the encoder with release when the call is done.
func encodeKwargs(kwargs map[string]any) (*encoder, error) {
	e := encoders.Get().(*encoder)
	e.u64(uint64(len(kwargs)))
	for k, v := range kwargs {
		e.str(k)
		if err := e.value(v, 0); err != nil {
			e.release()
			return nil, fmt.Errorf("argument %q: %w", k, err)
		}
	}
	return e, nil
}

// release returns e to the pool; e must not be used after.
func (e *encoder) release() {
	if cap(e.buf) > 64<<10 || cap(e.ptrs) > 1024 {
		return // let unusually large encoders go
	}
	clear(e.ptrs)
	e.buf, e.ptrs = e.buf[:0], e.ptrs[:0]
	encoders.Put(e)
}

func (e *encoder) tensor(t *tensor.Tensor) error {
	if t == nil {
		return errors.New("nil *Tensor (pass nil itself for None)")
	}
	if err := t.Check(); err != nil {
		return err
	}
	if len(t.Shape) > maxDims {
		return fmt.Errorf("tensor has %d dimensions, at most %d supported", len(t.Shape), maxDims)
	}
	code, err := dtypeCode(t.DType)
	if err != nil {
		return err
	}
	e.u8(tagTensor)
	e.u8(uint8(code))
	e.u32(uint32(len(t.Shape)))
	for _, d := range t.Shape {
		e.u64(uint64(d))
	}
	e.u32(uint32(len(e.ptrs)))
	e.u64(uint64(len(t.Data)))
	var p unsafe.Pointer
	if len(t.Data) > 0 {
		p = unsafe.Pointer(unsafe.SliceData(t.Data))
	}
	e.ptrs = append(e.ptrs, p)
	return nil
}

func (e *encoder) value(v any, depth int) error {
	if depth > maxDepth {
		return errors.New("value nests too deeply")
	}
	switch x := v.(type) {
	case nil:
		e.u8(tagNone)
	case bool:
		e.u8(tagBool)
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case int64:
		e.u8(tagInt)
		e.u64(uint64(x))
	case int:
		e.u8(tagInt)
		e.u64(uint64(int64(x)))
	case int32:
		e.u8(tagInt)
		e.u64(uint64(int64(x)))
	case float64:
		e.u8(tagFloat)
		e.u64(math.Float64bits(x))
	case float32:
		e.u8(tagFloat)
		e.u64(math.Float64bits(float64(x)))
	case string:
		e.u8(tagStr)
		e.str(x)
	case *tensor.Tensor:
		return e.tensor(x)
	case []any:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for i, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case []int64:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			e.u8(tagInt)
			e.u64(uint64(it))
		}
	case []int:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			e.u8(tagInt)
			e.u64(uint64(int64(it)))
		}
	case []float64:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			e.u8(tagFloat)
			e.u64(math.Float64bits(it))
		}
	case []float32:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			e.u8(tagFloat)
			e.u64(math.Float64bits(float64(it)))
		}
	case []bool:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
	case []string:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for _, it := range x {
			e.u8(tagStr)
			e.str(it)
		}
	case []*tensor.Tensor:
		e.u8(tagList)
		e.u64(uint64(len(x)))
		for i, it := range x {
			if err := e.tensor(it); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.u8(tagDict)
		e.u64(uint64(len(keys)))
		for _, k := range keys {
			e.str(k)
			if err := e.value(x[k], depth+1); err != nil {
				return fmt.Errorf("[%q]: %w", k, err)
			}
		}
	default:
		return fmt.Errorf("values of Go type %T cannot be passed (use nil, string, int64, float64, bool, "+
			"*tensor.Tensor, []any or map[string]any)", v)
	}
	return nil
}

// decoder reads blobs produced by the C++ side. It never panics on malformed
// input: every length is checked against the bytes left.
type decoder struct {
	b   []byte
	off int
	// copyData makes tensor data fresh copies instead of aliasing b.
	copyData bool
}

var errTruncated = errors.New("malformed value blob: truncated")

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) u8() (uint8, error) {
	if d.left() < 1 {
		return 0, errTruncated
	}
	v := d.b[d.off]
	d.off++
	return v, nil
}

func (d *decoder) u32() (uint32, error) {
	if d.left() < 4 {
		return 0, errTruncated
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v, nil
}

func (d *decoder) u64() (uint64, error) {
	if d.left() < 8 {
		return 0, errTruncated
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v, nil
}

func (d *decoder) bytes(n uint64) ([]byte, error) {
	if n > uint64(d.left()) {
		return nil, errTruncated
	}
	s := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return s, nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	b, err := d.bytes(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// count reads an element count that must be plausible given that every
// element takes at least minSize bytes.
func (d *decoder) count(minSize int) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/minSize) {
		return 0, errTruncated
	}
	return int(n), nil
}

func (d *decoder) tensor() (*tensor.Tensor, error) {
	code, err := d.u8()
	if err != nil {
		return nil, err
	}
	if int(code) >= len(codeDTypes) || codeDTypes[code] == "" {
		return nil, fmt.Errorf("malformed value blob: unknown dtype code %d", code)
	}
	dt := codeDTypes[code]
	ndim, err := d.u32()
	if err != nil {
		return nil, err
	}
	if ndim > maxDims {
		return nil, fmt.Errorf("malformed value blob: %d dimensions", ndim)
	}
	// One allocation holds the tensor and, for up to 4 dimensions, its shape.
	var t *tensor.Tensor
	var shape []int64
	if ndim <= 4 {
		ts := new(tensorAndShape)
		t, shape = &ts.t, ts.shape[:ndim:ndim]
	} else {
		t, shape = new(tensor.Tensor), make([]int64, ndim)
	}
	numel := uint64(1)
	for i := range shape {
		v, err := d.u64()
		if err != nil {
			return nil, err
		}
		if int64(v) < 0 {
			return nil, errors.New("malformed value blob: negative dimension")
		}
		shape[i] = int64(v)
		if v != 0 && numel > math.MaxInt64/v {
			return nil, errors.New("malformed value blob: shape overflows")
		}
		numel *= v
	}
	nbytes, err := d.u64()
	if err != nil {
		return nil, err
	}
	if numel > math.MaxInt64/uint64(dt.Size()) || numel*uint64(dt.Size()) != nbytes {
		return nil, errors.New("malformed value blob: tensor data length does not match shape")
	}
	data, err := d.bytes(nbytes)
	if err != nil {
		return nil, err
	}
	if d.copyData {
		data = append([]byte(nil), data...)
	}
	t.DType, t.Shape, t.Data = dt, shape, data
	return t, nil
}

// tensorAndShape lets a decoded tensor and a small shape share an allocation.
type tensorAndShape struct {
	t     tensor.Tensor
	shape [4]int64
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("malformed value blob: nests too deeply")
	}
	tag, err := d.u8()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNone:
		return nil, nil
	case tagBool:
		v, err := d.u8()
		if err != nil {
			return nil, err
		}
		return v != 0, nil
	case tagInt:
		v, err := d.u64()
		return int64(v), err
	case tagFloat:
		v, err := d.u64()
		return math.Float64frombits(v), err
	case tagStr:
		return d.str()
	case tagTensor:
		return d.tensor()
	case tagList, tagTuple:
		n, err := d.count(1)
		if err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case tagDict:
		n, err := d.count(9)
		if err != nil {
			return nil, err
		}
		out := make(map[string]any, n)
		for i := 0; i < n; i++ {
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			if out[k], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("malformed value blob: unknown tag %d", tag)
}

// decodeValue decodes exactly one value from b.
func decodeValue(b []byte, copyData bool) (any, error) {
	d := decoder{b: b, copyData: copyData}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.left() != 0 {
		return nil, errors.New("malformed value blob: trailing bytes")
	}
	return v, nil
}

// moduleInfo is what the shim reports about a loaded module.
type moduleInfo struct {
	compiled bool
	device   string
	methods  []string // in libtorch's order
	schemas  map[string]engine.MethodSchema
}

// decodeInfo decodes a module-info blob:
//
//	u8 compiled, str device, u64 nmethods, nmethods × (str name, u64 nargs,
//	nargs × (str name, str type, u8 has_default, [value]), u64 nret, nret × str)
func decodeInfo(b []byte) (moduleInfo, error) {
	d := decoder{b: b, copyData: true}
	var info moduleInfo
	c, err := d.u8()
	if err != nil {
		return info, err
	}
	info.compiled = c != 0
	if info.device, err = d.str(); err != nil {
		return info, err
	}
	n, err := d.count(24)
	if err != nil {
		return info, err
	}
	info.schemas = make(map[string]engine.MethodSchema, n)
	for i := 0; i < n; i++ {
		var s engine.MethodSchema
		if s.Name, err = d.str(); err != nil {
			return info, err
		}
		na, err := d.count(17)
		if err != nil {
			return info, err
		}
		s.Arguments = make([]engine.Argument, na)
		for j := range s.Arguments {
			a := &s.Arguments[j]
			if a.Name, err = d.str(); err != nil {
				return info, err
			}
			if a.Type, err = d.str(); err != nil {
				return info, err
			}
			hd, err := d.u8()
			if err != nil {
				return info, err
			}
			if hd != 0 {
				a.HasDefault = true
				if a.Default, err = d.value(0); err != nil {
					return info, err
				}
			}
		}
		nr, err := d.count(8)
		if err != nil {
			return info, err
		}
		s.Returns = make([]string, nr)
		for j := range s.Returns {
			if s.Returns[j], err = d.str(); err != nil {
				return info, err
			}
		}
		if _, dup := info.schemas[s.Name]; dup {
			return info, fmt.Errorf("malformed module info: method %q twice", s.Name)
		}
		info.methods = append(info.methods, s.Name)
		info.schemas[s.Name] = s
	}
	if d.left() != 0 {
		return info, errors.New("malformed module info: trailing bytes")
	}
	return info, nil
}
