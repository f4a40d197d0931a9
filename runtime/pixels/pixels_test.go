package pixels

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func imageField(dtype tensor.DType, shape wfspec.Shape, spec *wfspec.ImageSpec) *wfspec.InferenceFieldSpec {
	return &wfspec.InferenceFieldSpec{FieldID: "pixels", Kind: wfspec.KindImage, DType: dtype, Shape: shape, Image: spec}
}

func shapeOf(dims ...any) wfspec.Shape {
	s := make(wfspec.Shape, len(dims))
	for i, d := range dims {
		s[i] = wfspec.Dim(fmt.Sprint(d))
	}
	return s
}

// grey returns a w×h grey picture whose value at (x, y) is (x + 16*y) % 256.
func grey(w, h int) *image.Gray {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetGray(x, y, color.Gray{uint8((x + 16*y) % 256)})
		}
	}
	return m
}

func TestTensorDigitsSpec(t *testing.T) {
	// The digits model's input: float32 [N,1,8,8], CHW, L, normalised.
	f := imageField(tensor.Float32, shapeOf("N", 1, 8, 8), &wfspec.ImageSpec{Layout: "CHW", Channels: "L", Range: []float64{0, 1}, Mean: []float64{0.5}, Std: []float64{0.25}})
	got, err := Tensor(grey(8, 8), f)
	if err != nil {
		t.Fatal(err)
	}
	if got.DType != tensor.Float32 || !slices.Equal(got.Shape, []int64{1, 8, 8}) {
		t.Fatalf("got %s%v, want float32[1 8 8] (one item of [N,1,8,8])", got.DType, got.Shape)
	}
	v, _ := got.Float32s()
	for i, x := range v {
		want := (float32(uint8((i%8+16*(i/8))%256))/255 - 0.5) / 0.25
		if x != want {
			t.Fatalf("element %d = %v, want %v", i, x, want)
		}
	}
}

func TestTensorDefaultsAndDTypes(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	m.SetNRGBA(0, 0, color.NRGBA{10, 20, 30, 40})
	m.SetNRGBA(1, 0, color.NRGBA{250, 128, 0, 255})
	cases := []struct {
		name  string
		dtype tensor.DType
		spec  *wfspec.ImageSpec
		want  *tensor.Tensor
	}{
		{"no spec: uint8 HWC RGB", "", nil, tensor.FromUint8([]uint8{10, 20, 30, 250, 128, 0}, 1, 2, 3)},
		{"RGBA CHW", "", &wfspec.ImageSpec{Layout: "CHW", Channels: "RGBA"}, tensor.FromUint8([]uint8{10, 250, 20, 128, 30, 0, 40, 255}, 4, 1, 2)},
		{"BGR int32", tensor.Int32, &wfspec.ImageSpec{Channels: "BGR"}, int32Tensor([]int32{30, 20, 10, 0, 128, 250}, 1, 2, 3)},
		{"range alone picks float32", "", &wfspec.ImageSpec{Channels: "L", Range: []float64{0, 2}}, tensor.FromFloat32([]float32{float32(float32(luma(10, 20, 30))/255) * 2, float32(float32(luma(250, 128, 0))/255) * 2}, 1, 2, 1)},
		{"float16", tensor.Float16, &wfspec.ImageSpec{Channels: "L"}, artifactio.FromFloat16([]float32{float32(luma(10, 20, 30)) / 255, float32(luma(250, 128, 0)) / 255}, 1, 2, 1)},
	}
	for _, c := range cases {
		got, err := Tensor(m, imageField(c.dtype, nil, c.spec))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.DType != c.want.DType || !slices.Equal(got.Shape, c.want.Shape) || !slices.Equal(got.Data, c.want.Data) {
			t.Errorf("%s: got %s%v %v, want %s%v %v", c.name, got.DType, got.Shape, got.Data, c.want.DType, c.want.Shape, c.want.Data)
		}
	}
}

func int32Tensor(v []int32, shape ...int64) *tensor.Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return &tensor.Tensor{DType: tensor.Int32, Shape: shape, Data: b}
}

