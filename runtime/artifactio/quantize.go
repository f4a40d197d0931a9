package artifactio

import (
	"cmp"
	"image/color"
	"math"
	"slices"
)

// quantizeAdaptive builds one palette for RGB(A) frames: the exact colours
// when they fit, otherwise median cut over a 5-bit-per-channel histogram.
func quantizeAdaptive(px []byte, c int) quantized {
	n := len(px) / c
	hasAlpha := false
	if c == 4 {
		for j := 3; j < len(px); j += 4 {
			if px[j] < 128 {
				hasAlpha = true
				break
			}
		}
	}
	limit := 256
	if hasAlpha {
		limit = 255
	}
	var q quantized
	if exact, ok := exactPalette(px, c, limit); ok {
		q = mapExact(px, c, exact)
	} else {
		q = medianCut(px, c, limit)
	}
	q.transparent = -1
	if hasAlpha {
		q.transparent = len(q.palette)
		q.palette = append(q.palette, color.RGBA{})
		for i, j := 0, 3; i < n; i, j = i+1, j+4 {
			if px[j] < 128 {
				q.index[i] = uint8(q.transparent)
			}
		}
	}
	return q
}

// opaqueAt reports whether pixel j (byte offset) counts as a colour.
func opaqueAt(px []byte, j, c int) bool { return c != 4 || px[j+3] >= 128 }

// rgbKey packs a pixel's RGB into one number.
func rgbKey(px []byte, j int) uint32 {
	return uint32(px[j])<<16 | uint32(px[j+1])<<8 | uint32(px[j+2])
}

