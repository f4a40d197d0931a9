// Package digits trains the demo's digits model (manifests/digits.yaml)
// with Debian's python3-torch, on the handwritten digits of Debian's
// python3-sklearn, and reads its held-out test split. The training script,
// train.py, is embedded and run with /usr/bin/python3; the normalisation it
// trains with is the one the manifest declares. The demo and the end-to-end
// tests use it.
package digits

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	gen "github.com/worldfoundry/wfgen/generated/digits"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Python is the interpreter with Debian's python3-torch, python3-torchvision
// and python3-sklearn (scripts/setup.sh installs them).
const Python = "/usr/bin/python3"

// Checkpoint is the checkpoint's path under a model root, as the manifest's
// checkpoint uri gives it; TestDir holds the held-out pictures and
// labels.txt.
const (
	Checkpoint = "checkpoints/digits.pt"
	TestDir    = "test"
	stampFile  = "train.stamp"
)

//go:embed train.py
var script []byte

// Field returns the spec of the classify task's pixels field, as the
// manifest declares it.
func Field() *spec.InferenceFieldSpec {
	spec := gen.Spec()
	for i := range spec.Tasks {
		if spec.Tasks[i].TaskID == string(gen.TaskClassify) {
			if f, ok := spec.Tasks[i].Field("pixels"); ok {
				return f
			}
		}
	}
	panic("digits: the manifest has no classify task with a pixels field") // the generated spec is fixed
}

// normalisation returns the script's --mean and --std arguments from the
// manifest's image spec.
func normalisation() []string {
	img := Field().Image
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{"--mean", f(img.Mean[0]), "--std", f(img.Std[0])}
}

// Report is what a training run printed: the split sizes, the held-out
// accuracy Python measured and the seconds data loading and training took.
type Report struct {
	Train    int     `json:"train"`
	Test     int     `json:"test"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	Seconds  float64 `json:"seconds"`
}

// stamp identifies a training run's inputs: the script and the
// normalisation. A root whose stamp matches needs no training.
func stamp() string {
	h := sha256.New()
	h.Write(script)
	fmt.Fprint(h, normalisation())
	return hex.EncodeToString(h.Sum(nil))
}

// Ensure trains the model into root unless root already holds the
// checkpoint and test split of the current script and manifest; it returns
// the training report, or nil when the cached model was kept.
func Ensure(ctx context.Context, root string) (*Report, error) {
	if b, err := os.ReadFile(filepath.Join(root, stampFile)); err == nil && strings.TrimSpace(string(b)) == stamp() {
		_, errC := os.Stat(filepath.Join(root, Checkpoint))
		_, errT := os.Stat(filepath.Join(root, TestDir, "labels.txt"))
		if errC == nil && errT == nil {
			return nil, nil
		}
	}
	return Train(ctx, root)
}

// Train runs train.py: it writes root/checkpoints/digits.pt and the
// held-out pictures under root/test, and records the stamp Ensure checks.
func Train(ctx context.Context, root string) (*Report, error) {
	// The stamp goes first, so a failed run leaves no stale match behind.
	if err := os.Remove(filepath.Join(root, stampFile)); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	out, err := runScript(ctx, append([]string{"train", "--out", root}, normalisation()...)...)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("digits: train.py printed %q: %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(root, stampFile), []byte(stamp()+"\n"), 0o644); err != nil {
		return nil, err
	}
	return &r, nil
}

// Predictions are what Python's torchvision and the TorchScript checkpoint
// make of the held-out pictures, in the order of labels.txt.
type Predictions struct {
	// Predictions are the digits read.
	Predictions []int `json:"predictions"`
	// Logits are the model's scores, one row of ten per picture.
	Logits [][]float32 `json:"logits"`
	// Correct counts the right ones among Total.
	Correct int `json:"correct"`
	Total   int `json:"total"`
}

// PredictPython runs the checkpoint in root on its test split in Python:
// PIL reads each PNG, torchvision's ToTensor and Normalize convert it.
func PredictPython(ctx context.Context, root string) (*Predictions, error) {
	out, err := runScript(ctx, append([]string{"predict", "--model", filepath.Join(root, Checkpoint), "--images", filepath.Join(root, TestDir)}, normalisation()...)...)
	if err != nil {
		return nil, err
	}
	var p Predictions
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, fmt.Errorf("digits: train.py printed %q: %v", out, err)
	}
	return &p, nil
}

// runScript runs the embedded train.py with args and returns its standard
// output. The script runs from a file in a temporary folder (TorchScript
// reads the source of the module it compiles), and with PYTHONHASHSEED
// fixed so that TorchScript writes the same code every run.
func runScript(ctx context.Context, args ...string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "wfgen-digits-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "train.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, Python, append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("digits: %s train.py %s: %v\n%s\n(scripts/setup.sh installs python3-torch, python3-torchvision and python3-sklearn)",
			Python, args[0], err, lastLines(stderr.String(), 8))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Item is one held-out picture and its true digit.
type Item struct {
	// Path is the PNG file.
	Path string
	// Label is the digit it shows.
	Label int
}

// TestSet reads root/test/labels.txt: the held-out pictures in order.
func TestSet(root string) ([]Item, error) {
	dir := filepath.Join(root, TestDir)
	f, err := os.Open(filepath.Join(dir, "labels.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var items []Item
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		d, err := strconv.Atoi(fields[len(fields)-1])
		if len(fields) != 2 || err != nil || d < 0 || d > 9 || filepath.Base(fields[0]) != fields[0] {
			return nil, fmt.Errorf("%s:%d: want \"NNNN.png digit\", got %q", f.Name(), n, sc.Text())
		}
		items = append(items, Item{Path: filepath.Join(dir, fields[0]), Label: d})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: no pictures", f.Name())
	}
	return items, nil
}

// Load decodes the item's PNG.
func (it Item) Load() (image.Image, error) {
	f, err := os.Open(it.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", it.Path, err)
	}
	return m, nil
}
