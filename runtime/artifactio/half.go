package artifactio

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Float16ToFloat32 converts IEEE 754 binary16 bits to a float32. Every
// float16 value, subnormals, infinities and NaNs included, is represented
// exactly.
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // infinity or NaN; the payload is kept
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: shift the leading one into the implicit bit.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToFloat16 converts a float32 to IEEE 754 binary16 bits, rounding to
// nearest with ties to even (as NumPy and PyTorch do). Magnitudes too large
// for float16 become infinities, too small ones signed zeros; a NaN stays a
// NaN and keeps the top bits of its payload.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		h := uint16(0x7c00 | mant>>13)
		if h == 0x7c00 { // the payload was only in the dropped bits
			h++
		}
		return sign | h
	}
	e := exp - 127 + 15 // the float16 exponent field
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A float16 subnormal (or zero): value = m16 * 2^-24.
		if e < -10 { // below half the smallest subnormal: rounds to zero
			return sign
		}
		m := mant | 0x800000
		return sign | uint16(roundShiftEven(m, uint(14-e)))
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is right, up to infinity
	}
	return sign | uint16(h)
}

// roundShiftEven returns m >> s rounded to nearest, ties to even (s ≥ 1).
func roundShiftEven(m uint32, s uint) uint32 {
	q := m >> s
	rem := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// BFloat16ToFloat32 converts bfloat16 bits to a float32 (exact).
func BFloat16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Float32ToBFloat16 converts a float32 to bfloat16 bits, rounding to nearest
// with ties to even; every NaN becomes the quiet NaN 0x7fc0, as in PyTorch.
func Float32ToBFloat16(f float32) uint16 {
	if f != f {
		return 0x7fc0
	}
	b := math.Float32bits(f)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// FloatValues returns the elements of a float32, float16 or bfloat16 tensor
// as float32 values (half-precision values convert exactly).
func FloatValues(t *tensor.Tensor) ([]float32, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	switch t.DType {
	case tensor.Float32:
		out := make([]float32, len(t.Data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
		return out, nil
	case tensor.Float16:
		out := make([]float32, len(t.Data)/2)
		for i := range out {
			out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
		return out, nil
	case tensor.BFloat16:
		out := make([]float32, len(t.Data)/2)
		for i := range out {
			out[i] = BFloat16ToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor is %s, want float32, float16 or bfloat16", t.DType)
}

// FromFloat16 returns a float16 tensor holding v (rounded to nearest even)
// with the given shape.
func FromFloat16(v []float32, shape ...int64) *tensor.Tensor {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], Float32ToFloat16(x))
	}
	return &tensor.Tensor{DType: tensor.Float16, Shape: shape, Data: b}
}

// FromBFloat16 returns a bfloat16 tensor holding v (rounded to nearest even)
// with the given shape.
func FromBFloat16(v []float32, shape ...int64) *tensor.Tensor {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], Float32ToBFloat16(x))
	}
	return &tensor.Tensor{DType: tensor.BFloat16, Shape: shape, Data: b}
}
