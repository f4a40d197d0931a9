package pixels

import (
	"encoding/binary"
	"fmt"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Artifact converts an image or video artifact's tensor, as its contract
// declares it (dtype, layout, channels, range, mean/std), into uint8
// [H,W,C] / [T,H,W,C] RGB(A)/grey, which tensor.AsImage / AsVideo take.
// A tensor with one more leading dimension (a batch) converts item by item
// and keeps it. When nothing is to convert (uint8, HWC, RGB, RGBA or L at
// the full range) t itself is returned.
func Artifact(t *tensor.Tensor, a *wfspec.InferenceArtifactSpec) (*tensor.Tensor, error) {
	if a == nil {
		return nil, fmt.Errorf("pixels: nil artifact spec")
	}
	out, err := artifact(t, a)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.ArtifactID, err)
	}
	return out, nil
}

func artifact(t *tensor.Tensor, a *wfspec.InferenceArtifactSpec) (*tensor.Tensor, error) {
	if !a.Kind.IsPicture() {
		return nil, fmt.Errorf("is a %s artifact; Artifact converts image and video artifacts", a.Kind)
	}
	rank := a.Kind.Picture().Rank()
	if err := t.Check(); err != nil {
		return nil, err
	}
	if a.DType != "" && t.DType != a.DType {
		return nil, fmt.Errorf("tensor is %s, the artifact declares %s", t.DType, a.DType)
	}
	if len(t.Shape) != rank && len(t.Shape) != rank+1 {
		return nil, fmt.Errorf("tensor %s%v has %d dimensions; a %s has %d (%d with a leading batch dimension)", t.DType, t.Shape, len(t.Shape), a.Kind, rank, rank+1)
	}
	spec := a.Image
	if spec == nil {
		// Without a spec: HWC, with the tensor's own channels.
		order := map[int64]string{1: wfspec.ChannelsL, 3: wfspec.ChannelsRGB, 4: wfspec.ChannelsRGBA}[t.Shape[len(t.Shape)-1]]
		if order == "" {
			return nil, fmt.Errorf("tensor %s%v has %d channels (last dimension, layout HWC); want 1, 3 or 4, or declare the artifact's image spec", t.DType, t.Shape, t.Shape[len(t.Shape)-1])
		}
		spec = &wfspec.ImageSpec{Channels: order}
	}
	p, err := newPlan(t.DType, spec)
	if err != nil {
		return nil, err
	}
	pic := len(t.Shape) - 3
	h, w, c := t.Shape[pic], t.Shape[pic+1], t.Shape[pic+2]
	if p.chw {
		c, h, w = t.Shape[pic], t.Shape[pic+1], t.Shape[pic+2]
	}
	if c != int64(p.c) {
		return nil, fmt.Errorf("tensor %s%v has %d channels, but channels %s has %d (layout %s)", t.DType, t.Shape, c, p.order, p.c, spec.LayoutName())
	}
	if p.dtype == tensor.Uint8 && !p.chw && p.order != wfspec.ChannelsBGR {
		return t, nil
	}
	vals, err := values(t)
	if err != nil {
		return nil, err
	}
	n := 1 // pictures
	for _, d := range t.Shape[:pic] {
		n *= int(d)
	}
	hi, wi, ci := int(h), int(w), p.c
	px := make([]byte, n*hi*wi*ci)
	for i := range n {
		src, dst := vals[i*hi*wi*ci:], px[i*hi*wi*ci:]
		for y := range hi {
			for x := range wi {
				for k := range ci {
					j := (y*wi+x)*ci + k
					if p.chw {
						j = (k*hi+y)*wi + x
					}
					o := k
					if p.order == wfspec.ChannelsBGR {
						o = 2 - k
					}
					dst[(y*wi+x)*ci+o] = p.level(k, src[j])
				}
			}
		}
	}
	shape := append(append([]int64(nil), t.Shape[:pic]...), h, w, c)
	return tensor.FromUint8(px, shape...), nil
}

// values returns a checked tensor's elements as float64.
func values(t *tensor.Tensor) ([]float64, error) {
	out := make([]float64, t.NumElements())
	switch t.DType {
	case tensor.Uint8:
		for i, v := range t.Data {
			out[i] = float64(v)
		}
	case tensor.Int32:
		for i := range out {
			out[i] = float64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case tensor.Int64:
		for i := range out {
			out[i] = float64(int64(binary.LittleEndian.Uint64(t.Data[8*i:])))
		}
	default:
		f, err := artifactio.FloatValues(t)
		if err != nil {
			return nil, err
		}
		for i, v := range f {
			out[i] = float64(v)
		}
	}
	return out, nil
}