func TestTensorSubImage(t *testing.T) {
	// A sub-image keeps its parent's stride; only its own pixels count.
	m := grey(16, 16).SubImage(image.Rect(4, 8, 12, 16))
	got, err := Tensor(m, imageField("", wfspec.Shape{"8", "8", "1"}, &wfspec.ImageSpec{Channels: "L"}))
	if err != nil {
		t.Fatal(err)
	}
	for y := range 8 {
		for x := range 8 {
			if w := uint8((x + 4 + 16*(y+8)) % 256); got.Data[y*8+x] != w {
				t.Fatalf("(%d,%d) = %d, want %d", x, y, got.Data[y*8+x], w)
			}
		}
	}
}

func TestTensorErrors(t *testing.T) {
	l := &wfspec.ImageSpec{Layout: "CHW", Channels: "L"}
	cases := []struct {
		name string
		img  image.Image
		f    *wfspec.InferenceFieldSpec
		want string
	}{
		{"size", grey(16, 12), imageField(tensor.Float32, shapeOf("N", 1, 8, 8), l), "field pixels: height 12, want 8; width 16, want 8 (shape [N,1,8,8]; pictures are not resized)"},
		{"channels", grey(8, 8), imageField("", shapeOf(3, 8, 8), l), "field pixels: channels 1, want 3"},
		{"square", grey(8, 4), imageField("", shapeOf(1, "H", "H"), l), "field pixels: height 4 and width 8 must be equal (both H)"},
		{"rank", grey(8, 8), imageField("", shapeOf(8, 8), l), "field pixels: shape [8,8] has 2 dimensions, but a picture in layout CHW has 3 (4 with a leading batch dimension)"},
		{"kind", grey(8, 8), &wfspec.InferenceFieldSpec{FieldID: "tokens", Kind: wfspec.KindTensor}, "field tokens: is a tensor field; Tensor converts a picture for an image field"},
		{"nil image", nil, imageField("", nil, nil), "field pixels: picture is nil"},
		{"empty image", image.NewGray(image.Rect(0, 0, 0, 3)), imageField("", nil, nil), "field pixels: picture is empty (0x3)"},
		{"bool", grey(8, 8), imageField(tensor.Bool, nil, nil), `field pixels: a picture cannot become a "bool" tensor`},
		{"uint8 mean", grey(8, 8), imageField(tensor.Uint8, nil, &wfspec.ImageSpec{Channels: "L", Mean: []float64{0.5}, Std: []float64{0.5}}), "mean/std need a floating dtype"},
		{"int range", grey(8, 8), imageField(tensor.Int64, nil, &wfspec.ImageSpec{Range: []float64{0, 1}}), "range [0 1] needs a floating dtype"},
		{"bad spec", grey(8, 8), imageField("", nil, &wfspec.ImageSpec{Layout: "WHC"}), `field pixels: image/layout: layout "WHC" is not HWC or CHW`},
		{"nil field", grey(8, 8), nil, "pixels: nil field spec"},
	}
	for _, c := range cases {
		_, err := Tensor(c.img, c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestVideoTensor(t *testing.T) {
	f := &wfspec.InferenceFieldSpec{FieldID: "clip", Kind: wfspec.KindVideo, DType: tensor.Float32, Shape: shapeOf("B", "T", 1, 4, 4),
		Image: &wfspec.ImageSpec{Layout: "CHW", Channels: "L"}}
	frames := []image.Image{grey(4, 4), grey(4, 4).SubImage(image.Rect(0, 0, 4, 4)), image.NewGray(image.Rect(0, 0, 4, 4))}
	got, err := VideoTensor(frames, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape, []int64{3, 1, 4, 4}) {
		t.Fatalf("shape %v, want [3 1 4 4] (one item of [B,T,1,4,4])", got.Shape)
	}
	v, _ := got.Float32s()
	if v[5] != float32(17)/255 || v[16+5] != float32(17)/255 || v[32+5] != 0 {
		t.Errorf("frame values %v %v %v", v[5], v[16+5], v[32+5])
	}
	for _, c := range []struct {
		frames []image.Image
		f      *wfspec.InferenceFieldSpec
		want   string
	}{
		{[]image.Image{grey(4, 4), grey(4, 5)}, f, "field clip: frame 1 is 4x5, frame 0 is 4x4"},
		{nil, f, "field clip: no frames"},
		{frames, &wfspec.InferenceFieldSpec{FieldID: "clip", Kind: wfspec.KindVideo, Shape: shapeOf(2, 4, 4, 1), Image: &wfspec.ImageSpec{Channels: "L"}}, "field clip: frames 3, want 2"},
		{frames, imageField("", nil, nil), "field pixels: is a image field; VideoTensor converts frames for a video field"},
	} {
		if _, err := VideoTensor(c.frames, c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q", err, c.want)
		}
	}
}

// TestArtifactRoundTrip checks that Artifact undoes Tensor: a picture
// converted as a spec says and back is the picture again, in RGB, RGBA or
// grey.
func TestArtifactRoundTrip(t *testing.T) {
	pics := testPictures()
	specs := []struct {
		dtype tensor.DType
		spec  wfspec.ImageSpec
	}{
		{"", wfspec.ImageSpec{}},
		{tensor.Float32, wfspec.ImageSpec{Layout: "CHW", Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}}},
		{tensor.Float32, wfspec.ImageSpec{Channels: "BGR", Range: []float64{0, 255}, Mean: []float64{103.53, 116.28, 123.675}, Std: []float64{57.375, 57.12, 58.395}}},
		{tensor.Float32, wfspec.ImageSpec{Layout: "CHW", Channels: "L", Range: []float64{-1, 1}}},
		{tensor.Float16, wfspec.ImageSpec{Layout: "CHW", Channels: "RGBA"}},
		{tensor.Int64, wfspec.ImageSpec{Layout: "CHW", Channels: "BGR"}},
		{tensor.Uint8, wfspec.ImageSpec{Channels: "RGBA"}},
	}
	for pn, m := range pics {
		for _, s := range specs {
			in, err := Tensor(m, imageField(s.dtype, nil, &s.spec))
			if err != nil {
				t.Fatal(err)
			}
			a := &wfspec.InferenceArtifactSpec{ArtifactID: "picture", Kind: wfspec.ArtifactImage, DType: s.dtype, Image: &s.spec}
			got, err := Artifact(in, a)
			if err != nil {
				t.Fatalf("%s %s %+v: %v", pn, s.dtype, s.spec, err)
			}
			order := s.spec.ChannelOrder()
			if order == wfspec.ChannelsBGR {
				order = wfspec.ChannelsRGB
			}
			want := read(m, order)
			if !slices.Equal(got.Shape, []int64{7, 13, int64(channels(order))}) || got.DType != tensor.Uint8 {
				t.Errorf("%s %s %+v: got %s%v", pn, s.dtype, s.spec, got.DType, got.Shape)
				continue
			}
			if s.dtype == tensor.Float16 {
				// float16 keeps 11 bits: within half a level.
				for i := range want {
					if d := int(got.Data[i]) - int(want[i]); d < -1 || d > 1 {
						t.Fatalf("%s float16: element %d = %d, want %d", pn, i, got.Data[i], want[i])
					}
				}
				continue
			}
			if !slices.Equal(got.Data, want) {
				t.Errorf("%s %s %+v: the round trip changed the picture", pn, s.dtype, s.spec)
			}
			if _, err := tensor.AsImage(got); err != nil {
				t.Errorf("AsImage refuses the result: %v", err)
			}
		}
	}
}

func TestArtifactVideoAndBatch(t *testing.T) {
	// A float32 [B,T,C,H,W] batch of two 2-frame grey videos in [-1, 1].
	vals := make([]float32, 2*2*1*2*3)
	for i := range vals {
		vals[i] = float32(i%5)/2 - 1 // -1, -0.5, 0, 0.5, 1
	}
	vals[0], vals[1] = float32(math.NaN()), 7
	in := tensor.FromFloat32(vals, 2, 2, 1, 2, 3)
	a := &wfspec.InferenceArtifactSpec{ArtifactID: "clip", Kind: wfspec.ArtifactVideo, DType: tensor.Float32,
		Image: &wfspec.ImageSpec{Layout: "CHW", Channels: "L", Range: []float64{-1, 1}}}
	got, err := Artifact(in, a)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape, []int64{2, 2, 2, 3, 1}) {
		t.Fatalf("shape %v, want [2 2 2 3 1]", got.Shape)
	}
	levels := map[float32]uint8{-1: 0, -0.5: 64, 0: 128, 0.5: 191, 1: 255}
	for i := 2; i < len(vals); i++ {
		if got.Data[i] != levels[vals[i]] {
			t.Errorf("element %d: %v became %d, want %d", i, vals[i], got.Data[i], levels[vals[i]])
		}
	}
	if got.Data[0] != 0 || got.Data[1] != 255 {
		t.Errorf("NaN became %d (want 0), 7 became %d (want 255)", got.Data[0], got.Data[1])
	}
	// Without a spec, a uint8 HWC picture is returned as it is.
	px := tensor.FromUint8([]uint8{1, 2, 3, 4, 5, 6}, 1, 2, 3)
	same, err := Artifact(px, &wfspec.InferenceArtifactSpec{ArtifactID: "img", Kind: wfspec.ArtifactImage})
	if err != nil || same != px {
		t.Errorf("uint8 HWC RGB without a spec: %v, %v", same, err)
	}
}

func TestArtifactErrors(t *testing.T) {
	img := func(spec *wfspec.ImageSpec, dtype tensor.DType) *wfspec.InferenceArtifactSpec {
		return &wfspec.InferenceArtifactSpec{ArtifactID: "img", Kind: wfspec.ArtifactImage, DType: dtype, Image: spec}
	}
	f32 := tensor.FromFloat32(make([]float32, 12), 2, 2, 3)
	cases := []struct {
		t    *tensor.Tensor
		a    *wfspec.InferenceArtifactSpec
		want string
	}{
		{f32, img(nil, tensor.Uint8), "artifact img: tensor is float32, the artifact declares uint8"},
		{f32, img(&wfspec.ImageSpec{Layout: "CHW"}, ""), "artifact img: tensor float32[2 2 3] has 2 channels, but channels RGB has 3 (layout CHW)"},
		{tensor.FromFloat32(make([]float32, 4), 2, 2), img(nil, ""), "tensor float32[2 2] has 2 dimensions; a image has 3 (4 with a leading batch dimension)"},
		{tensor.FromFloat32(make([]float32, 8), 2, 2, 2), img(nil, ""), "has 2 channels (last dimension, layout HWC); want 1, 3 or 4"},
		{f32, &wfspec.InferenceArtifactSpec{ArtifactID: "e", Kind: wfspec.ArtifactEmbedding}, "artifact e: is a embedding artifact"},
		{&tensor.Tensor{DType: tensor.Float32, Shape: []int64{2, 2, 3}}, img(nil, ""), "needs 48 bytes, has 0"},
		{tensor.FromUint8(make([]uint8, 12), 2, 2, 3), img(nil, tensor.Bool), "tensor is uint8, the artifact declares bool"},
		{nil, img(nil, ""), "artifact img: nil tensor"},
	}
	for _, c := range cases {
		if _, err := Artifact(c.t, c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q", err, c.want)
		}
	}
	if _, err := Artifact(f32, nil); err == nil {
		t.Error("nil artifact spec accepted")
	}
}

func TestTensorRefusesNonFiniteSpecs(t *testing.T) {
	for _, spec := range []*wfspec.ImageSpec{
		{Channels: "L", Range: []float64{0, 1e39}},                 // infinite in float32
		{Channels: "L", Range: []float64{1, 1 + 1e-12}},            // low == high in float32
		{Channels: "L", Mean: []float64{0}, Std: []float64{1e-50}}, // std 0 in float32
	} {
		if _, err := Tensor(grey(2, 2), imageField(tensor.Float32, nil, spec)); err == nil || !strings.Contains(err.Error(), "float32") {
			t.Errorf("%+v: error %v, want one about float32", spec, err)
		}
	}
}
