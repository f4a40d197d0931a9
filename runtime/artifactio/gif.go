package artifactio

import (
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"io"
	"math"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// DefaultGIFFPS is the playback rate a GIF gets when neither the options nor
// the video give one: spec.DefaultVideoFPS, the rate of a video
// artifact whose manifest gives none.
const DefaultGIFFPS = spec.DefaultVideoFPS

// maxGIFSide is the largest width or height a GIF can store.
const maxGIFSide = 65535

// Quantizer selects how a video's colours are reduced to a GIF palette.
type Quantizer int

const (
	// QuantizeAdaptive builds one palette for the whole video: the exact
	// colours when there are at most 256 (255 when some pixels are
	// transparent), otherwise a median-cut palette over all frames. It is
	// the default.
	QuantizeAdaptive Quantizer = iota
	// QuantizeUniform maps every pixel to the nearest colour of a fixed
	// 6×7×6 RGB cube (252 colours): the fastest, with the same palette for
	// every video.
	QuantizeUniform
)

// String returns the quantizer's name.
func (q Quantizer) String() string {
	switch q {
	case QuantizeAdaptive:
		return "adaptive"
	case QuantizeUniform:
		return "uniform"
	}
	return fmt.Sprintf("Quantizer(%d)", int(q))
}

// GIFOptions configure EncodeGIF and WriteGIF. The zero value is ready to use.
type GIFOptions struct {
	// FPS, when > 0, is the playback rate used for frame delays instead of the
	// video's. When both are 0, DefaultGIFFPS is used. GIF delays are in
	// hundredths of a second and players show at most 50 frames a second, so
	// faster videos play at 50 fps.
	FPS float64
	// Quantizer selects the palette (default QuantizeAdaptive).
	Quantizer Quantizer
	// LoopCount follows image/gif: 0 loops forever, -1 plays once, n > 0
	// plays n+1 times.
	LoopCount int
}

// WriteGIF writes a video artifact as an animated GIF file, atomically.
func WriteGIF(path string, v *tensor.Video, opts *GIFOptions) error {
	g, err := buildGIF(v, opts)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, func(w io.Writer) error { return gif.EncodeAll(w, g) })
}

// EncodeGIF writes a video artifact as an animated GIF. Frames [T,H,W,C] with
// C = 1 use a 256-level gray palette (exact); C = 3 and 4 are quantized as
// opts.Quantizer says, and with C = 4 a pixel whose alpha is below 128 is
// transparent. Frame delays follow the fps (see GIFOptions.FPS) with the
// rounding spread so that the total duration stays right. The same video
// and options always give the same bytes.
func EncodeGIF(w io.Writer, v *tensor.Video, opts *GIFOptions) error {
	g, err := buildGIF(v, opts)
	if err != nil {
		return err
	}
	return gif.EncodeAll(w, g)
}

