package main

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"
)

// TestImportAOTIPackage imports AOTInductor packages with the default
// wfgen (no libtorch): a package's recorded call spec becomes a manifest
// (format, fields, dtypes, shapes, batch range) that validates; a package
// without one is refused, saying so. Where Python's torch 2.6 is there
// (the libtorch 2.x lane), the exported encoder is imported too.
func TestImportAOTIPackage(t *testing.T) {
	dir := t.TempDir()
	writePackage := func(name, metadata string) string {
		p := filepath.Join(dir, name)
		var buf bytes.Buffer
		w := zip.NewWriter(&buf)
		for entry, data := range map[string]string{"version": "1", "data/aotinductor/model/x.so": "", "data/aotinductor/model/x_metadata.json": metadata} {
			f, _ := w.Create(entry)
			f.Write([]byte(data))
		}
		w.Close()
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if code, _, errs := wfgenRun("import", writePackage("bare.pt2", `{"AOTI_DEVICE_KEY": "cpu"}`)); code != 1 || !strings.Contains(errs, "the package has no wfgen call spec in its metadata (key wfgen.call_spec)") {
		t.Fatalf("package without a call spec: exit %d: %s", code, errs)
	}
	spec := `{\"version\": 1, \"inputs\": [{\"name\": \"features\", \"dtype\": \"float32\", \"shape\": [\"batch\", 32]}, {\"name\": \"normalize\", \"keyword\": true, \"constant\": true, \"value\": true}], \"outputs\": [{\"name\": \"embedding\", \"dtype\": \"float32\", \"shape\": [\"batch\", 16]}, {\"name\": \"norm\", \"dtype\": \"float32\", \"shape\": [\"batch\"]}], \"returns\": \"dict\", \"dims\": {\"batch\": {\"min\": 1, \"max\": 16}}}`
	packages := []string{writePackage("encoder.pt2", `{"AOTI_DEVICE_KEY": "cpu", "wfgen.call_spec": "`+spec+`"}`)}
	if err := aoti.Available(context.Background()); err != nil {
		t.Logf("not exporting a real package: %v", err)
	} else if testing.Short() {
		t.Log("-short: not exporting a real package")
	} else {
		f, err := aoti.Cached(context.Background(), aoti.Encoder)
		if err != nil {
			t.Fatal(err)
		}
		packages = append(packages, f.Package)
	}
	for _, pkg := range packages {
		manifest := filepath.Join(dir, "manifests", "encoder.yaml")
		os.MkdirAll(filepath.Dir(manifest), 0o755)
		code, out, errs := wfgenRun("import", "-o", manifest, pkg)
		if code != 0 || out != "" || !strings.Contains(errs, "warning: argument normalize was baked in at export as True") {
			t.Fatalf("import %s: exit %d\n%s%s", pkg, code, out, errs)
		}
		data, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"model_family_id: encoder\n", "format: aotinductor", "dim: batch", "shape: [batch, 32]", "artifact_id: norm"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s: manifest lacks %q:\n%s", pkg, want, data)
			}
		}
		if code, vout, verrs := wfgenRun("validate", manifest); code != 0 {
			t.Errorf("validate: exit %d\n%s%s", code, vout, verrs)
		}
		if code, _, errs := wfgenRun("import", "--method", "encode", pkg); code != 1 || !strings.Contains(errs, `whose one method is forward, not "encode"`) {
			t.Errorf("--method encode: exit %d %s", code, errs)
		}
	}
}
