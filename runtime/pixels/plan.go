package pixels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// plan is a compiled picture conversion: the dtype, layout and channel
// order of the tensor, and for floating dtypes the value every 8-bit level
// of every channel becomes.
type plan struct {
	dtype tensor.DType
	chw   bool
	order string
	c     int // channels
	// floating conversions, per channel
	lo, scale float32   // range low and high-low
	mean, std []float32 // nil without normalisation
	table     [][256]float32
}

// newPlan compiles the conversion of an image spec (nil: the defaults) to
// dtype ("" picks uint8 or float32 as the package doc says).
func newPlan(dtype tensor.DType, s *spec.ImageSpec) (*plan, error) {
	if s == nil {
		s = &spec.ImageSpec{}
	}
	if ps := s.Problems(); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = "image/" + p.Path + ": " + p.Message
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	scaled := len(s.Range) != 0 || len(s.Mean) != 0
	if dtype == "" {
		dtype = tensor.Uint8
		if scaled {
			dtype = tensor.Float32
		}
	}
	p := &plan{dtype: dtype, chw: s.LayoutName() == spec.LayoutCHW, order: s.ChannelOrder(), c: s.ChannelCount()}
	switch dtype {
	case tensor.Float32, tensor.Float16, tensor.BFloat16:
	case tensor.Uint8, tensor.Int32, tensor.Int64:
		if len(s.Mean) != 0 {
			return nil, fmt.Errorf("dtype %s holds the 8-bit values as they are; mean/std need a floating dtype (float32, float16, bfloat16)", dtype)
		}
		if len(s.Range) != 0 && (s.Range[0] != 0 || s.Range[1] != 255) {
			return nil, fmt.Errorf("dtype %s holds the 8-bit values as they are; range %v needs a floating dtype (float32, float16, bfloat16)", dtype, s.Range)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("a picture cannot become a %q tensor; use a floating dtype or uint8, int32, int64", dtype)
	}
	lo, hi := float32(0), float32(1)
	if len(s.Range) == 2 {
		lo, hi = float32(s.Range[0]), float32(s.Range[1])
	}
	p.lo, p.scale = lo, hi-lo
	if !finite(lo, hi, p.scale) || p.scale == 0 {
		return nil, fmt.Errorf("range %v is not [low, high] with low < high in float32", s.Range)
	}
	if len(s.Mean) != 0 {
		p.mean, p.std = make([]float32, p.c), make([]float32, p.c)
		for i := range p.c {
			p.mean[i], p.std[i] = float32(s.Mean[i]), float32(s.Std[i])
			if !finite(p.mean[i], p.std[i]) || p.std[i] == 0 {
				return nil, fmt.Errorf("mean %v and std %v must be finite float32 values, std not 0", s.Mean, s.Std)
			}
		}
	}
	unit := lo == 0 && hi == 1
	p.table = make([][256]float32, p.c)
	for c := range p.c {
		for v := range 256 {
			// Explicit float32 conversions round every step, as torch's
			// separate element-wise ops do (no fused multiply-add).
			x := float32(v) / 255
			if !unit {
				x = float32(x*p.scale) + lo
			}
			if p.mean != nil {
				x = float32(x-p.mean[c]) / p.std[c]
			}
			p.table[c][v] = x
		}
	}
	return p, nil
}

// elemSize is the byte size of one element of the plan's dtype.
func (p *plan) elemSize() int { return p.dtype.Size() }

// emit writes an H×W picture, px holding its 8-bit values in HWC order and
// the plan's channel order, into dst in the plan's layout and dtype.
func (p *plan) emit(px []uint8, h, w int, dst []byte) {
	c, es := p.c, p.elemSize()
	for y := range h {
		for x := range w {
			for k := range c {
				v := px[(y*w+x)*c+k]
				i := (y*w+x)*c + k // HWC index
				if p.chw {
					i = (k*h+y)*w + x
				}
				p.put(dst[i*es:], k, v)
			}
		}
	}
}

// put writes channel k's value for 8-bit level v at the start of b.
func (p *plan) put(b []byte, k int, v uint8) {
	switch p.dtype {
	case tensor.Uint8:
		b[0] = v
	case tensor.Int32:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case tensor.Int64:
		binary.LittleEndian.PutUint64(b, uint64(v))
	case tensor.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(p.table[k][v]))
	case tensor.Float16:
		binary.LittleEndian.PutUint16(b, artifactio.Float32ToFloat16(p.table[k][v]))
	case tensor.BFloat16:
		binary.LittleEndian.PutUint16(b, artifactio.Float32ToBFloat16(p.table[k][v]))
	}
}

// level undoes the plan's conversion for one value x of channel k: the
// 8-bit level it stands for, rounded to nearest and clamped to 0..255 (NaN
// becomes 0).
func (p *plan) level(k int, x float64) uint8 {
	if p.table != nil {
		if p.mean != nil {
			x = x*float64(p.std[k]) + float64(p.mean[k])
		}
		x = (x - float64(p.lo)) / float64(p.scale) * 255
	}
	switch {
	case !(x > 0): // also NaN
		return 0
	case x >= 255:
		return 255
	}
	return uint8(math.Round(x))
}

// finite reports whether every value is neither infinite nor NaN.
func finite(vs ...float32) bool {
	for _, v := range vs {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
			return false
		}
	}
	return true
}
