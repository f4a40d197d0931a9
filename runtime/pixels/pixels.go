package pixels

import (
	"fmt"
	"image"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Tensor converts a picture into the tensor an image field declares (dtype,
// image spec, shape; for a stacked input of a task whose batching names its
// dimension, the per-item shape).
func Tensor(img image.Image, f *spec.InferenceFieldSpec) (*tensor.Tensor, error) {
	if f == nil {
		return nil, fmt.Errorf("pixels: nil field spec")
	}
	if f.Kind.Picture() != spec.PictureImage {
		return nil, fmt.Errorf("field %s: is a %s field; Tensor converts a picture for an image field", f.FieldID, f.Kind)
	}
	t, err := convert([]image.Image{img}, f, false)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", f.FieldID, err)
	}
	return t, nil
}

// VideoTensor converts frames into the tensor a video field declares (a
// leading frame dimension).
func VideoTensor(frames []image.Image, f *spec.InferenceFieldSpec) (*tensor.Tensor, error) {
	if f == nil {
		return nil, fmt.Errorf("pixels: nil field spec")
	}
	if f.Kind.Picture() != spec.PictureVideo {
		return nil, fmt.Errorf("field %s: is a %s field; VideoTensor converts frames for a video field", f.FieldID, f.Kind)
	}
	t, err := convert(frames, f, true)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", f.FieldID, err)
	}
	return t, nil
}

// convert converts one picture (video false) or the frames of a video.
func convert(frames []image.Image, f *spec.InferenceFieldSpec, video bool) (*tensor.Tensor, error) {
	p, err := newPlan(f.DType, f.Image)
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("no frames")
	}
	var h, w int
	for i, m := range frames {
		what := "picture"
		if video {
			what = fmt.Sprintf("frame %d", i)
		}
		if m == nil {
			return nil, fmt.Errorf("%s is nil", what)
		}
		b := m.Bounds()
		if b.Dx() < 1 || b.Dy() < 1 {
			return nil, fmt.Errorf("%s is empty (%dx%d)", what, b.Dx(), b.Dy())
		}
		if i == 0 {
			h, w = b.Dy(), b.Dx()
		} else if b.Dy() != h || b.Dx() != w {
			return nil, fmt.Errorf("%s is %dx%d, frame 0 is %dx%d (width x height); a video's frames share one size", what, b.Dx(), b.Dy(), w, h)
		}
	}
	shape := []int64{int64(h), int64(w), int64(p.c)}
	names := []string{"height", "width", "channels"}
	if p.chw {
		shape = []int64{int64(p.c), int64(h), int64(w)}
		names = []string{"channels", "height", "width"}
	}
	if video {
		shape = append([]int64{int64(len(frames))}, shape...)
		names = append([]string{"frames"}, names...)
	}
	if err := fit(f.Shape, shape, names, p); err != nil {
		return nil, err
	}
	size := h * w * p.c * p.elemSize()
	data := make([]byte, size*len(frames))
	for i, m := range frames {
		p.emit(read(m, p.order), h, w, data[i*size:(i+1)*size])
	}
	return &tensor.Tensor{DType: p.dtype, Shape: shape, Data: data}, nil
}

// fit checks a picture's tensor shape (its dimensions named by names)
// against a declared shape: every fixed size matches and a name repeated in
// it takes one size. A declared shape with one more dimension leads with the
// batch dimension, which one picture does not have.
func fit(declared spec.Shape, shape []int64, names []string, p *plan) error {
	if declared == nil {
		return nil
	}
	item := declared
	switch len(declared) {
	case len(shape):
	case len(shape) + 1:
		item = declared[1:]
	default:
		layout := spec.LayoutHWC
		if p.chw {
			layout = spec.LayoutCHW
		}
		return fmt.Errorf("shape %s has %d dimensions, but a picture in layout %s has %d (%d with a leading batch dimension)",
			declared, len(declared), layout, len(shape), len(shape)+1)
	}
	var bad []string
	seen := map[spec.Dim]int{}
	for i, d := range item {
		if n, fixed := d.Size(); fixed && n != shape[i] {
			bad = append(bad, fmt.Sprintf("%s %d, want %d", names[i], shape[i], n))
			continue
		}
		if !d.Named() {
			continue
		}
		if j, ok := seen[d]; ok && shape[j] != shape[i] {
			bad = append(bad, fmt.Sprintf("%s %d and %s %d must be equal (both %s)", names[j], shape[j], names[i], shape[i], d))
		}
		seen[d] = i
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s (shape %s; pictures are not resized)", strings.Join(bad, "; "), declared)
	}
	return nil
}

// SetImage sets *dst to the tensor of img as field f declares it (Tensor):
// the body of a generated params type's Set<Field>FromImage. *dst is left
// as it was on an error.
func SetImage(dst **tensor.Tensor, img image.Image, f *spec.InferenceFieldSpec) error {
	t, err := Tensor(img, f)
	if err != nil {
		return err
	}
	*dst = t
	return nil
}

// SetFrames sets *dst to the tensor of frames as video field f declares it
// (VideoTensor): the body of a generated Set<Field>FromFrames.
func SetFrames(dst **tensor.Tensor, frames []image.Image, f *spec.InferenceFieldSpec) error {
	t, err := VideoTensor(frames, f)
	if err != nil {
		return err
	}
	*dst = t
	return nil
}
