// Package aoti exports the AOTInductor packages (.pt2) the tests and
// benchmarks run: the models of export.py (an encoder with a dynamic batch
// dimension and torchvision's mobilenet_v3_small), exported by Debian's
// python3-torch 2.6 (the libtorch 2.x lane's, scripts/libtorch2-lane.sh)
// together with a TorchScript archive of the same model and a reference
// call computed in Python. Exports are cached: compiling a package takes
// tens of seconds.
package aoti

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Python is the interpreter with Debian's python3-torch (2.6 or later to
// export) and python3-torchvision.
const Python = "/usr/bin/python3"

// The models export.py exports.
const (
	Encoder   = "encoder"
	MobileNet = "mobilenet_v3_small"
)

// MaxBatch is the largest batch each model is exported for (the encoder's
// smallest is 2, mobilenet's 1). Mobilenet's stays below 16: from a batch of
// 16 on, the Inductor of Debian's torch 2.6 compiles it into code whose
// outputs are wrong (relative error 0.77, in torch.compile too; docs/aoti.md).
var MaxBatch = map[string]int{Encoder: 16, MobileNet: 8}

//go:embed export.py
var script []byte

// Fixture is one exported model.
type Fixture struct {
	// Package is the AOTInductor package (.pt2).
	Package string
	// TorchScript is the same model as a TorchScript archive.
	TorchScript string
	// Reference is the prefix of the reference call (Reference.json and
	// Reference.*.bin); read it with ReadReference.
	Reference string
	// Report is what export.py measured.
	Report Report
}

// Report is export.py's report: what exporting cost.
type Report struct {
	Model              string          `json:"model"`
	Torch              string          `json:"torch"`
	ExportSeconds      float64         `json:"export_seconds"`
	CompileSeconds     float64         `json:"compile_seconds"`
	PackageBytes       int64           `json:"package_bytes"`
	PythonLoadSeconds  float64         `json:"python_load_seconds"`
	TorchScriptSeconds float64         `json:"torchscript_seconds"`
	TorchScriptBytes   int64           `json:"torchscript_bytes"`
	CallSpec           json.RawMessage `json:"call_spec"`
}

// Available says why this machine cannot export packages (nil when it can):
// Python with torch 2.6 or later, and torchvision, are needed.
func Available(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, Python, "-c",
		"import torch, torchvision; v = tuple(int(x) for x in torch.__version__.split('+')[0].split('.')[:2]); print(torch.__version__); assert v >= (2, 6), v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("aoti: exporting needs %s with torch ≥ 2.6 and torchvision (the libtorch 2.x lane has them: make test-libtorch2): %v: %s",
			Python, err, lastLines(string(out), 2))
	}
	return nil
}

// stamp identifies an export: the script, the model and the torch Python
// package it runs with.
func stamp(model string) string {
	h := sha256.New()
	h.Write(script)
	fmt.Fprintf(h, "\x00%s\x00%d\x00", model, MaxBatch[model])
	if v, err := os.ReadFile("/usr/lib/python3/dist-packages/torch/version.py"); err == nil {
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CacheDir is where Cached keeps exports: the user cache folder's
// wfgen/aoti.
func CacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "wfgen", "aoti"), nil
}

