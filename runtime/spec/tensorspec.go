package spec

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Dim is one dimension of a declared shape: a fixed size ("64"), a named
// size that every tensor of one call must agree on ("H", "N"), or "*" for
// any size. In a manifest a fixed size is written as a number and the
// others as strings: shape: [N, 3, H, W].
type Dim string

// Wildcard is the dimension that matches any size.
const Wildcard Dim = "*"

// dimName is the form of a named dimension.
var dimName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Size returns the fixed size of d, and whether d is one.
func (d Dim) Size() (int64, bool) {
	n, err := strconv.ParseInt(string(d), 10, 64)
	return n, err == nil && n >= 0 && !strings.HasPrefix(string(d), "+")
}

// Named reports whether d is a named dimension.
func (d Dim) Named() bool { return dimName.MatchString(string(d)) }

// Valid reports whether d is a fixed size, a name or the wildcard.
func (d Dim) Valid() bool {
	_, fixed := d.Size()
	return fixed || d.Named() || d == Wildcard
}

// MarshalJSON writes a fixed size as a number and other dimensions as
// strings.
func (d Dim) MarshalJSON() ([]byte, error) {
	if n, ok := d.Size(); ok {
		return []byte(strconv.FormatInt(n, 10)), nil
	}
	return json.Marshal(string(d))
}

// UnmarshalJSON reads a number (a fixed size) or a string.
func (d *Dim) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*d = Dim(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a dimension is a size or a name, not %s", b)
	}
	*d = Dim(n)
	return nil
}

// Shape is a declared tensor shape: one Dim per dimension.
type Shape []Dim

