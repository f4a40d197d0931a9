package runtime

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFormatProblems(t *testing.T) {
	cases := []struct {
		uri    string
		format CheckpointFormat
		want   string
	}{
		{"m.pt2", "", ""},
		{"m.pt2", FormatAOTInductor, ""},
		{"m.pt", FormatTorchScript, ""},
		{"hf://org/model", FormatAOTInductor, ""},
		{"m.bin", FormatTorchScript, ""},
		{"checkpoints/M.PT2", FormatTorchScript, `format torchscript, but the uri "checkpoints/M.PT2" ends in .pt2, the extension of an AOTInductor package`},
		{"m.pt", FormatAOTInductor, `format aotinductor, but the uri "m.pt" ends in .pt, the extension of a TorchScript archive`},
		{"m.pt", "onnx", `format "onnx" is not torchscript or aotinductor`},
	}
	for _, c := range cases {
		ref := InferenceCheckpointRef{Role: "model", URI: c.uri, Format: c.format}
		ps := ref.FormatProblems()
		got := JoinProblems(ps)
		if c.want == "" && len(ps) != 0 || c.want != "" && (len(ps) != 1 || ps[0].Path != "format" || !strings.Contains(got, c.want)) {
			t.Errorf("%s %q: got %q, want %q", c.uri, c.format, got, c.want)
		}
	}
}

func zipFile(t *testing.T, names ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := zip.NewWriter(f)
	for _, n := range names {
		if _, err := w.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestDetectAndResolveCheckpointFormat(t *testing.T) {
	ts := zipFile(t, "model/data.pkl", "model/code/__torch__.py", "model/data/0", "model/version")
	aoti := zipFile(t, "version", "archive_format", "data/aotinductor/model/x.so", "data/aotinductor/model/x_metadata.json")
	aotiNested := zipFile(t, "pkg/version", "pkg/data/aotinductor/model/x.so")
	other := zipFile(t, "weights.bin", "data.pkl")
	notZip := filepath.Join(t.TempDir(), "n")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]CheckpointFormat{ts: FormatTorchScript, aoti: FormatAOTInductor, aotiNested: FormatAOTInductor, other: "", notZip: ""} {
		if got, err := CheckpointFormatOf(path); err != nil || got != want {
			t.Errorf("%s: got %q, %v, want %q", path, got, err, want)
		}
	}
	resolve := []struct {
		path     string
		declared CheckpointFormat
		want     CheckpointFormat
		err      string
	}{
		{ts, "", FormatTorchScript, ""},
		{aoti, "", FormatAOTInductor, ""},
		{notZip, "", FormatTorchScript, ""},                // the TorchScript loader says what is wrong
		{notZip, FormatAOTInductor, FormatAOTInductor, ""}, // the manifest wins
		{aoti, FormatAOTInductor, FormatAOTInductor, ""},
		{aoti, FormatTorchScript, "", "is an AOTInductor package, but format torchscript was declared for it"},
		{ts, FormatAOTInductor, "", "is a TorchScript archive, but format aotinductor was declared for it"},
		{ts, "onnx", "", `checkpoint format "onnx": want torchscript or aotinductor`},
		{filepath.Join(t.TempDir(), "missing"), "", "", "no such file"},
	}
	for _, c := range resolve {
		got, err := ResolveCheckpointFormat(c.path, c.declared)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s declared %q: got %q, %v; want %q, %q", c.path, c.declared, got, err, c.want, c.err)
		}
	}
}

func TestCallSpecHelpers(t *testing.T) {
	s := CallSpec{
		Inputs: []CallInput{
			{Name: "x", DType: Float32, Shape: Shape{"batch", "32"}},
			{Name: "scale", Keyword: true, Constant: true, Value: 2.0},
			{Name: "mask", Keyword: true, DType: Bool, Shape: Shape{"batch"}},
		},
		Dims: map[string]DimRange{"batch": {Min: 2, Max: 16}, "t": {Min: 1}},
	}
	if got := s.InputList(); got != "x: float32[batch,32], scale = 2 (constant), mask: bool[batch]" {
		t.Errorf("InputList: %s", got)
	}
	if ts := s.Tensors(); len(ts) != 2 || ts[0].Name != "x" || ts[1].Name != "mask" {
		t.Errorf("Tensors: %v", ts)
	}
	if in, ok := s.Input("scale"); !ok || !in.Constant {
		t.Errorf("Input(scale): %v %v", in, ok)
	}
	b, tr := s.Dims["batch"], s.Dims["t"]
	if b.String() != "[2, 16]" || tr.String() != "[1, ∞)" || !b.Contains(16) || b.Contains(17) || b.Contains(1) || !tr.Contains(1<<40) {
		t.Errorf("ranges %s %s", b, tr)
	}
}

// TestCallInputRestates checks the one rule by which manifest values and
// call values restate a baked-in constant: numbers by value, whatever their
// Go type; booleans, strings and None exactly.
func TestCallInputRestates(t *testing.T) {
	cases := []struct {
		constant, v any
		want        bool
	}{
		{float64(2), int64(2), true},
		{float64(2), 2, true},
		{float64(0.5), float32(0.5), true},
		{float64(2), int32(3), false},
		{float64(1), true, false},
		{true, true, true},
		{true, false, false},
		{true, 1.0, false},
		{"mean", "mean", true},
		{"mean", "sum", false},
		{nil, nil, true},
		{nil, 0.0, false},
		{[]any{1.0}, []any{1.0}, false}, // never recorded: not a constant the export keeps
	}
	for _, c := range cases {
		if got := (CallInput{Constant: true, Value: c.constant}).Restates(c.v); got != c.want {
			t.Errorf("constant %#v, value %#v: Restates = %v, want %v", c.constant, c.v, got, c.want)
		}
	}
}
