package artifactio

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// debianPython is the interpreter that has NumPy on the project machines.
const debianPython = "/usr/bin/python3"

var numpyOnce struct {
	sync.Once
	ok  bool
	why string
}

// requireNumPy skips the test with a clear message unless /usr/bin/python3
// can import numpy.
func requireNumPy(t *testing.T) {
	t.Helper()
	numpyOnce.Do(func() {
		out, err := exec.Command(debianPython, "-c", "import numpy").CombinedOutput()
		numpyOnce.ok = err == nil
		if err != nil {
			numpyOnce.why = err.Error() + ": " + string(out)
		}
	})
	if !numpyOnce.ok {
		t.Skipf("skipping the NumPy cross-check: %s cannot import numpy (%s); install python3-numpy to run it", debianPython, numpyOnce.why)
	}
}

// runPython runs a Python program with Debian's interpreter and returns its
// standard output.
func runPython(t *testing.T, program string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(debianPython, append([]string{"-c", program}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("python: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("python: %v", err)
	}
	return out
}

// testVideo returns a deterministic video with smooth gradients, a moving
// square and some texture, so it has far more than 256 colours when c ≥ 3.
func testVideo(t, h, w, c int, fps float64) *tensor.Video {
	px := make([]byte, t*h*w*c)
	i := 0
	for f := range t {
		for y := range h {
			for x := range w {
				r := (x*255/max(w-1, 1) + f*7) % 256
				g := y * 255 / max(h-1, 1)
				b := ((x + y) * 3 * (f + 1)) % 256
				if x >= f*2 && x < f*2+w/4 && y >= h/3 && y < h/3+h/4 {
					r, g, b = 250, 240, 20
				}
				vals := [4]int{r, g, b, 255}
				if c == 1 {
					vals[0] = (r*299 + g*587 + b*114) / 1000
				}
				if c == 4 {
					vals[3] = (x * 255 / max(w-1, 1))
				}
				for k := range c {
					px[i] = byte(vals[k])
					i++
				}
			}
		}
	}
	return &tensor.Video{Frames: tensor.FromUint8(px, int64(t), int64(h), int64(w), int64(c)), FPS: fps}
}

// listDir returns the names in dir (sorted), failing the test on error.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// assertOnly fails unless dir holds exactly the given names.
func assertOnly(t *testing.T, dir string, want ...string) {
	t.Helper()
	got := listDir(t, dir)
	if len(got) != len(want) {
		t.Fatalf("%s holds %q, want exactly %q", dir, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s holds %q, want exactly %q", dir, got, want)
		}
	}
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func base(p string) string { return filepath.Base(p) }

func formatInt(x int64) string { return strconv.FormatInt(x, 10) }

// pyFloatRepr formats a float64 as Python's repr does.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, shortest
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testVideoFrom wraps raw pixels as a video without checking them.
func testVideoFrom(px []byte, t, h, w, c int) *tensor.Video {
	return &tensor.Video{Frames: tensor.FromUint8(px, int64(t), int64(h), int64(w), int64(c)), FPS: 10}
}
