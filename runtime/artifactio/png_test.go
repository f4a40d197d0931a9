package artifactio

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// readPNG decodes a PNG file, failing the test on error.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// assertImageEqual compares a decoded image with H×W×C pixels exactly.
func assertImageEqual(t *testing.T, name string, m image.Image, px []byte, h, w, c int) {
	t.Helper()
	if b := m.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("%s: %v, want %d×%d", name, b, w, h)
	}
	for y := range h {
		for x := range w {
			i := (y*w + x) * c
			r, g, b, a := m.At(x, y).RGBA()
			var want [4]uint32
			switch c {
			case 1:
				want = [4]uint32{uint32(px[i]), uint32(px[i]), uint32(px[i]), 255}
			case 3:
				want = [4]uint32{uint32(px[i]), uint32(px[i+1]), uint32(px[i+2]), 255}
			case 4:
				// RGBA() is premultiplied; compare in that form.
				al := uint32(px[i+3])
				pm := func(v byte) uint32 { return (uint32(v)*0x101*al*0x101/0xffff + 0) >> 8 }
				want = [4]uint32{pm(px[i]), pm(px[i+1]), pm(px[i+2]), al}
			}
			got := [4]uint32{r >> 8, g >> 8, b >> 8, a >> 8}
			if got != want {
				t.Fatalf("%s (%d,%d): got %v, want %v", name, x, y, got, want)
			}
		}
	}
}

func TestWritePNGRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []int{1, 3, 4} {
		v := testVideo(1, 13, 17, c, 0)
		img := &tensor.Image{Pixels: tensor.FromUint8(v.Frames.Data, 13, 17, int64(c))}
		p := filepath.Join(dir, "img.png")
		if err := WritePNG(p, img); err != nil {
			t.Fatal(err)
		}
		m := readPNG(t, p)
		assertImageEqual(t, "png", m, img.Pixels.Data, 13, 17, c)
		// The colour type follows the channels: gray, RGB, or RGBA.
		raw, _ := os.ReadFile(p)
		if want := map[int]byte{1: 0, 3: 2, 4: 6}[c]; raw[25] != want {
			t.Errorf("C=%d: PNG colour type %d, want %d", c, raw[25], want)
		}
		back, err := FromGoImage(m)
		if err != nil {
			t.Fatal(err)
		}
		if wantC := int64(c); back.Pixels.Shape[2] != wantC || !bytes.Equal(back.Pixels.Data, img.Pixels.Data) {
			t.Errorf("C=%d: FromGoImage gave %v, want the original pixels", c, back.Pixels.Shape)
		}
	}
	assertOnly(t, dir, "img.png")
}

func TestPreviewIsFirstFrame(t *testing.T) {
	v := testVideo(3, 8, 9, 3, 10)
	img, err := Preview(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Pixels.Data, v.Frames.Data[:8*9*3]) {
		t.Error("preview is not the first frame")
	}
	img.Pixels.Data[0] ^= 0xff
	if img.Pixels.Data[0] == v.Frames.Data[0] {
		t.Error("the preview shares memory with the video")
	}
	dir := t.TempDir()
	out := PreviewPath(filepath.Join(dir, "world.gif"))
	if base(out) != "world.preview.png" {
		t.Errorf("PreviewPath = %s, want world.preview.png", out)
	}
	if err := WritePreview(out, v); err != nil {
		t.Fatal(err)
	}
	assertImageEqual(t, "preview", readPNG(t, out), v.Frames.Data, 8, 9, 3)
	if err := WritePreview(filepath.Join(dir, "e.png"), &tensor.Embedding{Vector: tensor.FromFloat32([]float32{1}, 1)}); err == nil || !strings.Contains(err.Error(), "no preview") {
		t.Errorf("preview of an embedding: %v, want a 'no preview' error", err)
	}
	if _, err := Frame(v, 3); err == nil {
		t.Error("Frame(3) of a 3-frame video succeeded")
	}
}

