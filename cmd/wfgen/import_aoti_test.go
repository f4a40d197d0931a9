package main

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/aoti"
)

// TestImportAOTIPackage builds wfgen with -tags torch and imports an
// AOTInductor package: with libtorch ≥ 2.6 the exported encoder becomes a
// manifest from its call spec (format, fields, dtypes, shapes, batch
// range) that validates; before 2.6 a package is refused with the version.
func TestImportAOTIPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds wfgen with libtorch")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wfgen")
	if out, err := exec.Command("go", "build", "-tags", "torch", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags torch: %v\n%s", err, out)
	}
	wfgen := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stdout.String(), stderr.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, stdout.String(), stderr.String()
	}

	// A zip with an AOTInductor package's layout: refused before 2.6.
	fake := filepath.Join(dir, "fake.pt2")
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, name := range []string{"version", "data/aotinductor/model/x.so", "data/aotinductor/model/x_metadata.json"} {
		w.Create(name)
	}
	w.Close()
	if err := os.WriteFile(fake, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := wfgen("import", fake)
	if code != 1 {
		t.Fatalf("fake package: exit %d: %s", code, errs)
	}
	if strings.Contains(errs, "AOTInductor packages need libtorch ≥ 2.6 (this engine was built against 1.") {
		t.Skip("libtorch before 2.6 refuses packages, as it should; the import itself runs in make test-libtorch2")
	}

	f, err := aoti.Cached(context.Background(), aoti.Encoder)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "manifests", "encoder.yaml")
	os.MkdirAll(filepath.Dir(manifest), 0o755)
	code, out, errs := wfgen("import", "-o", manifest, f.Package)
	if code != 0 || out != "" || !strings.Contains(errs, "warning: argument normalize was baked in at export as True") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model_family_id: encoder\n", "format: aotinductor", "dim: batch", "shape: [batch, 32]", "artifact_id: norm"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("manifest lacks %q:\n%s", want, data)
		}
	}
	if code, vout, verrs := wfgenRun("validate", manifest); code != 0 {
		t.Errorf("validate: exit %d\n%s%s", code, vout, verrs)
	}
	if code, _, errs := wfgen("import", "--method", "encode", f.Package); code != 1 || !strings.Contains(errs, `whose one method is forward, not "encode"`) {
		t.Errorf("--method encode: exit %d %s", code, errs)
	}
}