// buildGIF quantizes the video and lays out the GIF frames.
func buildGIF(v *tensor.Video, opts *GIFOptions) (*gif.GIF, error) {
	if opts == nil {
		opts = &GIFOptions{}
	}
	t, h, w, c, err := videoDims(v)
	if err != nil {
		return nil, err
	}
	if h > maxGIFSide || w > maxGIFSide {
		return nil, fmt.Errorf("gif: frames are %d×%d pixels, GIF allows at most %d per side", w, h, maxGIFSide)
	}
	if math.IsNaN(opts.FPS) || math.IsInf(opts.FPS, 0) || opts.FPS < 0 {
		return nil, fmt.Errorf("gif: option fps %v, want a finite number ≥ 0", opts.FPS)
	}
	if opts.LoopCount < -1 || opts.LoopCount > 65535 {
		return nil, fmt.Errorf("gif: loop count %d, want -1 (once), 0 (forever) or up to 65535", opts.LoopCount)
	}
	fps := opts.FPS
	if fps == 0 {
		fps = v.FPS
	}
	if fps == 0 {
		fps = DefaultGIFFPS
	}
	var q quantized
	switch {
	case c == 1:
		q = quantizeGray(v.Frames.Data)
	case opts.Quantizer == QuantizeUniform:
		q = quantizeUniform(v.Frames.Data, c)
	case opts.Quantizer == QuantizeAdaptive:
		q = quantizeAdaptive(v.Frames.Data, c)
	default:
		return nil, fmt.Errorf("gif: unknown quantizer %d (known: adaptive, uniform)", int(opts.Quantizer))
	}
	g := &gif.GIF{
		Image:     make([]*image.Paletted, t),
		Delay:     gifDelays(t, fps),
		LoopCount: opts.LoopCount,
		Config:    image.Config{ColorModel: q.palette, Width: w, Height: h},
	}
	if q.transparent >= 0 {
		g.Disposal = make([]byte, t)
		for i := range g.Disposal {
			g.Disposal[i] = gif.DisposalBackground
		}
		g.BackgroundIndex = byte(q.transparent)
	}
	n := h * w
	for i := range t {
		g.Image[i] = &image.Paletted{
			Pix:     q.index[i*n : (i+1)*n : (i+1)*n],
			Stride:  w,
			Rect:    image.Rect(0, 0, w, h),
			Palette: q.palette,
		}
	}
	return g, nil
}

// gifDelays returns n frame delays in hundredths of a second for fps,
// spreading the rounding so frame k starts at round(k*100/fps); each delay
// is at least 2 (what players honour).
func gifDelays(n int, fps float64) []int {
	d := make([]int, n)
	for k := range d {
		a := math.Round(float64(k) * 100 / fps)
		b := math.Round(float64(k+1) * 100 / fps)
		d[k] = max(int(b-a), 2)
	}
	return d
}

// quantized is a video reduced to palette indices.
type quantized struct {
	palette     color.Palette
	index       []uint8 // one per pixel, frames one after another
	transparent int     // palette index of transparent pixels, or -1
}

// quantizeGray maps one-channel frames onto 256 gray levels.
func quantizeGray(px []byte) quantized {
	p := make(color.Palette, 256)
	for i := range p {
		p[i] = color.Gray{Y: uint8(i)}
	}
	return quantized{palette: p, index: px, transparent: -1}
}

// Levels of the uniform palette's RGB cube.
const (
	uniR, uniG, uniB = 6, 7, 6
)

// uniformPalette is the fixed 6×7×6 cube, index r*42 + g*6 + b.
var uniformPalette = func() color.Palette {
	p := make(color.Palette, 0, uniR*uniG*uniB)
	lv := func(i, n int) uint8 { return uint8((i*255 + (n-1)/2) / (n - 1)) }
	for r := range uniR {
		for g := range uniG {
			for b := range uniB {
				p = append(p, color.RGBA{lv(r, uniR), lv(g, uniG), lv(b, uniB), 0xff})
			}
		}
	}
	return p
}()

// uniformLevel maps a channel value to the nearest of n evenly spaced levels.
func uniformLevel(v uint8, n int) int { return (int(v)*(n-1) + 127) / 255 }

// quantizeUniform maps RGB(A) frames onto the fixed cube.
func quantizeUniform(px []byte, c int) quantized {
	n := len(px) / c
	idx := make([]uint8, n)
	transparent := -1
	for i, j := 0, 0; i < n; i, j = i+1, j+c {
		if c == 4 && px[j+3] < 128 {
			transparent = len(uniformPalette)
			idx[i] = uint8(transparent)
			continue
		}
		idx[i] = uint8(uniformLevel(px[j], uniR)*uniG*uniB + uniformLevel(px[j+1], uniG)*uniB + uniformLevel(px[j+2], uniB))
	}
	p := uniformPalette
	if transparent >= 0 {
		p = append(p[:len(p):len(p)], color.RGBA{})
	}
	return quantized{palette: p, index: idx, transparent: transparent}
}
