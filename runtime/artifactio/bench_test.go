package artifactio

import (
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// benchGIF encodes a 16-frame 64×64 RGB video (rich gradients and texture,
// thousands of colours) to a discarded writer.
func benchGIF(b *testing.B, q Quantizer) {
	v := testVideo(16, 64, 64, 3, 16)
	opts := &GIFOptions{Quantizer: q}
	b.SetBytes(int64(len(v.Frames.Data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := EncodeGIF(io.Discard, v, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeGIF16x64x64Adaptive(b *testing.B) { benchGIF(b, QuantizeAdaptive) }
func BenchmarkEncodeGIF16x64x64Uniform(b *testing.B)  { benchGIF(b, QuantizeUniform) }

// BenchmarkEncodeGIF16x256x256Adaptive is a larger world-model-sized clip.
func BenchmarkEncodeGIF16x256x256Adaptive(b *testing.B) {
	v := testVideo(16, 256, 256, 3, 16)
	b.SetBytes(int64(len(v.Frames.Data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := EncodeGIF(io.Discard, v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteGIF16x64x64(b *testing.B) {
	v := testVideo(16, 64, 64, 3, 16)
	p := filepath.Join(b.TempDir(), "v.gif")
	b.SetBytes(int64(len(v.Frames.Data)))
	for b.Loop() {
		if err := WriteGIF(p, v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWritePNGFrames16x64x64(b *testing.B) {
	v := testVideo(16, 64, 64, 3, 16)
	dir := filepath.Join(b.TempDir(), "frames")
	b.SetBytes(int64(len(v.Frames.Data)))
	for b.Loop() {
		if _, err := WritePNGFrames(dir, v); err != nil {
			b.Fatal(err)
		}
	}
}

// embedding returns a 1000×512 float32 embedding with random values.
func embedding() *tensor.Tensor {
	rng := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 1000*512)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return tensor.FromFloat32(v, 1000, 512)
}

func BenchmarkEncodeNPY1000x512(b *testing.B) {
	t := embedding()
	b.SetBytes(int64(len(t.Data)))
	for b.Loop() {
		if err := EncodeNPY(io.Discard, t); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJSON1000x512(b *testing.B) {
	t := embedding()
	b.SetBytes(int64(len(t.Data)))
	for b.Loop() {
		if err := EncodeJSON(io.Discard, t); err != nil {
			b.Fatal(err)
		}
	}
}
