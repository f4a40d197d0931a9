package breaking

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// BenchmarkCompare compares the old and new manifests of the nine golden
// cases (21 manifests, 82 changes in all) once per iteration.
func BenchmarkCompare(b *testing.B) {
	var olds, news [][]*ir.Family
	dirs, _ := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	for _, d := range dirs {
		o, _, err1 := validate.Paths([]string{filepath.Join(d, "old")})
		n, _, err2 := validate.Paths([]string{filepath.Join(d, "new")})
		if err1 != nil || err2 != nil {
			b.Fatal(err1, err2)
		}
		olds, news = append(olds, o), append(news, n)
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range olds {
			if _, err := Compare(olds[i], news[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLoadGit reads 50 manifests from a git revision (one git ls-tree
// and 50 git show processes per iteration) and validates them.
func BenchmarkLoadGit(b *testing.B) {
	repo := b.TempDir()
	base := goldenInput(b, "removed", "old", "demo.yaml")
	for i := range 50 {
		writeFile(b, filepath.Join(repo, "m", fmt.Sprintf("f%02d.yaml", i)), strings.Replace(base, "model_family_id: demo", fmt.Sprintf("model_family_id: demo%d", i), 1))
	}
	gitRun(b, repo, "init", "-q")
	gitRun(b, repo, "add", ".")
	gitRun(b, repo, "commit", "-q", "-m", "x")
	m := filepath.Join(repo, "m")
	b.ResetTimer()
	for b.Loop() {
		files, diags, err := LoadGit(context.Background(), "HEAD", []string{m})
		if err != nil || len(diags) > 0 || len(files) != 50 {
			b.Fatal(err, diags, len(files))
		}
	}
}