// Cached returns the export of model from the cache (CacheDir), exporting
// it first when the cache has none for the current script and torch (an
// error says what is missing when this machine cannot export). Test
// processes running at once wait for one another's export.
func Cached(ctx context.Context, model string) (Fixture, error) {
	root, err := CacheDir()
	if err != nil {
		return Fixture{}, err
	}
	dir := filepath.Join(root, model+"-"+stamp(model))
	if f, err := read(dir, model); err == nil {
		return f, nil
	}
	if err := Available(ctx); err != nil {
		return Fixture{}, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Fixture{}, err
	}
	lock, err := os.OpenFile(filepath.Join(root, model+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Fixture{}, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Fixture{}, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if f, err := read(dir, model); err == nil {
		return f, nil // another process exported it meanwhile
	}
	tmp, err := os.MkdirTemp(root, model+".partial-")
	if err != nil {
		return Fixture{}, err
	}
	defer os.RemoveAll(tmp)
	if _, err := Export(ctx, model, tmp); err != nil {
		return Fixture{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Fixture{}, err
	}
	// Exports of older scripts or another torch are never read again.
	if stale, err := filepath.Glob(filepath.Join(root, model+"-*")); err == nil {
		for _, d := range stale {
			if d != dir {
				os.RemoveAll(d)
			}
		}
	}
	return read(dir, model)
}

func read(dir, model string) (Fixture, error) {
	f := files(dir, model)
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return Fixture{}, err
	}
	if err := json.Unmarshal(b, &f.Report); err != nil {
		return Fixture{}, err
	}
	for _, p := range []string{f.Package, f.TorchScript, f.Reference + ".json"} {
		if _, err := os.Stat(p); err != nil {
			return Fixture{}, err
		}
	}
	return f, nil
}

func files(dir, model string) Fixture {
	return Fixture{Package: filepath.Join(dir, model+".pt2"), TorchScript: filepath.Join(dir, model+".pt"),
		Reference: filepath.Join(dir, model)}
}

// Export runs export.py for model into dir: the package, the TorchScript
// archive, the reference call and report.json.
func Export(ctx context.Context, model, dir string) (Fixture, error) {
	f := files(dir, model)
	tmp, err := os.MkdirTemp("", "wfgen-aoti-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "export.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return f, err
	}
	cmd := exec.CommandContext(ctx, Python, path, model, f.Package, "--max-batch", fmt.Sprint(MaxBatch[model]),
		"--reference", f.Reference, "--torchscript", f.TorchScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return f, fmt.Errorf("aoti: %s export.py %s: %v\n%s", Python, model, err, lastLines(stderr.String(), 12))
	}
	if err := json.Unmarshal(out, &f.Report); err != nil {
		return f, fmt.Errorf("aoti: export.py printed %q: %v", lastLines(string(out), 4), err)
	}
	return f, os.WriteFile(filepath.Join(dir, "report.json"), out, 0o644)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Reference is a call of the exported model in Python: its tensor inputs
// (by argument name), the keyword arguments the export baked in, the
// outputs of the package run by torch._inductor.aoti_load_package and of
// the eager model (by output name: dict keys, output<i> or output).
type Reference struct {
	Inputs  map[string]*tensor.Tensor
	Kwargs  map[string]any
	Outputs map[string]*tensor.Tensor
	Eager   map[string]*tensor.Tensor
}

// ReadReference reads the reference call written under prefix.
func ReadReference(prefix string) (*Reference, error) {
	b, err := os.ReadFile(prefix + ".json")
	if err != nil {
		return nil, err
	}
	type entry struct {
		DType tensor.DType `json:"dtype"`
		Shape []int64      `json:"shape"`
		File  string       `json:"file"`
	}
	var doc struct {
		Inputs, Outputs, Eager map[string]entry
		Kwargs                 map[string]any
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("aoti: %s.json: %v", prefix, err)
	}
	load := func(m map[string]entry) (map[string]*tensor.Tensor, error) {
		out := map[string]*tensor.Tensor{}
		for name, e := range m {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(prefix), e.File))
			if err != nil {
				return nil, err
			}
			if e.DType != tensor.Float32 {
				return nil, fmt.Errorf("aoti: %s: dtype %s, want float32", e.File, e.DType)
			}
			if len(data)%4 != 0 {
				return nil, fmt.Errorf("aoti: %s: %d bytes is not float32 data", e.File, len(data))
			}
			vals := make([]float32, len(data)/4)
			for i := range vals {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
			t := tensor.FromFloat32(vals, e.Shape...)
			if err := t.Check(); err != nil {
				return nil, fmt.Errorf("aoti: %s: %v", e.File, err)
			}
			out[name] = t
		}
		return out, nil
	}
	r := &Reference{Kwargs: doc.Kwargs}
	var errs [3]error
	r.Inputs, errs[0] = load(doc.Inputs)
	r.Outputs, errs[1] = load(doc.Outputs)
	r.Eager, errs[2] = load(doc.Eager)
	return r, errors.Join(errs[:]...)
}

// MaxRelDiff returns max|a-b| / max|b| over two float32 tensors of one
// shape: the error of a against b relative to b's scale (0 when equal).
func MaxRelDiff(a, b *tensor.Tensor) (float64, error) {
	av, err := a.Float32s()
	if err != nil {
		return 0, err
	}
	bv, err := b.Float32s()
	if err != nil {
		return 0, err
	}
	if len(av) != len(bv) || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return 0, fmt.Errorf("shapes %v and %v differ", a.Shape, b.Shape)
	}
	scale, worst := 0.0, 0.0
	for i := range av {
		scale = max(scale, math.Abs(float64(bv[i])))
		worst = max(worst, math.Abs(float64(av[i])-float64(bv[i])))
	}
	if worst == 0 {
		return 0, nil
	}
	return worst / max(scale, math.SmallestNonzeroFloat64), nil
}
