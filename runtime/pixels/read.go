package pixels

import (
	"image"
	"image/color"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// luma is ITU-R 601-2 luma in the fixed point PIL's convert("L") uses on
// 8-bit values (Go's color.GrayModel rounds 16-bit values and differs).
func luma(r, g, b uint8) uint8 {
	return uint8((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(b) + 1<<15) >> 16)
}

// read returns the picture's 8-bit values in HWC order with the channels of
// order (RGB, BGR, RGBA or L).
func read(m image.Image, order string) []uint8 {
	b := m.Bounds()
	h, w := b.Dy(), b.Dx()
	c := channels(order)
	px := make([]uint8, h*w*c)
	i := 0
	put := func(r, g, bl, a uint8) {
		switch order {
		case spec.ChannelsL:
			px[i] = luma(r, g, bl)
		case spec.ChannelsBGR:
			px[i], px[i+1], px[i+2] = bl, g, r
		case spec.ChannelsRGBA:
			px[i], px[i+1], px[i+2], px[i+3] = r, g, bl, a
		default:
			px[i], px[i+1], px[i+2] = r, g, bl
		}
		i += c
	}
	switch m := m.(type) {
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:w]
			for _, v := range row {
				put(v, v, v, 0xff)
			}
		}
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for j := 0; j < len(row); j += 4 {
				put(row[j], row[j+1], row[j+2], row[j+3])
			}
		}
	case *image.RGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):][:4*w]
			for j := 0; j < len(row); j += 4 {
				if row[j+3] == 0xff {
					put(row[j], row[j+1], row[j+2], 0xff)
					continue
				}
				n := color.NRGBAModel.Convert(color.RGBA{row[j], row[j+1], row[j+2], row[j+3]}).(color.NRGBA)
				put(n.R, n.G, n.B, n.A)
			}
		}
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				n := color.NRGBAModel.Convert(m.At(x, y)).(color.NRGBA)
				put(n.R, n.G, n.B, n.A)
			}
		}
	}
	return px
}

// channels returns the channel count of a channel order.
func channels(order string) int {
	return (&spec.ImageSpec{Channels: order}).ChannelCount()
}
