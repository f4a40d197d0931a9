package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

func TestDetectAndResolveFormat(t *testing.T) {
	ts := enginetest.ZipFile(t, "f", "model/data.pkl", "model/code/__torch__.py", "model/data/0", "model/version")
	aoti := enginetest.ZipFile(t, "f", "version", "archive_format", "data/aotinductor/model/x.so", "data/aotinductor/model/x_metadata.json")
	aotiNested := enginetest.ZipFile(t, "f", "pkg/version", "pkg/data/aotinductor/model/x.so")
	other := enginetest.ZipFile(t, "f", "weights.bin", "data.pkl")
	notZip := filepath.Join(t.TempDir(), "n")
	if err := os.WriteFile(notZip, []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]spec.CheckpointFormat{ts: spec.FormatTorchScript, aoti: spec.FormatAOTInductor, aotiNested: spec.FormatAOTInductor, other: "", notZip: ""} {
		if got, err := engine.FormatOf(path); err != nil || got != want {
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
		got, err := engine.ResolveFormat(c.path, c.declared)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s declared %q: got %q, %v; want %q, %q", c.path, c.declared, got, err, c.want, c.err)
		}
	}
}
