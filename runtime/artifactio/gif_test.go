package artifactio

import (
	"bytes"
	"encoding/json"
	"image/color"
	"image/gif"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// decodeGIF decodes GIF bytes, failing the test on error.
func decodeGIF(t *testing.T, b []byte) *gif.GIF {
	t.Helper()
	g, err := gif.DecodeAll(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decoding the GIF: %v", err)
	}
	return g
}

// fewColorVideo has 40 distinct colours: a palette that fits exactly.
func fewColorVideo(c int) *tensor.Video {
	const T, H, W = 4, 6, 10
	px := make([]byte, T*H*W*c)
	for i := range T * H * W {
		k := (i*7 + i/13) % 40
		px[i*c] = byte(k * 6)
		if c >= 3 {
			px[i*c+1] = byte(255 - k*5)
			px[i*c+2] = byte((k * 37) % 256)
		}
		if c == 4 {
			px[i*c+3] = 255
			if i%5 == 0 {
				px[i*c+3] = byte(i % 100) // transparent (< 128)
			}
		}
	}
	return &tensor.Video{Frames: tensor.FromUint8(px, T, H, W, int64(c)), FPS: 8}
}

func TestGIFExactColoursRoundTrip(t *testing.T) {
	for _, c := range []int{1, 3, 4} {
		v := fewColorVideo(c)
		var buf bytes.Buffer
		if err := EncodeGIF(&buf, v, nil); err != nil {
			t.Fatal(err)
		}
		g := decodeGIF(t, buf.Bytes())
		T, H, W := 4, 6, 10
		if len(g.Image) != T || g.Config.Width != W || g.Config.Height != H {
			t.Fatalf("C=%d: %d frames of %d×%d, want %d of %d×%d", c, len(g.Image), g.Config.Width, g.Config.Height, T, W, H)
		}
		for f, m := range g.Image {
			for y := range H {
				for x := range W {
					i := ((f*H+y)*W + x) * c
					r, gg, b, a := m.At(x, y).RGBA()
					got := [4]uint8{uint8(r >> 8), uint8(gg >> 8), uint8(b >> 8), uint8(a >> 8)}
					var want [4]uint8
					switch c {
					case 1:
						p := v.Frames.Data[i]
						want = [4]uint8{p, p, p, 255}
					case 3:
						want = [4]uint8{v.Frames.Data[i], v.Frames.Data[i+1], v.Frames.Data[i+2], 255}
					case 4:
						want = [4]uint8{v.Frames.Data[i], v.Frames.Data[i+1], v.Frames.Data[i+2], 255}
						if v.Frames.Data[i+3] < 128 {
							want = [4]uint8{}
						}
					}
					if got != want {
						t.Fatalf("C=%d frame %d (%d,%d): got %v, want %v", c, f, x, y, got, want)
					}
				}
			}
		}
		if c == 4 {
			for i, d := range g.Disposal {
				if d != gif.DisposalBackground {
					t.Fatalf("frame %d disposal %d, want DisposalBackground with transparency", i, d)
				}
			}
		}
	}
}

// meanAbsError compares decoded GIF frames with an RGB video.
func meanAbsError(t *testing.T, g *gif.GIF, v *tensor.Video) (mean float64, worst int) {
	t.Helper()
	s := v.Frames.Shape
	T, H, W, C := int(s[0]), int(s[1]), int(s[2]), int(s[3])
	var sum, n int
	for f := range T {
		for y := range H {
			for x := range W {
				i := ((f*H+y)*W + x) * C
				r, gg, b, _ := g.Image[f].At(x, y).RGBA()
				for k, got := range []uint32{r >> 8, gg >> 8, b >> 8} {
					d := int(got) - int(v.Frames.Data[i+k])
					d = max(d, -d)
					sum += d
					worst = max(worst, d)
					n++
				}
			}
		}
	}
	return float64(sum) / float64(n), worst
}

func TestGIFQuantizersApproximateManyColours(t *testing.T) {
	// testVideo fills most of the RGB cube (about 12000 colours); 256 evenly
	// spread colours leave a mean error near 9 per channel.
	v := testVideo(6, 48, 64, 3, 16)
	errs := map[Quantizer]float64{}
	for _, c := range []struct {
		q        Quantizer
		maxMean  float64
		maxWorst int
	}{
		{QuantizeAdaptive, 10, 48},
		{QuantizeUniform, 14, 26}, // half a cube step: 255/5/2 and 255/6/2, plus rounding
	} {
		var buf bytes.Buffer
		if err := EncodeGIF(&buf, v, &GIFOptions{Quantizer: c.q}); err != nil {
			t.Fatal(err)
		}
		g := decodeGIF(t, buf.Bytes())
		if len(g.Image) != 6 {
			t.Fatalf("%s: %d frames, want 6", c.q, len(g.Image))
		}
		mean, worst := meanAbsError(t, g, v)
		errs[c.q] = mean
		t.Logf("%s: %d bytes, mean abs error %.2f, worst %d", c.q, buf.Len(), mean, worst)
		if mean > c.maxMean || worst > c.maxWorst {
			t.Errorf("%s: mean abs error %.2f (max %.0f), worst %d (max %d)", c.q, mean, c.maxMean, worst, c.maxWorst)
		}
		if n := len(g.Image[0].Palette); n > 256 {
			t.Errorf("%s: palette of %d colours", c.q, n)
		}
	}
	if errs[QuantizeAdaptive] >= errs[QuantizeUniform] {
		t.Errorf("the adaptive palette (mean error %.2f) is no better than the fixed cube (%.2f)", errs[QuantizeAdaptive], errs[QuantizeUniform])
	}
}

// A smooth video: per frame a 50×40 grid of red-green gradient colours (2000
// colours, 8000 in all). 64 palette colours per frame cover cells of about
// 28 red × 34 green levels, so the mean error over the three channels can
// hardly go below 5; a broken split would be far worse.
func TestGIFAdaptiveOnSmoothVideo(t *testing.T) {
	const T, H, W = 4, 40, 50
	px := make([]byte, 0, T*H*W*3)
	for f := range T {
		for y := range H {
			for x := range W {
				r, g, b := byte(x*5), byte(y*6), byte(100+f*10)
				if x >= 10+f*5 && x < 20+f*5 && y >= 10 && y < 20 {
					r, g, b = 220, 30, 40
				}
				px = append(px, r, g, b)
			}
		}
	}
	v := &tensor.Video{Frames: tensor.FromUint8(px, T, H, W, 3), FPS: 10}
	var buf bytes.Buffer
	if err := EncodeGIF(&buf, v, nil); err != nil {
		t.Fatal(err)
	}
	mean, worst := meanAbsError(t, decodeGIF(t, buf.Bytes()), v)
	t.Logf("smooth video: mean abs error %.2f, worst %d", mean, worst)
	if mean > 6 || worst > 24 {
		t.Errorf("mean abs error %.2f (max 6), worst %d (max 24)", mean, worst)
	}
}

func TestGIFDeterministic(t *testing.T) {
	for _, v := range []*tensor.Video{testVideo(5, 32, 40, 3, 10), fewColorVideo(3), fewColorVideo(4)} {
		for _, q := range []Quantizer{QuantizeAdaptive, QuantizeUniform} {
			var a, b bytes.Buffer
			if err := EncodeGIF(&a, v, &GIFOptions{Quantizer: q}); err != nil {
				t.Fatal(err)
			}
			if err := EncodeGIF(&b, v, &GIFOptions{Quantizer: q}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("%s: two encodes of the same video differ", q)
			}
		}
	}
}

func TestGIFDelays(t *testing.T) {
	cases := []struct {
		frames   int
		videoFPS float64
		optFPS   float64
		want     []int // nil: check total only
		total    int
	}{
		{4, 25, 0, []int{4, 4, 4, 4}, 16},
		{16, 16, 0, nil, 100},                 // 6.25 cs a frame: 6s and 7s summing to 1 s
		{3, 0, 0, []int{6, 7, 6}, 19},         // no fps anywhere: DefaultGIFFPS = 16
		{3, 25, 10, []int{10, 10, 10}, 30},    // the option wins
		{5, 100, 0, []int{2, 2, 2, 2, 2}, 10}, // capped at 50 fps
	}
	for _, c := range cases {
		v := testVideo(c.frames, 4, 4, 3, c.videoFPS)
		var buf bytes.Buffer
		if err := EncodeGIF(&buf, v, &GIFOptions{FPS: c.optFPS}); err != nil {
			t.Fatal(err)
		}
		g := decodeGIF(t, buf.Bytes())
		total := 0
		for i, d := range g.Delay {
			total += d
			if c.want != nil && d != c.want[i] {
				t.Errorf("%d frames at %v/%v fps: delays %v, want %v", c.frames, c.videoFPS, c.optFPS, g.Delay, c.want)
				break
			}
			if c.want == nil && d != 6 && d != 7 {
				t.Errorf("16 fps: delay %d, want 6 or 7", d)
			}
		}
		if total != c.total {
			t.Errorf("%d frames at %v/%v fps: total delay %d, want %d", c.frames, c.videoFPS, c.optFPS, total, c.total)
		}
	}
}

func TestGIFLoopCount(t *testing.T) {
	v := testVideo(2, 4, 4, 3, 10)
	for _, n := range []int{0, 3} {
		var buf bytes.Buffer
		if err := EncodeGIF(&buf, v, &GIFOptions{LoopCount: n}); err != nil {
			t.Fatal(err)
		}
		if g := decodeGIF(t, buf.Bytes()); g.LoopCount != n {
			t.Errorf("loop count %d, want %d", g.LoopCount, n)
		}
	}
}

func TestGIFErrorsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.gif")
	bad := []struct {
		name string
		v    *tensor.Video
		opts *GIFOptions
		want string
	}{
		{"nil", nil, nil, "nil video"},
		{"float frames", &tensor.Video{Frames: tensor.FromFloat32(make([]float32, 12), 1, 2, 2, 3)}, nil, "uint8"},
		{"two channels", &tensor.Video{Frames: tensor.FromUint8(make([]byte, 8), 1, 2, 2, 2)}, nil, "C in {1,3,4}"},
		{"no frames", &tensor.Video{Frames: tensor.FromUint8(nil, 0, 2, 2, 3)}, nil, "at least one frame"},
		{"short data", &tensor.Video{Frames: tensor.FromUint8(make([]byte, 5), 1, 2, 2, 3)}, nil, "needs 12 bytes"},
		{"negative fps", testVideo(1, 2, 2, 3, -1), nil, "fps"},
		{"bad quantizer", testVideo(1, 2, 2, 3, 1), &GIFOptions{Quantizer: 9}, "unknown quantizer"},
		{"bad loop", testVideo(1, 2, 2, 3, 1), &GIFOptions{LoopCount: -2}, "loop count"},
		{"too wide", &tensor.Video{Frames: tensor.FromUint8(make([]byte, 70000), 1, 1, 70000, 1)}, nil, "at most 65535"},
	}
	for _, c := range bad {
		err := WriteGIF(p, c.v, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		assertOnly(t, dir)
	}
	// A good write, then a failing one, keeps the good file.
	if err := WriteGIF(p, testVideo(2, 4, 4, 3, 10), nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(p)
	if err := WriteGIF(p, nil, nil); err == nil {
		t.Fatal("nil video written")
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Error("a failed write changed the existing file")
	}
	assertOnly(t, dir, "out.gif")
	decodeGIF(t, after)
}

func TestGIFPaletteSharedAsGlobalTable(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodeGIF(&buf, testVideo(8, 16, 16, 3, 10), nil); err != nil {
		t.Fatal(err)
	}
	g := decodeGIF(t, buf.Bytes())
	global, ok := g.Config.ColorModel.(color.Palette)
	if !ok || len(global) == 0 {
		t.Fatal("no global colour table")
	}
	for i, m := range g.Image {
		if len(m.Palette) != len(global) {
			t.Fatalf("frame %d has its own palette of %d colours (global %d)", i, len(m.Palette), len(global))
		}
	}
}

// A video artifact's declared fps reaches the GIF's frame delays: the
// artifact's own fps, else the family's realtime fps, else the default.
func TestManifestFPSReachesGIF(t *testing.T) {
	const manifest = `{
	  "model_family_id": "clips", "variants": [{"variant_id": "default"}],
	  "tasks": [{"task_id": "generate", "outputs": [
	    {"artifact_id": "video", "kind": "video", "fps": 5},
	    {"artifact_id": "plain", "kind": "video"}]}]}`
	var spec wfspec.ModelInferenceSpec
	if err := json.Unmarshal([]byte(manifest), &spec); err != nil {
		t.Fatal(err)
	}
	task, err := spec.Task("generate")
	if err != nil {
		t.Fatal(err)
	}
	frames := testVideo(4, 4, 4, 3, 0).Frames
	delays := func(a *wfspec.InferenceArtifactSpec) []int {
		v, err := tensor.AsVideo(frames, float64(spec.VideoFPS(a)))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "clip.gif")
		if err := Write(path, v); err != nil {
			t.Fatal(err)
		}
		return decodeGIF(t, mustRead(t, path)).Delay
	}
	for _, tc := range []struct {
		artifact string
		realtime *wfspec.RealtimeSpec
		want     []int
	}{
		{"video", nil, []int{20, 20, 20, 20}},                           // fps 5
		{"video", &wfspec.RealtimeSpec{FPS: 25}, []int{20, 20, 20, 20}}, // the artifact's fps wins
		{"plain", &wfspec.RealtimeSpec{FPS: 25}, []int{4, 4, 4, 4}},     // the family's realtime fps
		{"plain", nil, []int{6, 7, 6, 6}},                               // DefaultVideoFPS, 16
	} {
		spec.Realtime = tc.realtime
		a, _ := task.Artifact(tc.artifact)
		if got := delays(a); !slices.Equal(got, tc.want) {
			t.Errorf("%s with realtime %+v: delays %v, want %v", tc.artifact, tc.realtime, got, tc.want)
		}
	}
}
