package artifactio

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func TestFloat16KnownValues(t *testing.T) {
	cases := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0x0400, float32(math.Ldexp(1, -14))}, // smallest normal
		{0x0001, float32(math.Ldexp(1, -24))}, // smallest subnormal
		{0x03ff, float32(math.Ldexp(1023, -24))},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := Float16ToFloat32(c.h); got != c.f {
			t.Errorf("Float16ToFloat32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := Float32ToFloat16(c.f); got != c.h {
			t.Errorf("Float32ToFloat16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if got := Float32ToFloat16(float32(math.Copysign(0, -1))); got != 0x8000 {
		t.Errorf("-0 → %#04x, want 0x8000", got)
	}
}

// Every float16 converts to float32 and back unchanged; NaNs stay NaNs.
func TestFloat16RoundTripExhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := Float16ToFloat32(h)
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		if isNaN {
			if f == f {
				t.Fatalf("%#04x is a NaN, converted to %v", h, f)
			}
			if back := Float32ToFloat16(f); back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as non-NaN %#04x", h, back)
			}
			continue
		}
		if back := Float32ToFloat16(f); back != h {
			t.Fatalf("%#04x → %v → %#04x", h, f, back)
		}
	}
}

// For every pair of neighbouring finite float16 values, the float32 midpoint
// rounds to the even one and anything off the midpoint to the nearer one.
func TestFloat16RoundsToNearestEven(t *testing.T) {
	for i := range 0x7bff { // positive finite values below the largest
		lo, hi := uint16(i), uint16(i+1)
		a, b := float64(Float16ToFloat32(lo)), float64(Float16ToFloat32(hi))
		mid := float32((a + b) / 2) // exact: float16 has 11 significant bits
		even := lo
		if lo&1 == 1 {
			even = hi
		}
		for _, sign := range []float32{1, -1} {
			s := uint16(0)
			if sign < 0 {
				s = 0x8000
			}
			if got := Float32ToFloat16(sign * mid); got != s|even {
				t.Fatalf("midpoint %v of %#04x and %#04x → %#04x, want %#04x", sign*mid, lo, hi, got, s|even)
			}
			below := math.Nextafter32(mid, 0)
			above := math.Nextafter32(mid, float32(math.Inf(1)))
			if got := Float32ToFloat16(sign * below); got != s|lo {
				t.Fatalf("%v (just below a midpoint) → %#04x, want %#04x", sign*below, got, s|lo)
			}
			if got := Float32ToFloat16(sign * above); got != s|hi {
				t.Fatalf("%v (just above a midpoint) → %#04x, want %#04x", sign*above, got, s|hi)
			}
		}
	}
	// Around the ends of the range.
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{65519, 0x7bff},                  // below the midpoint to 65536
		{65520, 0x7c00},                  // the midpoint: ties to even = infinity
		{1e10, 0x7c00},                   // overflow
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: ties to 0
		{math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 1}, // just above it
		{float32(math.Ldexp(1, -30)), 0},                      // underflow
		{float32(math.Ldexp(3, -25)), 2},                      // 1.5 × smallest: ties to even (2)
	} {
		if got := Float32ToFloat16(c.f); got != c.h {
			t.Errorf("Float32ToFloat16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

func TestBFloat16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BFloat16ToFloat32(h)
		if f != f {
			if Float32ToBFloat16(f) != 0x7fc0 {
				t.Fatalf("NaN %#04x did not become 0x7fc0", h)
			}
			continue
		}
		if back := Float32ToBFloat16(f); back != h {
			t.Fatalf("%#04x → %v → %#04x", h, f, back)
		}
	}
	// Ties to even: 1 + 2^-8 lies halfway between 1 (0x3f80) and 1+2^-7 (0x3f81).
	if got := Float32ToBFloat16(1 + 1.0/256); got != 0x3f80 {
		t.Errorf("1+2^-8 → %#04x, want 0x3f80", got)
	}
	if got := Float32ToBFloat16(1 + 3.0/256); got != 0x3f82 {
		t.Errorf("1+3·2^-8 → %#04x, want 0x3f82", got)
	}
	if got := Float32ToBFloat16(math.Nextafter32(1+1.0/256, 2)); got != 0x3f81 {
		t.Errorf("just above 1+2^-8 → %#04x, want 0x3f81", got)
	}
	if got := Float32ToBFloat16(float32(math.Inf(-1))); got != 0xff80 {
		t.Errorf("-inf → %#04x, want 0xff80", got)
	}
}

func TestFloatValues(t *testing.T) {
	want := []float32{0.5, -1.25, 3, 1024}
	for _, tt := range []*tensor.Tensor{
		tensor.FromFloat32(want, 2, 2),
		FromFloat16(want, 2, 2),
		FromBFloat16(want, 2, 2),
	} {
		got, err := FloatValues(tt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: element %d = %v, want %v", tt.DType, i, got[i], want[i])
			}
		}
	}
	if _, err := FloatValues(tensor.FromInt64([]int64{1}, 1)); err == nil {
		t.Error("FloatValues of an int64 tensor succeeded")
	}
	if _, err := FloatValues(&tensor.Tensor{DType: tensor.Float16, Shape: []int64{3}, Data: make([]byte, 4)}); err == nil {
		t.Error("FloatValues of a tensor with too few bytes succeeded")
	}
}

// NumPy's float32 → float16 conversion agrees with Float32ToFloat16 on
// random values across the whole range, including subnormals and overflow.
func TestFloat16MatchesNumPy(t *testing.T) {
	requireNumPy(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	vals := make([]float32, n)
	for i := range vals {
		switch i % 3 {
		case 0: // any bit pattern
			vals[i] = math.Float32frombits(rng.Uint32())
		case 1: // the float16 range, uniform in exponent
			vals[i] = float32(math.Ldexp(rng.Float64()+1, rng.IntN(46)-30)) * float32(1-2*rng.IntN(2))
		default: // exact midpoints and their neighbours
			h := uint16(rng.IntN(0x7bff))
			mid := (Float16ToFloat32(h) + Float16ToFloat32(h+1)) / 2
			vals[i] = math.Nextafter32(mid, float32(rng.IntN(3)-1)*float32(math.Inf(1)))
		}
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.npy"), filepath.Join(dir, "out.npy")
	if err := WriteNPY(in, tensor.FromFloat32(vals, n)); err != nil {
		t.Fatal(err)
	}
	runPython(t, `import sys, numpy as np
a = np.load(sys.argv[1])
with np.errstate(all="ignore"):
    np.save(sys.argv[2], a.astype(np.float16))`, in, out)
	got, err := ReadNPY(out)
	if err != nil {
		t.Fatal(err)
	}
	if got.DType != tensor.Float16 {
		t.Fatalf("numpy wrote %s, want float16", got.DType)
	}
	for i, v := range vals {
		np := binary.LittleEndian.Uint16(got.Data[2*i:])
		ours := Float32ToFloat16(v)
		if v != v { // both must be NaN; payload handling may differ
			if np&0x7c00 != 0x7c00 || np&0x3ff == 0 || ours&0x7c00 != 0x7c00 || ours&0x3ff == 0 {
				t.Fatalf("NaN %#08x: numpy %#04x, ours %#04x", math.Float32bits(v), np, ours)
			}
			continue
		}
		if np != ours {
			t.Fatalf("float16(%v = %#08x): numpy %#04x, ours %#04x", v, math.Float32bits(v), np, ours)
		}
	}
	_ = os.Remove(in)
}
