package digits

import (
	"context"
	"fmt"
	"image"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gen "github.com/worldfoundry/wfgen/generated/digits"
	"github.com/worldfoundry/wfgen/runtime/client"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the libtorch engine
)

// requirePython skips the test, saying why, unless the interpreter has
// torch, torchvision and sklearn.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(Python, "-c", "import torch, torchvision, sklearn.datasets").CombinedOutput()
	if err != nil {
		t.Skipf("skipping: %s cannot import torch, torchvision and sklearn (scripts/setup.sh installs python3-torch, python3-torchvision, python3-sklearn): %v\n%s", Python, err, out)
	}
}

// TestGoAndPythonAgree trains the model, then reads the held-out PNGs twice:
// in Python (PIL, torchvision's ToTensor and Normalize, the TorchScript
// checkpoint, all at once) and in Go (png.Decode, SetPixelsFromImage, the
// generated client in padded batches on libtorch). Both must read every
// picture alike, with logits that agree to float32 rounding, and score at
// least 95 %.
func TestGoAndPythonAgree(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root := t.TempDir()
	rep, err := Ensure(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if rep == nil {
		t.Fatal("Ensure kept a model in an empty folder")
	}
	t.Logf("trained on %d pictures in %.1fs; Python at training time: %d/%d", rep.Train, rep.Seconds, rep.Correct, rep.Test)

	py, err := PredictPython(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	items, err := TestSet(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != rep.Test || py.Total != len(items) || len(py.Predictions) != len(items) || len(py.Logits) != len(items) {
		t.Fatalf("%d items, training held out %d, Python predicted %d of %d", len(items), rep.Test, len(py.Predictions), py.Total)
	}

	ps := make([]gen.ClassifyParams, len(items))
	for i, it := range items {
		m, err := it.Load()
		if err != nil {
			t.Fatal(err)
		}
		if err := ps[i].SetPixelsFromImage(m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := gen.New(client.WithCheckpointRoot(root), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.ClassifyBatch(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	goCorrect, worst := 0, 0.0
	for i, r := range res {
		label, err := r.Label.Int64s()
		if err != nil || len(label) != 1 {
			t.Fatalf("item %d: label %v, %v", i, r.Label.Shape, err)
		}
		logits, err := r.Logits.Float32s()
		if err != nil || len(logits) != 10 {
			t.Fatalf("item %d: logits %v, %v", i, r.Logits.Shape, err)
		}
		if int(label[0]) != py.Predictions[i] {
			t.Errorf("%s: Go reads %d, Python %d (true digit %d)", filepath.Base(items[i].Path), label[0], py.Predictions[i], items[i].Label)
		}
		for k, v := range logits {
			worst = math.Max(worst, math.Abs(float64(v-py.Logits[i][k])))
		}
		if int(label[0]) == items[i].Label {
			goCorrect++
		}
	}
	t.Logf("held-out accuracy: Go %d/%d, Python %d/%d; largest logit difference %.2g", goCorrect, len(items), py.Correct, py.Total, worst)
	if goCorrect != py.Correct || py.Correct != rep.Correct {
		t.Errorf("correct: Go %d, Python %d, Python at training time %d", goCorrect, py.Correct, rep.Correct)
	}
	if worst > 1e-3 {
		t.Errorf("logits differ by up to %g between Go and Python", worst)
	}
	if acc := float64(goCorrect) / float64(len(items)); acc < 0.95 {
		t.Errorf("accuracy %.4f, want at least 0.95", acc)
	}

	// The model is cached now: Ensure keeps it.
	if rep, err := Ensure(ctx, root); err != nil || rep != nil {
		t.Errorf("second Ensure: %+v, %v; want the cached model kept", rep, err)
	}
}

func TestTestSetErrors(t *testing.T) {
	for _, c := range []struct{ labels, want string }{
		{"0001.png 3\n0002.png x\n", "labels.txt:2: want \"NNNN.png digit\", got \"0002.png x\""},
		{"0001.png 12\n", "labels.txt:1"},
		{"../0001.png 1\n", "labels.txt:1"},
		{"\n", "no pictures"},
	} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, TestDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, TestDir, "labels.txt"), []byte(c.labels), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := TestSet(root); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.labels, err, c.want)
		}
	}
}

func TestSheet(t *testing.T) {
	pics := make([]image.Image, 10)
	pred, truth := make([]int, 10), make([]int, 10)
	for i := range pics {
		pics[i] = image.NewGray(image.Rect(0, 0, 8, 8))
		pred[i], truth[i] = i, i%9
	}
	img, err := Sheet(pics, pred, truth)
	if err != nil {
		t.Fatal(err)
	}
	// Two rows of eight cells.
	cw, ch := int64(8*sheetZoom+2*sheetPad), int64(8*sheetZoom+3*sheetPad+5*glyphZoom)
	if got := fmt.Sprint(img.Pixels.Shape); got != fmt.Sprint([]int64{2 * ch, 8 * cw, 3}) {
		t.Errorf("sheet shape %s", got)
	}
	// Item 9 (predicted 9, truth 0) is drawn in the wrong ink; item 0 in the right one.
	has := func(cell int, ink [3]uint8) bool {
		x0, y0 := int64(cell%8)*cw, int64(cell/8)*ch
		w := img.Pixels.Shape[1]
		for y := y0; y < y0+ch; y++ {
			for x := x0; x < x0+cw; x++ {
				i := 3 * (y*w + x)
				if [3]uint8(img.Pixels.Data[i:i+3]) == ink {
					return true
				}
			}
		}
		return false
	}
	right, wrong := [3]uint8{rightInk.R, rightInk.G, rightInk.B}, [3]uint8{wrongInk.R, wrongInk.G, wrongInk.B}
	if !has(0, right) || has(0, wrong) || !has(9, wrong) || has(9, right) {
		t.Error("inks: want item 0 right and item 9 wrong")
	}
	if _, err := Sheet(pics, pred[:3], truth); err == nil {
		t.Error("mismatched lengths accepted")
	}
	pred[2] = 10
	if _, err := Sheet(pics, pred, truth); err == nil {
		t.Error("prediction 10 accepted")
	}
}
