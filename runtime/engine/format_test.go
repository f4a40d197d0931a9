package engine

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

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

func TestDetectAndResolveFormat(t *testing.T) {
	ts := zipFile(t, "model/data.pkl", "model/code/__torch__.py", "model/data/0", "model/version")
	aoti := zipFile(t, "version", "archive_format", "data/aotinductor/model/x.so", "data/aotinductor/model/x_metadata.json")
	aotiNested := zipFile(t, "pkg/version", "pkg/data/aotinductor/model/x.so")
	other := zipFile(t, "weights.bin", "data.pkl")
	notZip := filepath.Join(t.TempDir(), "n")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]spec.CheckpointFormat{ts: spec.FormatTorchScript, aoti: spec.FormatAOTInductor, aotiNested: spec.FormatAOTInductor, other: "", notZip: ""} {
		if got, err := FormatOf(path); err != nil || got != want {
			t.Errorf("%s: got %q, %v, want %q", path, got, err, want)
		}
	}
	resolve := []struct {
		path     string
		declared spec.CheckpointFormat
		want     spec.CheckpointFormat
		err      string
	}{
		{ts, "", spec.FormatTorchScript, ""},
		{aoti, "", spec.FormatAOTInductor, ""},
		{notZip, "", spec.FormatTorchScript, ""},                     // the TorchScript loader says what is wrong
		{notZip, spec.FormatAOTInductor, spec.FormatAOTInductor, ""}, // the manifest wins
		{aoti, spec.FormatAOTInductor, spec.FormatAOTInductor, ""},
		{aoti, spec.FormatTorchScript, "", "is an AOTInductor package, but format torchscript was declared for it"},
		{ts, spec.FormatAOTInductor, "", "is a TorchScript archive, but format aotinductor was declared for it"},
		{ts, "onnx", "", `checkpoint format "onnx": want torchscript or aotinductor`},
		{filepath.Join(t.TempDir(), "missing"), "", "", "no such file"},
	}
	for _, c := range resolve {
		got, err := ResolveFormat(c.path, c.declared)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s declared %q: got %q, %v; want %q, %q", c.path, c.declared, got, err, c.want, c.err)
		}
	}
}
