package spec

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
