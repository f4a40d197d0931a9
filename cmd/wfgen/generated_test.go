package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedIsCurrent fails when generated/ (the aggregate package
// generated/all included) is stale versus manifests/: it runs what "make
// check" runs, "wfgen generate --check" with this repository's wfgen.yaml,
// from the root and from generated/.
func TestGeneratedIsCurrent(t *testing.T) {
	t.Setenv("WFGEN_CACHE", "off")
	for _, dir := range []string{repoRoot, filepath.Join(repoRoot, "generated")} {
		t.Chdir(dir)
		code, out, errs := wfgen("generate", "--check")
		if code != 0 {
			t.Errorf("in %s: generate --check: exit %d; run make generate\n%s%s", dir, code, out, errs)
		}
	}
	// The check covered generated/all: the record it compared lists it.
	rec, err := os.ReadFile(filepath.Join(repoRoot, "generated", ".wfgen-generate"))
	if err != nil || !strings.Contains(string(rec), "\n\"all/all.go\" \"../wfgen.yaml\"\n") {
		t.Errorf("generated/.wfgen-generate does not list generated/all: %v\n%s", err, rec)
	}
}
