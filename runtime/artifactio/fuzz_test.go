package artifactio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeNPY: any input either fails with an error or decodes to a valid
// tensor that encodes and decodes again to the same tensor.
func FuzzDecodeNPY(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "npy", "*.npy"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tt, err := DecodeNPY(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := tt.Check(); err != nil {
			t.Fatalf("decoded an invalid tensor: %v", err)
		}
		var buf bytes.Buffer
		if err := EncodeNPY(&buf, tt); err != nil {
			t.Fatalf("re-encoding a decoded tensor: %v", err)
		}
		back, err := DecodeNPY(&buf)
		if err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		assertTensorEqual(t, "round trip", back, tt)
	})
}

// FuzzEncodeGIF: any pixels and sizes either fail with an error or give a GIF
// that image/gif decodes with the right frame count and size.
func FuzzEncodeGIF(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, uint8(1), uint8(1), uint8(2), uint8(3), uint8(0))
	f.Add(bytes.Repeat([]byte{200, 10, 30, 90}, 64), uint8(2), uint8(4), uint8(8), uint8(4), uint8(1))
	f.Fuzz(func(t *testing.T, px []byte, frames, h, w, c, q uint8) {
		T, H, W, C := int(frames%4), int(h%16), int(w%16), int(c%5)
		n := T * H * W * C
		if len(px) < n {
			return
		}
		v := testVideoFrom(px[:n], T, H, W, C)
		var buf bytes.Buffer
		if err := EncodeGIF(&buf, v, &GIFOptions{Quantizer: Quantizer(q % 3)}); err != nil {
			return
		}
		g := decodeGIF(t, buf.Bytes())
		if len(g.Image) != T || g.Config.Width != W || g.Config.Height != H {
			t.Fatalf("decoded %d frames of %d×%d, want %d of %d×%d", len(g.Image), g.Config.Width, g.Config.Height, T, W, H)
		}
	})
}
