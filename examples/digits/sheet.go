package digits

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// glyphs are the digits 0 to 9 in a 3x5 pixel font, one row of three bits
// per entry, the high bit leftmost.
var glyphs = [10][5]uint8{
	{7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},
	{7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 2, 2, 2}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7},
}

// Sheet layout: each picture scaled up sheetZoom times, its predicted digit
// below it in the glyph font scaled glyphZoom times; green when right, red
// when wrong.
const (
	sheetCols = 8
	sheetZoom = 6
	glyphZoom = 4
	sheetPad  = 6
)

var (
	sheetBack = color.NRGBA{32, 32, 40, 255}
	rightInk  = color.NRGBA{80, 220, 100, 255}
	wrongInk  = color.NRGBA{240, 70, 60, 255}
)

// Sheet draws the pictures in rows of eight, each with its predicted digit
// below it (green when it is the true digit, red otherwise), as an RGB image
// artifact that artifactio.WritePNG writes.
func Sheet(pics []image.Image, predicted, truth []int) (*tensor.Image, error) {
	if len(pics) == 0 || len(predicted) != len(pics) || len(truth) != len(pics) {
		return nil, fmt.Errorf("sheet: %d pictures, %d predictions, %d labels", len(pics), len(predicted), len(truth))
	}
	pw, ph := pics[0].Bounds().Dx()*sheetZoom, pics[0].Bounds().Dy()*sheetZoom
	cw, ch := pw+2*sheetPad, ph+3*sheetPad+5*glyphZoom
	rows := (len(pics) + sheetCols - 1) / sheetCols
	sheet := image.NewNRGBA(image.Rect(0, 0, min(len(pics), sheetCols)*cw, rows*ch))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(sheetBack), image.Point{}, draw.Src)
	for i, m := range pics {
		if p := predicted[i]; p < 0 || p > 9 {
			return nil, fmt.Errorf("sheet: prediction %d is %d, not a digit", i, p)
		}
		x0, y0 := (i%sheetCols)*cw+sheetPad, (i/sheetCols)*ch+sheetPad
		b := m.Bounds()
		for y := range ph {
			for x := range pw {
				sheet.Set(x0+x, y0+y, m.At(b.Min.X+x/sheetZoom, b.Min.Y+y/sheetZoom))
			}
		}
		ink := rightInk
		if predicted[i] != truth[i] {
			ink = wrongInk
		}
		gx, gy := x0+(pw-3*glyphZoom)/2, y0+ph+sheetPad
		for r, bits := range glyphs[predicted[i]] {
			for c := range 3 {
				if bits&(4>>c) == 0 {
					continue
				}
				cell := image.Rect(gx+c*glyphZoom, gy+r*glyphZoom, gx+(c+1)*glyphZoom, gy+(r+1)*glyphZoom)
				draw.Draw(sheet, cell, image.NewUniform(ink), image.Point{}, draw.Src)
			}
		}
	}
	return artifactio.FromGoImage(sheet)
}
