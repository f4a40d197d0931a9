package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Tensor is a host (CPU memory) tensor: a dtype, a shape and the elements in
// row-major order as little-endian bytes. It is the form tensors take across
// the engine boundary.
type Tensor struct {
	// DType is the element type.
	DType DType
	// Shape is the size of each dimension; empty for a scalar.
	Shape []int64
	// Data holds NumElements()*DType.Size() bytes.
	Data []byte
}

// NumElements returns the product of the shape.
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Check reports whether the data length matches dtype and shape.
func (t *Tensor) Check() error {
	if t == nil {
		return fmt.Errorf("nil tensor")
	}
	sz := t.DType.Size()
	if sz == 0 {
		return fmt.Errorf("tensor: unsupported dtype %q", t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor: negative dimension in shape %v", t.Shape)
		}
	}
	if want := t.NumElements() * int64(sz); int64(len(t.Data)) != want {
		return fmt.Errorf("tensor: %s%v needs %d bytes, has %d", t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// Zeros returns a tensor of the given dtype and shape holding zeros (false
// for bool). It panics on a dtype that is not one of DTypes.
func Zeros(dtype DType, shape ...int64) *Tensor {
	if !dtype.Valid() {
		panic(fmt.Sprintf("runtime.Zeros: unknown dtype %q", dtype))
	}
	t := &Tensor{DType: dtype, Shape: shape}
	t.Data = make([]byte, t.NumElements()*int64(dtype.Size()))
	return t
}

// FromFloat32 returns a float32 tensor holding v with the given shape.
func FromFloat32(v []float32, shape ...int64) *Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &Tensor{DType: Float32, Shape: shape, Data: b}
}

// FromInt64 returns an int64 tensor holding v with the given shape.
func FromInt64(v []int64, shape ...int64) *Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return &Tensor{DType: Int64, Shape: shape, Data: b}
}

// FromUint8 returns a uint8 tensor holding v (not copied) with the given shape.
func FromUint8(v []uint8, shape ...int64) *Tensor {
	return &Tensor{DType: Uint8, Shape: shape, Data: v}
}

// Clone returns a copy of t that shares no memory with it.
func (t *Tensor) Clone() *Tensor {
	if t == nil {
		return nil
	}
	return &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: slices.Clone(t.Data)}
}

// Float32s returns the elements of a float32 tensor.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.DType != Float32 {
		return nil, fmt.Errorf("tensor is %s, not float32", t.DType)
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// Int64s returns the elements of an int64 tensor.
func (t *Tensor) Int64s() ([]int64, error) {
	if t.DType != Int64 {
		return nil, fmt.Errorf("tensor is %s, not int64", t.DType)
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	out := make([]int64, len(t.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out, nil
}

// Stack joins tensors of one dtype and shape along a new leading dimension.
func Stack(ts []*Tensor) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("stack: no tensors")
	}
	first := ts[0]
	if err := first.Check(); err != nil {
		return nil, fmt.Errorf("stack: item 0: %w", err)
	}
	data := make([]byte, 0, len(first.Data)*len(ts))
	for i, t := range ts {
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("stack: item %d: %w", i, err)
		}
		if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) {
			return nil, fmt.Errorf("stack: item %d is %s%v, item 0 is %s%v (batched items need one dtype and shape)",
				i, t.DType, t.Shape, first.DType, first.Shape)
		}
		data = append(data, t.Data...)
	}
	shape := append([]int64{int64(len(ts))}, first.Shape...)
	return &Tensor{DType: first.DType, Shape: shape, Data: data}, nil
}

// Unstack splits a tensor along its leading dimension into n tensors; the
// parts share t's memory.
func Unstack(t *Tensor, n int) ([]*Tensor, error) {
	if err := t.Check(); err != nil {
		return nil, fmt.Errorf("unstack: %w", err)
	}
	if len(t.Shape) == 0 || t.Shape[0] != int64(n) {
		return nil, fmt.Errorf("unstack: tensor %s%v has no leading dimension of %d", t.DType, t.Shape, n)
	}
	out := make([]*Tensor, n)
	if n == 0 {
		return out, nil
	}
	step := len(t.Data) / n
	for i := range out {
		out[i] = &Tensor{DType: t.DType, Shape: append([]int64(nil), t.Shape[1:]...), Data: t.Data[i*step : (i+1)*step : (i+1)*step]}
	}
	return out, nil
}
