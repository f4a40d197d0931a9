package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSchemaCommand checks that "wfgen schema" prints the checked-in
// schema byte for byte.
func TestSchemaCommand(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "schema", "manifest.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := wfgenRun("schema")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !bytes.Equal([]byte(out), want) {
		t.Error("wfgen schema differs from schema/manifest.schema.json; run: go test ./schema -run TestGenerated -update")
	}
	if code, _, _ := wfgenRun("schema", "extra"); code != 2 {
		t.Errorf("wfgen schema extra: exit %d, want 2", code)
	}
}
