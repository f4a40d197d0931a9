package pixels

import (
	"image"
	"image/color"
	"math"
	"testing"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// fuzzSpec derives an image spec, a dtype and a shape from the fuzzer's
// bytes: valid and invalid layouts, channel orders, ranges (NaN, infinite,
// reversed), mean/std (zero, missing, wrong length) and shapes.
func fuzzSpec(b []byte) (tensor.DType, *wfspec.ImageSpec, wfspec.Shape) {
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	dtypes := append([]tensor.DType{"", "complex64"}, tensor.DTypes...)
	dtype := dtypes[int(at(0))%len(dtypes)]
	var spec *wfspec.ImageSpec
	if at(1)%5 != 0 {
		spec = &wfspec.ImageSpec{
			Layout:   []string{"", "HWC", "CHW", "WHC"}[at(2)%4],
			Channels: []string{"", "RGB", "BGR", "L", "RGBA", "CMYK"}[at(3)%6],
		}
		nums := []float64{0, 1, -1, 255, 0.5, math.NaN(), math.Inf(1), 1e-40}
		if at(4)%3 == 1 {
			spec.Range = []float64{nums[at(5)%8], nums[at(6)%8]}
		}
		if n := int(at(7) % 5); n > 0 {
			spec.Mean, spec.Std = make([]float64, n), make([]float64, int(at(8)%5))
			for i := range spec.Mean {
				spec.Mean[i] = nums[at(9+i)%8]
			}
			for i := range spec.Std {
				spec.Std[i] = nums[at(13+i)%8]
			}
		}
	}
	var shape wfspec.Shape
	if n := int(at(17) % 7); n > 0 {
		dims := []wfspec.Dim{"N", "H", "W", "*", "1", "3", "4", "8", "0"}
		shape = make(wfspec.Shape, n-1)
		for i := range shape {
			shape[i] = dims[at(18+i)%9]
		}
	}
	return dtype, spec, shape
}

// fuzzPicture builds a small picture of one of the types a decoder returns.
func fuzzPicture(b []byte, w, h int) image.Image {
	r := image.Rect(1, 2, 1+w, 2+h)
	var m interface {
		image.Image
		Set(x, y int, c color.Color)
	}
	switch len(b) % 4 {
	case 0:
		m = image.NewGray(r)
	case 1:
		m = image.NewRGBA(r)
	case 2:
		m = image.NewNRGBA(r)
	default:
		m = image.NewRGBA64(r)
	}
	for i := range w * h {
		k := 4 * i
		if k+3 < len(b) {
			m.Set(r.Min.X+i%w, r.Min.Y+i/w, color.NRGBA{b[k], b[k+1], b[k+2], b[k+3]})
		}
	}
	return m
}

// FuzzTensor converts random pictures as random specs say, and back: it
// must return a tensor of the declared kind or an error, never panic.
func FuzzTensor(f *testing.F) {
	f.Add([]byte{1, 1, 2, 3, 1, 1, 3, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 5, 0, 5, 7, 7}, uint8(8), uint8(8), false)
	f.Add([]byte{2, 2, 1, 1, 0, 0, 0, 0}, uint8(3), uint8(2), true)
	f.Add([]byte{}, uint8(0), uint8(1), false)
	f.Fuzz(func(t *testing.T, b []byte, w, h uint8, video bool) {
		dtype, spec, shape := fuzzSpec(b)
		wi, hi := int(w%17), int(h%17)
		field := &wfspec.InferenceFieldSpec{FieldID: "x", Kind: wfspec.KindImage, DType: dtype, Shape: shape, Image: spec}
		var out *tensor.Tensor
		var err error
		if video {
			field.Kind = wfspec.KindVideo
			frames := []image.Image{fuzzPicture(b, wi, hi), fuzzPicture(b[min(len(b), 1):], wi, hi)}
			out, err = VideoTensor(frames, field)
		} else {
			out, err = Tensor(fuzzPicture(b, wi, hi), field)
		}
		if err != nil {
			return
		}
		if cerr := out.Check(); cerr != nil {
			t.Fatalf("invalid tensor: %v", cerr)
		}
		kind := wfspec.ArtifactImage
		if video {
			kind = wfspec.ArtifactVideo
		}
		back, err := Artifact(out, &wfspec.InferenceArtifactSpec{ArtifactID: "y", Kind: kind, DType: dtype, Image: spec})
		if err != nil {
			t.Fatalf("Artifact refuses what Tensor made (%s%v): %v", out.DType, out.Shape, err)
		}
		if kind == wfspec.ArtifactImage {
			if _, err := tensor.AsImage(back); err != nil {
				t.Fatalf("AsImage refuses: %v", err)
			}
		} else if _, err := tensor.AsVideo(back, 0); err != nil {
			t.Fatalf("AsVideo refuses: %v", err)
		}
	})
}

// FuzzArtifact converts random tensors as random specs say: a uint8
// picture or an error, never a panic.
func FuzzArtifact(f *testing.F) {
	f.Add([]byte{1, 1, 2, 3}, []byte{2, 3, 3}, false)
	f.Add([]byte{7, 2}, []byte{1, 2, 4, 1}, true)
	f.Fuzz(func(t *testing.T, b, dims []byte, video bool) {
		dtype, spec, _ := fuzzSpec(b)
		if len(dims) > 6 {
			dims = dims[:6]
		}
		shape := make([]int64, len(dims))
		n := int64(1)
		for i, d := range dims {
			shape[i] = int64(d % 6)
			n *= shape[i]
		}
		td := dtype
		if !td.Valid() {
			td = tensor.Float32
		}
		data := make([]byte, n*int64(td.Size()))
		for i := range data {
			data[i] = byte(i*31) ^ byte(len(b))
		}
		kind := wfspec.ArtifactImage
		if video {
			kind = wfspec.ArtifactVideo
		}
		out, err := Artifact(&tensor.Tensor{DType: td, Shape: shape, Data: data}, &wfspec.InferenceArtifactSpec{ArtifactID: "y", Kind: kind, DType: dtype, Image: spec})
		if err != nil {
			return
		}
		if out.DType != tensor.Uint8 || out.Check() != nil {
			t.Fatalf("got %s%v", out.DType, out.Shape)
		}
	})
}