func TestWritePNGFrames(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "frames")
	v := testVideo(4, 6, 7, 3, 10)
	paths, err := WritePNGFrames(dir, v)
	if err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir, "frame_00000.png", "frame_00001.png", "frame_00002.png", "frame_00003.png")
	for i, p := range paths {
		assertImageEqual(t, p, readPNG(t, p), v.Frames.Data[i*6*7*3:], 6, 7, 3)
	}
	// Rewriting with fewer frames replaces the whole set.
	v2 := testVideo(2, 6, 7, 1, 10)
	if _, err := WritePNGFrames(dir, v2); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir, "frame_00000.png", "frame_00001.png")
	assertImageEqual(t, "frame 1", readPNG(t, filepath.Join(dir, "frame_00001.png")), v2.Frames.Data[6*7:], 6, 7, 1)
	assertOnly(t, root, "frames")

	// A folder holding something else is not replaced.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WritePNGFrames(dir, v); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("error %v, want one naming notes.txt", err)
	}
	assertOnly(t, dir, "frame_00000.png", "frame_00001.png", "notes.txt")
	// A bad video leaves no folder behind.
	if _, err := WritePNGFrames(filepath.Join(root, "none"), &tensor.Video{}); err == nil {
		t.Error("a video without frames was written")
	}
	assertOnly(t, root, "frames")
	// A file where the folder should be is an error.
	if _, err := WritePNGFrames(paths[0], v); err == nil {
		t.Error("frames written over a file")
	}
}

func TestFrameName(t *testing.T) {
	for _, c := range []struct {
		i, n int
		want string
	}{
		{0, 1, "frame_00000.png"},
		{42, 100, "frame_00042.png"},
		{7, 1000000, "frame_000007.png"},
		{999999, 1000000, "frame_999999.png"},
	} {
		if got := FrameName(c.i, c.n); got != c.want {
			t.Errorf("FrameName(%d, %d) = %s, want %s", c.i, c.n, got, c.want)
		}
		if !isFrameName(c.want) {
			t.Errorf("isFrameName(%s) = false", c.want)
		}
	}
	for _, s := range []string{"frame_1.png", "frame_0000a.png", "image_00000.png", "frame_00000.gif"} {
		if isFrameName(s) {
			t.Errorf("isFrameName(%s) = true", s)
		}
	}
}

// A writer that fails halfway leaves the destination as it was and no
// temporary file behind.
func TestWriteFileAtomicFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.bin")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFileAtomic(p, func(w io.Writer) error {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 200<<10)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("destination is %q, want it unchanged", b[:min(len(b), 10)])
	}
	assertOnly(t, dir, "a.bin")
	// A destination that is a folder fails cleanly too.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(sub, func(w io.Writer) error { return nil }); err == nil {
		t.Error("writing over a folder succeeded")
	}
	assertOnly(t, dir, "a.bin", "sub")
	// A successful write is readable by others.
	if err := WriteFileAtomic(p, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", st.Mode(), err)
	}
}

// A fill that fails halfway leaves an existing frame folder untouched.
func TestWriteDirAtomicFailure(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "frames")
	v := testVideo(3, 4, 4, 3, 10)
	if _, err := WritePNGFrames(dir, v); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "frame_00002.png"))
	boom := errors.New("boom")
	err := writeDirAtomic(dir, isFrameName, func(tmp string) error {
		if err := os.WriteFile(filepath.Join(tmp, "frame_00000.png"), []byte("partial"), 0o644); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	assertOnly(t, root, "frames")
	assertOnly(t, dir, "frame_00000.png", "frame_00001.png", "frame_00002.png")
	after, _ := os.ReadFile(filepath.Join(dir, "frame_00002.png"))
	if !bytes.Equal(before, after) {
		t.Error("a failed write changed a frame")
	}
	mustExist(t, filepath.Join(dir, "frame_00000.png"))
	readPNG(t, filepath.Join(dir, "frame_00000.png"))
}
