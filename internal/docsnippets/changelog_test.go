package docsnippets

import (
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rewriteLoop is one loop of the changelog's gofmt -r recipe: the names
// and the package they moved to.
var rewriteLoop = regexp.MustCompile(`(?m)^for n in ([A-Za-z0-9 ]+); do gofmt -r "runtime\.\$n -> (\w+)\.\$n" -w \$files; done$`)

// TestChangelogRewrite checks the changelog's recipe for the runtime split
// against the packages: every name it rewrites exists, exported, in the
// package it rewrites it to, no name is rewritten twice, and the rewrite
// is limited to the files that import the old package (Go's own runtime
// has a Stack and a Compiler). The recipe was run for real on a
// downstream module (see the changelog); this keeps its lists true.
func TestChangelogRewrite(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.Contains(text, `files=$(grep -rl --include='*.go' '"github.com/worldfoundry/wfgen/runtime"' .)`) {
		t.Error("the recipe does not limit the rewrite to the files that import the old package")
	}
	loops := rewriteLoop.FindAllStringSubmatch(text, -1)
	if len(loops) != 3 {
		t.Fatalf("found %d rewrite loops, want 3 (spec, tensor, engine)", len(loops))
	}
	paths := map[string]bool{}
	for _, l := range loops {
		paths["github.com/worldfoundry/wfgen/runtime/"+l[2]] = true
	}
	imp := exportImporter(t, paths)(token.NewFileSet())
	seen := map[string]string{}
	for _, l := range loops {
		pkg, err := imp.Import("github.com/worldfoundry/wfgen/runtime/" + l[2])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range strings.Fields(l[1]) {
			if prev, ok := seen[n]; ok {
				t.Errorf("%s is rewritten to %s and to %s", n, prev, l[2])
			}
			seen[n] = l[2]
			if obj := pkg.Scope().Lookup(n); obj == nil || !obj.Exported() {
				t.Errorf("the recipe rewrites runtime.%s to %s.%s, which does not exist", n, l[2], n)
			}
		}
	}
	// The list of moved names below the recipe says the same.
	for n, p := range seen {
		if !strings.Contains(text, "- `"+p+"`: ") || !regexp.MustCompile("(?m)^- `"+p+"`: .*`"+n+"`").MatchString(text) {
			t.Errorf("%s.%s is rewritten but not listed under %s", p, n, p)
		}
	}
}