// exactPalette returns the sorted distinct opaque colours when there are at
// most limit of them.
func exactPalette(px []byte, c, limit int) ([]uint32, bool) {
	seen := make(map[uint32]struct{}, limit+1)
	last, haveLast := uint32(0), false
	for j := 0; j < len(px); j += c {
		if !opaqueAt(px, j, c) {
			continue
		}
		k := rgbKey(px, j)
		if haveLast && k == last {
			continue
		}
		last, haveLast = k, true
		if _, ok := seen[k]; ok {
			continue
		}
		if len(seen) == limit {
			return nil, false
		}
		seen[k] = struct{}{}
	}
	keys := make([]uint32, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 { // every pixel transparent: a palette needs one colour
		keys = append(keys, 0)
	}
	return keys, true
}

// mapExact indexes every opaque pixel into the exact palette.
func mapExact(px []byte, c int, keys []uint32) quantized {
	p := make(color.Palette, len(keys))
	pos := make(map[uint32]uint8, len(keys))
	for i, k := range keys {
		p[i] = color.RGBA{uint8(k >> 16), uint8(k >> 8), uint8(k), 0xff}
		pos[k] = uint8(i)
	}
	idx := make([]uint8, len(px)/c)
	last, lastIdx, haveLast := uint32(0), uint8(0), false
	for i, j := 0, 0; j < len(px); i, j = i+1, j+c {
		if !opaqueAt(px, j, c) {
			continue
		}
		k := rgbKey(px, j)
		if !haveLast || k != last {
			last, lastIdx, haveLast = k, pos[k], true
		}
		idx[i] = lastIdx
	}
	return quantized{palette: p, index: idx}
}

// bin5 is the 15-bit histogram bin of a pixel (5 bits per channel).
func bin5(px []byte, j int) int {
	return int(px[j]>>3)<<10 | int(px[j+1]>>3)<<5 | int(px[j+2]>>3)
}

// mcBox is one box of the median cut: a set of occupied histogram bins.
type mcBox struct {
	bins  []uint16
	count uint64
	lo    [3]uint8 // per-axis smallest bin coordinate
	hi    [3]uint8 // per-axis largest bin coordinate
}

// binAxis returns coordinate a (0 r, 1 g, 2 b) of a bin.
func binAxis(b uint16, a int) uint8 { return uint8(b>>(10-5*a)) & 31 }

func (bx *mcBox) measure(count []uint64) {
	bx.count = 0
	bx.lo = [3]uint8{31, 31, 31}
	bx.hi = [3]uint8{}
	for _, b := range bx.bins {
		bx.count += count[b]
		for a := range 3 {
			v := binAxis(b, a)
			bx.lo[a] = min(bx.lo[a], v)
			bx.hi[a] = max(bx.hi[a], v)
		}
	}
}

// longest returns the axis with the largest extent, preferring green, then
// red, then blue on ties (the eye is most sensitive to green).
func (bx *mcBox) longest() (axis int, extent int) {
	axis, extent = 1, int(bx.hi[1]-bx.lo[1])
	for _, a := range []int{0, 2} {
		if e := int(bx.hi[a] - bx.lo[a]); e > extent {
			axis, extent = a, e
		}
	}
	return axis, extent
}

// medianCut builds a palette of at most limit colours by median cut over a
// 5-bit histogram of the opaque pixels, then maps each bin to its nearest
// palette colour. Everything is ordered so the result is deterministic.
func medianCut(px []byte, c, limit int) quantized {
	const nbins = 1 << 15
	count := make([]uint64, nbins)
	sum := make([][3]uint64, nbins)
	for j := 0; j < len(px); j += c {
		if !opaqueAt(px, j, c) {
			continue
		}
		b := bin5(px, j)
		count[b]++
		sum[b][0] += uint64(px[j])
		sum[b][1] += uint64(px[j+1])
		sum[b][2] += uint64(px[j+2])
	}
	root := &mcBox{}
	for b := range nbins {
		if count[b] > 0 {
			root.bins = append(root.bins, uint16(b))
		}
	}
	root.measure(count)
	boxes := []*mcBox{root}
	for len(boxes) < limit {
		best, bestScore := -1, uint64(0)
		for i, bx := range boxes {
			if len(bx.bins) < 2 {
				continue
			}
			_, ext := bx.longest()
			if s := bx.count * uint64(ext+1); s > bestScore {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			break
		}
		bx := boxes[best]
		axis, _ := bx.longest()
		left, right := splitBox(bx, axis, count)
		left.measure(count)
		right.measure(count)
		boxes[best] = left
		boxes = append(boxes, right)
	}
	p := make(color.Palette, len(boxes))
	pal := make([][3]int32, len(boxes))
	for i, bx := range boxes {
		var s [3]uint64
		for _, b := range bx.bins {
			for a := range 3 {
				s[a] += sum[b][a]
			}
		}
		for a := range 3 {
			pal[i][a] = int32((s[a] + bx.count/2) / max(bx.count, 1))
		}
		p[i] = color.RGBA{uint8(pal[i][0]), uint8(pal[i][1]), uint8(pal[i][2]), 0xff}
	}
	// Map each occupied bin (by its mean colour) to the nearest entry.
	// The bin's own box colour is a close first guess that prunes the search.
	near := newNearest(pal)
	lut := make([]uint8, nbins)
	for i, bx := range boxes {
		for _, b := range bx.bins {
			var m [3]int32
			for a := range 3 {
				m[a] = int32((sum[b][a] + count[b]/2) / count[b])
			}
			lut[b] = near.find(m, i)
		}
	}
	idx := make([]uint8, len(px)/c)
	for i, j := 0, 0; j < len(px); i, j = i+1, j+c {
		if opaqueAt(px, j, c) {
			idx[i] = lut[bin5(px, j)]
		}
	}
	if len(p) == 0 { // no opaque pixel at all
		p = append(p, color.RGBA{0, 0, 0, 0xff})
	}
	return quantized{palette: p, index: idx}
}

// splitBox splits a box between two values of axis so that the lower part
// holds about half the pixels. The box spans at least two values on axis.
// Bins keep their relative order (a stable counting sort), so the result
// is deterministic.
func splitBox(bx *mcBox, axis int, count []uint64) (left, right *mcBox) {
	var per [32]uint64
	for _, b := range bx.bins {
		per[binAxis(b, axis)] += count[b]
	}
	lo, hi := bx.lo[axis], bx.hi[axis]
	cut, acc := lo, uint64(0)
	for v := lo; v < hi; v++ { // the cut value v keeps v in the left box
		acc += per[v]
		cut = v
		if 2*acc >= bx.count {
			break
		}
	}
	l := make([]uint16, 0, len(bx.bins))
	r := make([]uint16, 0, len(bx.bins))
	for _, b := range bx.bins {
		if binAxis(b, axis) <= cut {
			l = append(l, b)
		} else {
			r = append(r, b)
		}
	}
	return &mcBox{bins: l}, &mcBox{bins: r}
}

// nearest finds the palette entry closest to a colour (squared Euclidean
// distance, the lowest index on ties), searching outwards from the colour's
// green value in a green-sorted copy of the palette.
type nearest struct {
	pal   [][3]int32
	order []int // palette indexes sorted by green, then index
}

func newNearest(pal [][3]int32) *nearest {
	order := make([]int, len(pal))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		if d := cmp.Compare(pal[x][1], pal[y][1]); d != 0 {
			return d
		}
		return cmp.Compare(x, y)
	})
	return &nearest{pal: pal, order: order}
}

// find returns the nearest entry to m; guess is a palette index to start from.
func (n *nearest) find(m [3]int32, guess int) uint8 {
	start, _ := slices.BinarySearchFunc(n.order, m[1], func(i int, g int32) int { return cmp.Compare(n.pal[i][1], g) })
	best, bestD := len(n.pal), int32(math.MaxInt32)
	consider := func(i int) {
		e := n.pal[i]
		dr, dg, db := m[0]-e[0], m[1]-e[1], m[2]-e[2]
		if d := dr*dr + dg*dg + db*db; d < bestD || (d == bestD && i < best) {
			best, bestD = i, d
		}
	}
	consider(guess)
	for lo, hi := start-1, start; lo >= 0 || hi < len(n.order); {
		if hi < len(n.order) {
			i := n.order[hi]
			if dg := n.pal[i][1] - m[1]; dg*dg > bestD {
				hi = len(n.order)
			} else {
				consider(i)
				hi++
			}
		}
		if lo >= 0 {
			i := n.order[lo]
			if dg := m[1] - n.pal[i][1]; dg*dg > bestD {
				lo = -1
			} else {
				consider(i)
				lo--
			}
		}
	}
	return uint8(best)
}
