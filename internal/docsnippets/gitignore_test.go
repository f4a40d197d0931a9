package docsnippets

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// goBuildOut finds the binary a doc's `go build -o NAME` writes.
var goBuildOut = regexp.MustCompile("go build [^\n`]*-o ([A-Za-z0-9_.-]+) ")

// TestBuiltBinariesIgnored checks that every binary the README and the docs
// build into the repository's root (`go build -o wfserve ./cmd/wfserve`) is
// ignored by git, so following the docs leaves the work tree clean.
func TestBuiltBinariesIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v", err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--is-inside-work-tree").Output(); err != nil || string(out) != "true\n" {
		t.Skipf("not a git work tree: %v", err)
	}
	seen := map[string]string{}
	for _, p := range pages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBuildOut.FindAllSubmatch(b, -1) {
			seen[string(m[1])] = p
		}
	}
	if len(seen) == 0 {
		t.Fatal("no `go build -o NAME` in the docs: the pattern is stale")
	}
	for name, page := range seen {
		// --no-index: whether the path would be ignored, tracked or not.
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", name).Run(); err != nil {
			t.Errorf("%s builds %s into the repository's root, and git does not ignore it (%v): add /%s to .gitignore", filepath.Base(page), name, err, name)
		}
	}
}
