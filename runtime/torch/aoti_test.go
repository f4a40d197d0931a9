//go:build cgo

package torch

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// needAOTI skips a test that runs AOTInductor packages on an engine built
// against libtorch before 2.6 (bookworm's 1.13), and exports the fixture.
func needAOTI(t *testing.T, model string) aoti.Fixture {
	t.Helper()
	if v := Default().LibtorchVersion(); !v.AtLeast(2, 6) {
		t.Skipf("AOTInductor packages need libtorch ≥ 2.6 (this engine: %s); run make test-libtorch2", v)
	}
	if testing.Short() {
		t.Skip("exports an AOTInductor package (tens of seconds the first time); skipped with -short")
	}
	f, err := aoti.Cached(context.Background(), model)
	if err != nil {
		t.Fatal(err) // libtorch 2.6 without Python 2.6 to export: a broken lane
	}
	return f
}

// On libtorch before 2.6 an AOTInductor package, recognised from its
// contents or declared, fails the load with the version the engine was
// built against; with 2.6 the same (fake) package reaches libtorch's loader
// and fails there. A TorchScript archive declared an AOTInductor package
// fails before either.
func TestAOTIPackageNeedsLibtorch26(t *testing.T) {
	pkg := writeZip(t, [][2]string{
		{"version", "0"}, {"archive_format", "pt2"},
		{"data/aotinductor/model/abc.cpp", ""}, {"data/aotinductor/model/abc_metadata.json", `{"AOTI_DEVICE_KEY": "cpu"}`},
	}, zip.Store)
	v := Default().LibtorchVersion()
	for _, format := range []spec.CheckpointFormat{"", spec.FormatAOTInductor} {
		_, err := Default().Load(pkg, engine.LoadOptions{Device: "cpu", Format: format})
		if err == nil {
			t.Fatalf("format %q: loading a fake package succeeded", format)
		}
		if v.AtLeast(2, 6) {
			if errors.Is(err, ErrAOTIUnavailable) {
				t.Fatalf("format %q: libtorch %s: %v", format, v, err)
			}
			continue
		}
		want := "AOTInductor packages need libtorch ≥ 2.6 (this engine was built against " + v.String() + ")"
		if !errors.Is(err, ErrAOTIUnavailable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("format %q: got %v, want %q", format, err, want)
		}
	}

	ts := buildModule(t, ModuleSource{Source: "def forward(self, x: Tensor) -> Tensor:\n    return x\n"})
	_, err := Default().Load(ts, engine.LoadOptions{Format: spec.FormatAOTInductor})
	if err == nil || !strings.Contains(err.Error(), "is a TorchScript archive, but format aotinductor was declared") {
		t.Fatalf("TorchScript declared aotinductor: %v", err)
	}
	m, err := Default().Load(ts, engine.LoadOptions{Format: spec.FormatTorchScript})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

func loadAOTIFixture(t *testing.T, f aoti.Fixture, opts engine.LoadOptions) *AOTIModule {
	t.Helper()
	m, err := Default().Load(f.Package, opts)
	if err != nil {
		t.Fatal(err)
	}
	am, ok := m.(*AOTIModule)
	if !ok {
		t.Fatalf("Load returned %T, want *AOTIModule", m)
	}
	t.Cleanup(func() { am.Close() })
	return am
}

func reference(t *testing.T, f aoti.Fixture) *aoti.Reference {
	t.Helper()
	ref, err := aoti.ReadReference(f.Reference)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// checkParity compares the Go outputs (by name) with Python's package run
// (≤ 1e-5 of the output's scale) and with the eager model (≤ 1e-4).
func checkParity(t *testing.T, got map[string]*tensor.Tensor, ref *aoti.Reference) {
	t.Helper()
	if len(got) != len(ref.Outputs) {
		t.Fatalf("got outputs %v, want %d", got, len(ref.Outputs))
	}
	for name, want := range ref.Outputs {
		d, err := aoti.MaxRelDiff(got[name], want)
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		e, err := aoti.MaxRelDiff(got[name], ref.Eager[name])
		if err != nil {
			t.Fatalf("output %s: %v", name, err)
		}
		t.Logf("output %s %v: relative error %.2g against Python's package run, %.2g against the eager model", name, want.Shape, d, e)
		if d > 1e-5 || e > 1e-4 {
			t.Errorf("output %s: relative error %.3g against Python's package run, %.3g against eager", name, d, e)
		}
	}
}

// The exported encoder runs from Go with Python's outputs; its call spec
// names the positional features, the baked-in normalize flag, the dict of
// outputs and the dynamic batch dimension's exported range.
func TestAOTIEncoderMatchesPython(t *testing.T) {
	f := needAOTI(t, aoti.Encoder)
	m := loadAOTIFixture(t, f, engine.LoadOptions{Device: "cpu"})
	spec, err := m.CallSpec("forward")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	want := `{"inputs":[{"name":"features","dtype":"float32","shape":["batch",32]},{"name":"normalize","keyword":true,"constant":true,"value":true}],` +
		`"outputs":[{"name":"embedding","dtype":"float32","shape":["batch",16]},{"name":"norm","dtype":"float32","shape":["batch"]}],` +
		`"returns":"dict","dims":{"batch":{"min":2,"max":16}}}`
	if string(b) != want {
		t.Fatalf("call spec\n got %s\nwant %s", b, want)
	}
	schema, err := m.Schema("forward")
	if err != nil || len(schema.Arguments) != 1 || schema.Arguments[0].Name != "features" || schema.Returns[0] != "Dict[str, Tensor]" {
		t.Fatalf("schema %+v, %v", schema, err)
	}
	if got := m.Methods(); len(got) != 1 || got[0] != "forward" {
		t.Fatalf("methods %v", got)
	}

	ref := reference(t, f)
	out, err := m.Call(context.Background(), "forward", map[string]any{"features": ref.Inputs["features"]}, engine.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tensor.Tensor{}
	for k, v := range out.(map[string]any) {
		got[k] = v.(*tensor.Tensor)
	}
	checkParity(t, got, ref)

	// Restating the baked-in value is accepted; calls reuse a buffer.
	var buf tensor.OutputBuffer
	for range 3 {
		out2, err := m.Call(context.Background(), "forward", map[string]any{"features": ref.Inputs["features"], "normalize": true},
			engine.CallOptions{Outputs: &buf})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := aoti.MaxRelDiff(out2.(map[string]any)["embedding"].(*tensor.Tensor), got["embedding"])
		if d != 0 {
			t.Fatalf("second call differs by %g", d)
		}
	}
}

// What a compiled model would not check is refused before libtorch sees
// it, with the input and what was wanted named.
func TestAOTIRejectsCallsOutsideTheExport(t *testing.T) {
	f := needAOTI(t, aoti.Encoder)
	m := loadAOTIFixture(t, f, engine.LoadOptions{})
	x := func(n, d int64) *tensor.Tensor { return tensor.Zeros(tensor.Float32, n, d) }
	cases := []struct {
		kwargs map[string]any
		want   string
	}{
		{map[string]any{"features": tensor.Zeros(tensor.Float16, 4, 32)}, `input "features": want features: float32[batch,32], got float16[4 32]`},
		{map[string]any{"features": x(4, 31)}, `input "features": want features: float32[batch,32], got float32[4 31] (dimension 1)`},
		{map[string]any{"features": x(17, 32)}, `dimension batch is 17, outside the range [2, 16] the package was exported for`},
		{map[string]any{"features": x(1, 32)}, `dimension batch is 1, outside the range [2, 16]`},
		{map[string]any{"features": tensor.Zeros(tensor.Float32, 4)}, `got float32[4]`},
		{map[string]any{"features": 3.0}, `input "features" must be a tensor (features: float32[batch,32]), not 3 (float64)`},
		{map[string]any{}, `missing input "features"`},
		{map[string]any{"features": x(4, 32), "normalize": false}, `argument "normalize" was baked into the package at export as true; it cannot be false (bool)`},
		{map[string]any{"features": x(4, 32), "scale": 2.0}, `unexpected argument "scale" (inputs: features: float32[batch,32], normalize = true (constant))`},
	}
	for _, c := range cases {
		_, err := m.Call(context.Background(), "forward", c.kwargs, engine.CallOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.kwargs, err, c.want)
		}
	}
	if _, err := m.Call(context.Background(), "encode", map[string]any{}, engine.CallOptions{}); err == nil || !strings.Contains(err.Error(), `no method "encode"`) {
		t.Errorf("other method: %v", err)
	}
	// The package still serves after all of that.
	if _, err := m.Call(context.Background(), "forward", map[string]any{"features": x(2, 32)}, engine.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := m.Call(context.Background(), "forward", map[string]any{"features": x(2, 32)}, engine.CallOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// A package is compiled for one device and dtype: asking for others is a
// load error naming both.
func TestAOTILoadOptionsTheExportFixed(t *testing.T) {
	f := needAOTI(t, aoti.Encoder)
	_, err := Default().Load(f.Package, engine.LoadOptions{Device: "cpu", DType: tensor.BFloat16})
	if err == nil || !strings.Contains(err.Error(), "dtype bfloat16: the package was compiled for float32 and cannot be cast") {
		t.Fatalf("bfloat16: %v", err)
	}
	loadAOTIFixture(t, f, engine.LoadOptions{Device: "cpu", DType: tensor.Float32})
	if _, err := Default().Load(f.Package, engine.LoadOptions{Device: "cuda"}); err == nil {
		t.Fatal("cuda on a CPU package loaded")
	}
}

// rewritePackage copies a package with its metadata JSON changed by edit.
func rewritePackage(t *testing.T, src, dst string, edit func(map[string]any)) {
	t.Helper()
	r, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	w := zip.NewWriter(out)
	for _, e := range r.File {
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name, "_metadata.json") {
			var meta map[string]any
			if err := json.Unmarshal(body, &meta); err != nil {
				t.Fatal(err)
			}
			edit(meta)
			body, _ = json.Marshal(meta)
		}
		ew, err := w.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		ew.Write(body)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.Close()
}

// A package exported without the recorded call spec, or with one that
// disagrees with the compiled model, is refused at load.
func TestAOTIPackageWithoutOrWithWrongCallSpec(t *testing.T) {
	f := needAOTI(t, aoti.Encoder)
	dir := t.TempDir()
	cases := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"none", func(m map[string]any) { delete(m, CallSpecKey) }, "has no wfgen call spec in its metadata (key wfgen.call_spec)"},
		{"constant-as-tensor", func(m map[string]any) {
			m[CallSpecKey] = strings.Replace(m[CallSpecKey].(string), `"constant": true, "value": true`, `"dtype": "bool", "shape": []`, 1)
		}, "the compiled model takes 1 tensor inputs, but the recorded call spec has 2"},
		{"renamed-output", func(m map[string]any) {
			m[CallSpecKey] = strings.Replace(m[CallSpecKey].(string), `"name": "norm"`, `"name": "norms"`, 1)
		}, `the recorded call spec returns dict ["embedding" "norms"], but the package returns a dict with keys ["embedding" "norm"]`},
		{"version", func(m map[string]any) {
			m[CallSpecKey] = strings.Replace(m[CallSpecKey].(string), `"version": 1`, `"version": 9`, 1)
		}, "has version 9; this wfgen reads version 1"},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name+".pt2")
		rewritePackage(t, f.Package, p, c.edit)
		_, err := Default().Load(p, engine.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// torchvision's mobilenet_v3_small, exported with a dynamic batch, gives
// Python's outputs from Go, at both ends of its exported range, from two
// goroutines at once.
func TestAOTIMobileNetMatchesPython(t *testing.T) {
	f := needAOTI(t, aoti.MobileNet)
	m := loadAOTIFixture(t, f, engine.LoadOptions{Device: "cpu"})
	ref := reference(t, f)
	x := ref.Inputs["x"]
	out, err := m.Call(context.Background(), "forward", map[string]any{"x": x}, engine.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkParity(t, map[string]*tensor.Tensor{"output": out.(*tensor.Tensor)}, ref)

	// Item 0 alone, and as many copies of it as the export allows, give
	// item 0's logits.
	one := &tensor.Tensor{DType: x.DType, Shape: append([]int64{1}, x.Shape[1:]...), Data: x.Data[:len(x.Data)/int(x.Shape[0])]}
	var wg sync.WaitGroup
	for _, n := range []int{1, aoti.MaxBatch[aoti.MobileNet]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := &tensor.Tensor{DType: x.DType, Shape: append([]int64{int64(n)}, x.Shape[1:]...)}
			for range n {
				batch.Data = append(batch.Data, one.Data...)
			}
			o, err := m.Call(context.Background(), "forward", map[string]any{"x": batch}, engine.CallOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			logits := o.(*tensor.Tensor)
			want := ref.Outputs["output"]
			row := &tensor.Tensor{DType: want.DType, Shape: []int64{1, want.Shape[1]}, Data: want.Data[:len(want.Data)/int(want.Shape[0])]}
			for i := range n {
				got := &tensor.Tensor{DType: logits.DType, Shape: row.Shape, Data: logits.Data[i*len(row.Data) : (i+1)*len(row.Data)]}
				if d, err := aoti.MaxRelDiff(got, row); err != nil || d > 1e-4 {
					t.Errorf("batch %d item %d: relative error %g (%v)", n, i, d, err)
				}
			}
		}()
	}
	wg.Wait()
}