// String writes the shape as in messages: [N,3,H,W].
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = string(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// DimSpec constrains a named dimension of a task's shapes, as minimum,
// maximum and multiple_of constrain an int field.
type DimSpec struct {
	// Minimum is the smallest size the dimension may have.
	Minimum *int64 `json:"minimum,omitempty" jsonschema:"minimum=0"`
	// Maximum is the largest size the dimension may have.
	Maximum *int64 `json:"maximum,omitempty" jsonschema:"minimum=0"`
	// MultipleOf requires the size to be a multiple of it.
	MultipleOf *int64 `json:"multiple_of,omitempty" jsonschema:"minimum=1"`
}

// Check reports why size n breaks the constraints, or "".
func (d DimSpec) Check(n int64) string {
	var why []string
	if d.Minimum != nil && n < *d.Minimum {
		why = append(why, fmt.Sprintf("at least %d", *d.Minimum))
	}
	if d.Maximum != nil && n > *d.Maximum {
		why = append(why, fmt.Sprintf("at most %d", *d.Maximum))
	}
	if d.MultipleOf != nil && *d.MultipleOf > 0 && n%*d.MultipleOf != 0 {
		why = append(why, fmt.Sprintf("a multiple of %d", *d.MultipleOf))
	}
	if len(why) == 0 {
		return ""
	}
	return "must be " + strings.Join(why, " and ")
}

// Image layouts and channel orders an ImageSpec accepts.
const (
	LayoutHWC = "HWC"
	LayoutCHW = "CHW"

	ChannelsRGB  = "RGB"
	ChannelsBGR  = "BGR"
	ChannelsL    = "L"
	ChannelsRGBA = "RGBA"
)

// ImageSpec says how a picture becomes the tensor of an image or video
// field (and how an image or video artifact becomes a picture): the layout
// of the tensor's dimensions, the channel order, the range the pixel values
// are scaled to and an optional per-channel normalisation, applied in the
// order torchvision's ToTensor and Normalize apply them: v/255 scaled to
// range, then (v - mean[c]) / std[c].
type ImageSpec struct {
	// Layout is HWC (height, width, channels) or CHW; a video has a leading
	// frame dimension.
	Layout string `json:"layout,omitempty" jsonschema:"enum=HWC,enum=CHW,default=HWC"`
	// Channels is the channel order: RGB, BGR, L (grey) or RGBA.
	Channels string `json:"channels,omitempty" jsonschema:"enum=RGB,enum=BGR,enum=L,enum=RGBA,default=RGB"`
	// Range is [low, high], the values a black and a full pixel take before
	// normalisation; default [0, 1] for floating dtypes and [0, 255] for
	// uint8.
	Range []float64 `json:"range,omitempty" jsonschema:"minItems=2,maxItems=2"`
	// Mean, when set, is subtracted per channel after scaling.
	Mean []float64 `json:"mean,omitempty"`
	// Std, when set, divides per channel after subtracting the mean.
	Std []float64 `json:"std,omitempty"`
}

// ChannelCount returns the number of channels of the spec's order.
func (s *ImageSpec) ChannelCount() int {
	switch s.ChannelOrder() {
	case ChannelsL:
		return 1
	case ChannelsRGBA:
		return 4
	}
	return 3
}

// ChannelOrder returns the channel order, RGB when unset.
func (s *ImageSpec) ChannelOrder() string {
	if s == nil || s.Channels == "" {
		return ChannelsRGB
	}
	return s.Channels
}

// LayoutName returns the layout, HWC when unset.
func (s *ImageSpec) LayoutName() string {
	if s == nil || s.Layout == "" {
		return LayoutHWC
	}
	return s.Layout
}

// Problems returns what is wrong with the spec (paths relative to it).
func (s *ImageSpec) Problems() []Problem {
	var ps []Problem
	switch s.LayoutName() {
	case LayoutHWC, LayoutCHW:
	default:
		ps = append(ps, Problem{Path: "layout", Message: fmt.Sprintf("layout %q is not HWC or CHW", s.Layout)})
	}
	switch s.ChannelOrder() {
	case ChannelsRGB, ChannelsBGR, ChannelsL, ChannelsRGBA:
	default:
		ps = append(ps, Problem{Path: "channels", Message: fmt.Sprintf("channels %q is not RGB, BGR, L or RGBA", s.Channels)})
	}
	if len(s.Range) != 0 && (len(s.Range) != 2 || !(s.Range[0] < s.Range[1])) {
		ps = append(ps, Problem{Path: "range", Message: fmt.Sprintf("range %v must be [low, high] with low < high", s.Range)})
	}
	n := s.ChannelCount()
	if len(s.Mean) != 0 && len(s.Mean) != n {
		ps = append(ps, Problem{Path: "mean", Message: fmt.Sprintf("mean has %d values, but %s has %d channels", len(s.Mean), s.ChannelOrder(), n)})
	}
	if len(s.Std) != 0 && len(s.Std) != n {
		ps = append(ps, Problem{Path: "std", Message: fmt.Sprintf("std has %d values, but %s has %d channels", len(s.Std), s.ChannelOrder(), n)})
	}
	if (len(s.Mean) == 0) != (len(s.Std) == 0) {
		ps = append(ps, Problem{Path: "std", Key: len(s.Std) != 0, Message: "mean and std go together: set both or neither"})
	}
	for i, x := range s.Std {
		if x == 0 {
			ps = append(ps, Problem{Path: "std/" + strconv.Itoa(i), Message: "std must not be 0"})
		}
	}
	return ps
}

// TensorContract is what a tensor-like field or artifact declares about its
// tensors: the dtype, the shape and, for pictures, the image spec. A zero
// contract accepts any tensor.
type TensorContract struct {
	// DType is the element type; "" accepts any.
	DType tensor.DType
	// Shape is the declared shape; nil accepts any rank.
	Shape Shape
	// Image is the picture conversion of image and video values.
	Image *ImageSpec
}

// Contract returns the field's tensor contract.
func (f *InferenceFieldSpec) Contract() TensorContract {
	return TensorContract{DType: f.DType, Shape: f.Shape, Image: f.Image}
}

// Contract returns the artifact's tensor contract.
func (a *InferenceArtifactSpec) Contract() TensorContract {
	return TensorContract{DType: a.DType, Shape: a.Shape, Image: a.Image}
}

// String writes the contract as in messages: float32[N,3,H,W], or
// "any tensor".
func (c TensorContract) String() string {
	d := string(c.DType)
	if d == "" && c.Shape == nil {
		return "any tensor"
	}
	if d == "" {
		d = "tensor"
	}
	if c.Shape == nil {
		return d
	}
	return d + c.Shape.String()
}
