package artifactio

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// videoDims validates a video artifact and returns its frame count, height,
// width and channels.
func videoDims(v *tensor.Video) (t, h, w, c int, err error) {
	if v == nil {
		return 0, 0, 0, 0, fmt.Errorf("video: nil video")
	}
	if _, err := tensor.AsVideo(v.Frames, v.FPS); err != nil {
		return 0, 0, 0, 0, err
	}
	if math.IsNaN(v.FPS) || math.IsInf(v.FPS, 0) || v.FPS < 0 {
		return 0, 0, 0, 0, fmt.Errorf("video: fps %v, want a finite number ≥ 0", v.FPS)
	}
	s := v.Frames.Shape
	if s[0] < 1 || s[1] < 1 || s[2] < 1 {
		return 0, 0, 0, 0, fmt.Errorf("video: empty video %v, want at least one frame of at least 1×1 pixels", s)
	}
	return int(s[0]), int(s[1]), int(s[2]), int(s[3]), nil
}

// imageDims validates an image artifact and returns its height, width and
// channels.
func imageDims(img *tensor.Image) (h, w, c int, err error) {
	if img == nil {
		return 0, 0, 0, fmt.Errorf("image: nil image")
	}
	if _, err := tensor.AsImage(img.Pixels); err != nil {
		return 0, 0, 0, err
	}
	s := img.Pixels.Shape
	if s[0] < 1 || s[1] < 1 {
		return 0, 0, 0, fmt.Errorf("image: empty image %v, want at least 1×1 pixels", s)
	}
	return int(s[0]), int(s[1]), int(s[2]), nil
}

// Frame returns frame i of a video as an image. The pixels are copied.
func Frame(v *tensor.Video, i int) (*tensor.Image, error) {
	t, h, w, c, err := videoDims(v)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= t {
		return nil, fmt.Errorf("video: frame %d out of range [0, %d)", i, t)
	}
	n := h * w * c
	px := make([]byte, n)
	copy(px, v.Frames.Data[i*n:(i+1)*n])
	return &tensor.Image{Pixels: tensor.FromUint8(px, int64(h), int64(w), int64(c))}, nil
}

// Preview returns the cheap preview of a video artifact: its first frame.
func Preview(v *tensor.Video) (*tensor.Image, error) {
	return Frame(v, 0)
}

// PreviewPath returns the conventional path of an artifact's preview: the
// artifact path with its extension replaced by ".preview.png"
// (out/world.gif → out/world.preview.png).
func PreviewPath(artifactPath string) string {
	ext := filepath.Ext(artifactPath)
	return strings.TrimSuffix(artifactPath, ext) + ".preview.png"
}

// WritePreview writes the preview of an artifact as a PNG file at path: the
// first frame of a video, or an image itself. Other artifact kinds have no
// preview.
func WritePreview(path string, artifact any) error {
	switch a := artifact.(type) {
	case *tensor.Video:
		img, err := Preview(a)
		if err != nil {
			return err
		}
		return WritePNG(path, img)
	case tensor.Video:
		return WritePreview(path, &a)
	case *tensor.Image:
		return WritePNG(path, a)
	case tensor.Image:
		return WritePNG(path, &a)
	}
	return fmt.Errorf("preview: %T has no preview; previews exist for video (first frame) and image artifacts", artifact)
}

// GoImage returns a runtime image as a Go image: *image.Gray for one channel,
// *image.NRGBA for three (opaque) or four (RGBA, not premultiplied). The
// pixels are copied.
func GoImage(img *tensor.Image) (image.Image, error) {
	h, w, c, err := imageDims(img)
	if err != nil {
		return nil, err
	}
	return goImage(img.Pixels.Data, h, w, c), nil
}

// goImage converts one H×W×C uint8 frame.
func goImage(px []byte, h, w, c int) image.Image {
	r := image.Rect(0, 0, w, h)
	switch c {
	case 1:
		g := image.NewGray(r)
		copy(g.Pix, px[:h*w])
		return g
	case 4:
		m := image.NewNRGBA(r)
		copy(m.Pix, px[:h*w*4])
		return m
	}
	m := image.NewNRGBA(r)
	for i, j := 0, 0; i < h*w*3; i, j = i+3, j+4 {
		m.Pix[j], m.Pix[j+1], m.Pix[j+2], m.Pix[j+3] = px[i], px[i+1], px[i+2], 0xff
	}
	return m
}

// FromGoImage converts a Go image into a runtime image: *image.Gray (and
// *image.Gray16) become one channel, opaque images three channels (RGB) and
// images with any transparency four channels (RGBA, not premultiplied).
func FromGoImage(m image.Image) (*tensor.Image, error) {
	if m == nil {
		return nil, fmt.Errorf("image: nil image")
	}
	b := m.Bounds()
	h, w := b.Dy(), b.Dx()
	if h < 1 || w < 1 {
		return nil, fmt.Errorf("image: empty image %dx%d", w, h)
	}
	switch m.(type) {
	case *image.Gray, *image.Gray16:
		px := make([]byte, h*w)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				px[y*w+x] = color.GrayModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.Gray).Y
			}
		}
		return &tensor.Image{Pixels: tensor.FromUint8(px, int64(h), int64(w), 1)}, nil
	}
	rgba := make([]byte, h*w*4)
	opaque := true
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBAModel.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			i := 4 * (y*w + x)
			rgba[i], rgba[i+1], rgba[i+2], rgba[i+3] = c.R, c.G, c.B, c.A
			if c.A != 0xff {
				opaque = false
			}
		}
	}
	if !opaque {
		return &tensor.Image{Pixels: tensor.FromUint8(rgba, int64(h), int64(w), 4)}, nil
	}
	rgb := make([]byte, h*w*3)
	for i, j := 0, 0; j < len(rgba); i, j = i+3, j+4 {
		rgb[i], rgb[i+1], rgb[i+2] = rgba[j], rgba[j+1], rgba[j+2]
	}
	return &tensor.Image{Pixels: tensor.FromUint8(rgb, int64(h), int64(w), 3)}, nil
}

// pngEncoder is shared so repeated encodes reuse compression buffers.
var pngEncoder = &png.Encoder{
	CompressionLevel: png.DefaultCompression,
	BufferPool:       &pngPool{free: make(chan *png.EncoderBuffer, 4)},
}

// pngPool is a png.EncoderBufferPool backed by a free list.
type pngPool struct {
	free chan *png.EncoderBuffer
}

// Get returns a pooled buffer, or nil to let the encoder allocate one.
func (p *pngPool) Get() *png.EncoderBuffer {
	select {
	case b := <-p.free:
		return b
	default:
		return nil
	}
}

// Put returns a buffer to the pool, dropping it when the pool is full.
func (p *pngPool) Put(b *png.EncoderBuffer) {
	select {
	case p.free <- b:
	default:
	}
}

// EncodePNG writes an image artifact as PNG: 8-bit gray for one channel,
// 8-bit RGB for three, 8-bit RGBA for four.
func EncodePNG(w io.Writer, img *tensor.Image) error {
	m, err := GoImage(img)
	if err != nil {
		return err
	}
	return pngEncoder.Encode(w, m)
}

// WritePNG writes an image artifact as a PNG file, atomically.
func WritePNG(path string, img *tensor.Image) error {
	m, err := GoImage(img)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, func(w io.Writer) error { return pngEncoder.Encode(w, m) })
}
