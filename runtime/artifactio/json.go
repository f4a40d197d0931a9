package artifactio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// EncodeJSON writes a tensor (an embedding's vector, or any tensor) as one
// JSON object followed by a newline:
//
//	{"dtype":"float32","shape":[2,3],"data":[[0.5,1,2],[3,4,5]]}
//
// data nests one array per dimension (a scalar is a bare number). Floats are
// written with the fewest digits that read back to the same float32 (float16
// and bfloat16 values are exact in float32), integers as integers and bools
// as true/false. JSON has no NaN or infinity: such an element is an error
// naming its index (write .npy instead).
func EncodeJSON(w io.Writer, t *tensor.Tensor) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if _, ok := npyDescr[t.DType]; !ok {
		return fmt.Errorf("json: unsupported dtype %s", t.DType)
	}
	if t.DType.IsFloating() { // fail before writing anything
		vals, err := FloatValues(t)
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		for i, f := range vals {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return fmt.Errorf("json: element %v is %v, which JSON cannot hold; write .npy instead", unflatten(int64(i), t.Shape), f)
			}
		}
	}
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, `{"dtype":`...)
	buf = strconv.AppendQuote(buf, string(t.DType))
	buf = append(buf, `,"shape":[`...)
	for i, d := range t.Shape {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, d, 10)
	}
	buf = append(buf, `],"data":`...)
	e := &jsonEncoder{w: w, buf: buf, t: t, size: t.DType.Size()}
	if err := e.dim(0, 0); err != nil {
		return err
	}
	e.buf = append(e.buf, "}\n"...)
	_, err := w.Write(e.buf)
	return err
}

// WriteJSON writes a tensor as a JSON file, atomically (see EncodeJSON).
func WriteJSON(path string, t *tensor.Tensor) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return WriteFileAtomic(path, func(w io.Writer) error { return EncodeJSON(w, t) })
}

// jsonEncoder streams nested arrays of tensor elements.
type jsonEncoder struct {
	w    io.Writer
	buf  []byte
	t    *tensor.Tensor
	size int
}

// dim writes the sub-array at dimension d whose first element is element off.
func (e *jsonEncoder) dim(d int, off int64) error {
	if d == len(e.t.Shape) {
		return e.elem(off)
	}
	inner := int64(1)
	for _, n := range e.t.Shape[d+1:] {
		inner *= n
	}
	e.buf = append(e.buf, '[')
	for i := range e.t.Shape[d] {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.dim(d+1, off+i*inner); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	if len(e.buf) >= 60<<10 {
		if _, err := e.w.Write(e.buf); err != nil {
			return err
		}
		e.buf = e.buf[:0]
	}
	return nil
}

// elem writes element i (flat, row-major); floats were checked to be finite.
func (e *jsonEncoder) elem(i int64) error {
	b := e.t.Data[i*int64(e.size):]
	var f float32
	switch e.t.DType {
	case tensor.Float32:
		f = math.Float32frombits(binary.LittleEndian.Uint32(b))
	case tensor.Float16:
		f = Float16ToFloat32(binary.LittleEndian.Uint16(b))
	case tensor.BFloat16:
		f = BFloat16ToFloat32(binary.LittleEndian.Uint16(b))
	case tensor.Int64:
		e.buf = strconv.AppendInt(e.buf, int64(binary.LittleEndian.Uint64(b)), 10)
		return nil
	case tensor.Int32:
		e.buf = strconv.AppendInt(e.buf, int64(int32(binary.LittleEndian.Uint32(b))), 10)
		return nil
	case tensor.Uint8:
		e.buf = strconv.AppendUint(e.buf, uint64(b[0]), 10)
		return nil
	case tensor.Bool:
		e.buf = strconv.AppendBool(e.buf, b[0] != 0)
		return nil
	}
	e.buf = strconv.AppendFloat(e.buf, float64(f), 'g', -1, 32)
	return nil
}

// unflatten turns a flat row-major index into per-dimension indexes.
func unflatten(i int64, shape []int64) []int64 {
	idx := make([]int64, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return idx
}
