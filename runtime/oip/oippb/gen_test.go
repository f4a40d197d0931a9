package oippb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the Go files from the .proto
// files (go generate's command, into a temporary folder) and compares them
// with the committed ones. It needs protoc (Debian's protobuf-compiler,
// which scripts/setup.sh installs) and the module proxy or cache for the
// two plugins go.mod pins.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the protoc plugins")
	}
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc is not installed (apt-get install protobuf-compiler, or scripts/setup.sh); the generated files are not checked")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/protogen", "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/protogen: %v\n%s", err, b)
	}
	gen, err := filepath.Glob(filepath.Join(out, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob("*.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(gen) != len(committed) {
		t.Errorf("protoc writes %d files, %d are committed", len(gen), len(committed))
	}
	for _, f := range gen {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Base(f))
		if err != nil {
			t.Errorf("%s is not committed: run go generate in runtime/oip/oippb", filepath.Base(f))
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what its .proto gives: run go generate in runtime/oip/oippb", filepath.Base(f))
		}
	}
}
