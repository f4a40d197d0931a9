package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Generated files keep LF line endings (they are compared byte for byte)
// and are marked generated for GitHub; hand-written files beside them are
// not.
func TestGitAttributes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	check := func(p string) map[string]string {
		cmd := exec.Command("git", "check-attr", "eol", "text", "linguist-generated", "--", p)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git check-attr %s: %v", p, err)
		}
		attrs := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// "path: attr: value"
			parts := strings.SplitN(line, ": ", 3)
			if len(parts) == 3 {
				attrs[parts[1]] = parts[2]
			}
		}
		return attrs
	}
	for _, p := range []string{
		"generated/tinyworld/tinyworld.go",
		"generated/.wfgen-generate",
		"golden/stream/output/goldenstream/goldenstream.go",
		"golden/stream/docs/goldenstream.md",
		"golden/err-invalid/error.txt",
		"schema/manifest.schema.json",
	} {
		a := check(p)
		if a["eol"] != "lf" || a["text"] != "set" || a["linguist-generated"] != "true" {
			t.Errorf("%s: %v; want eol lf, text set, linguist-generated true", p, a)
		}
	}
	for _, p := range []string{
		"generated/generate.go",
		"golden/stream/output/goldenstream/behaviour_test.go",
		"cmd/wfgen/main.go",
		"manifests/tiny-world.yaml",
	} {
		if a := check(p); a["linguist-generated"] == "true" {
			t.Errorf("%s is hand-written but marked generated: %v", p, a)
		}
	}
}
