package breaking

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// gitRun runs git in dir with a fixed identity and fails the test on error.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=wfgen test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// goldenInput returns one input manifest of a golden case.
func goldenInput(t testing.TB, name, side, file string) string {
	return readFile(t, filepath.Join("testdata", "golden", name, side, file))
}

// newRepo makes a git repository with two commits:
//
//	HEAD~1: m/demo.yaml (the golden base)
//	HEAD:   + m/other.yaml, m/sub/deep.yml, m/.hidden/skip.yaml,
//	        m/notes.txt, m/broken.yaml (invalid)
//
// and then edits the working tree without committing: demo.yaml loses a
// field, other.yaml is deleted, new.yaml is added.
func newRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	gitRun(t, repo, "init", "-q")
	base := goldenInput(t, "removed", "old", "demo.yaml")
	other := goldenInput(t, "removed", "old", "other.yaml")
	writeFile(t, filepath.Join(repo, "m", "demo.yaml"), base)
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "first")
	writeFile(t, filepath.Join(repo, "m", "other.yaml"), other)
	writeFile(t, filepath.Join(repo, "m", "sub", "deep.yml"), strings.ReplaceAll(other, "model_family_id: other", "model_family_id: deep"))
	writeFile(t, filepath.Join(repo, "m", ".hidden", "skip.yaml"), "not: [a manifest")
	writeFile(t, filepath.Join(repo, "m", "notes.txt"), "not a manifest")
	writeFile(t, filepath.Join(repo, "m", "broken.yaml"), "schema_version: 1\nmodel_family_id: broken\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "second")

	writeFile(t, filepath.Join(repo, "m", "demo.yaml"), goldenInput(t, "allow", "new", "demo.yaml"))
	if err := os.Remove(filepath.Join(repo, "m", "other.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(repo, "m", "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "m", "new.yaml"), strings.ReplaceAll(other, "model_family_id: other", "model_family_id: fresh"))
	return repo
}

func paths(files []*ir.Family) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.File.Path)
	}
	return out
}

func TestLoadGitFolder(t *testing.T) {
	repo := newRepo(t)
	m := filepath.Join(repo, "m")
	before := gitRun(t, repo, "status", "--porcelain")
	files, diags, err := LoadGit(context.Background(), "HEAD", []string{m})
	if err != nil {
		t.Fatal(err)
	}
	// Hidden folders and other extensions are skipped; files are named by
	// their working-tree path, deleted ones included.
	want := []string{filepath.Join(m, "demo.yaml"), filepath.Join(m, "other.yaml"), filepath.Join(m, "sub", "deep.yml")}
	if got := paths(files); !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if len(diags) == 0 || diags[0].File != filepath.Join(m, "broken.yaml") {
		t.Errorf("diags = %v, want the problems of broken.yaml", diags)
	}
	// The revision's content is read, not the working tree's.
	if !strings.Contains(readFile(t, filepath.Join(m, "demo.yaml")), "maximum: 25") {
		t.Fatal("working tree was changed")
	}
	spec := files[0].Spec
	if task, _ := spec.Task("generate"); task == nil || len(task.Inputs) != 6 {
		t.Errorf("demo.yaml at HEAD has %v", task)
	}
	if after := gitRun(t, repo, "status", "--porcelain"); after != before {
		t.Errorf("git status changed:\n%s\nthen\n%s", before, after)
	}

	newFiles, invalid, err := validate.Paths([]string{m})
	if err != nil || len(invalid) > 0 {
		t.Fatal(err, invalid)
	}
	changes, err := Compare(files, newFiles)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, strings.TrimPrefix(c.File, m+string(filepath.Separator))+" "+c.Key())
	}
	want = []string{
		"demo.yaml variant-removed:demo/large",
		"demo.yaml field-removed:demo/generate/seed",
		"demo.yaml choice-removed:demo/generate/style/noir",
		"demo.yaml choice-removed:demo/generate/style/vivid",
		"demo.yaml constraint-narrowed:demo/generate/num_frames/maximum",
		"new.yaml family-added:fresh",
		"other.yaml family-removed:other",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The removed family points into the file it was in.
	for _, c := range changes {
		if c.Rule == RuleFamilyRemoved && (c.Line != 3 || c.Path != "/model_family_id") {
			t.Errorf("family-removed at %d:%d %s", c.Line, c.Column, c.Path)
		}
	}
}

func TestLoadGitRevisionsAndPaths(t *testing.T) {
	repo := newRepo(t)
	t.Chdir(repo)
	ctx := context.Background()

	// A relative file path keeps its spelling; HEAD~1 is read too.
	files, _, err := LoadGit(ctx, "HEAD~1", []string{"m/demo.yaml"})
	if err != nil || len(files) != 1 || files[0].File.Path != filepath.Join("m", "demo.yaml") {
		t.Fatalf("file at HEAD~1: %v %v", paths(files), err)
	}
	// other.yaml did not exist at HEAD~1: nothing, no error.
	files, diags, err := LoadGit(ctx, "HEAD~1", []string{"m/other.yaml", "m/sub"})
	if err != nil || len(files) != 0 || len(diags) != 0 {
		t.Fatalf("paths absent at HEAD~1: %v %v %v", paths(files), diags, err)
	}
	// A path deleted from the working tree is still read from the revision.
	files, _, err = LoadGit(ctx, "HEAD", []string{"m/other.yaml"})
	if err != nil || len(files) != 1 || files[0].Spec.ModelFamilyID != "other" {
		t.Fatalf("deleted file: %v %v", paths(files), err)
	}
	// The repository root as ".", with an explicit file of any extension.
	files, _, err = LoadGit(ctx, "main", []string{".", "m/notes.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(files); !slices.Contains(got, filepath.Join("m", "sub", "deep.yml")) || len(got) != 3 {
		t.Errorf("root: %v", got)
	}
	// A folder that no longer exists in the working tree.
	if err := os.RemoveAll(filepath.Join(repo, "m", "sub")); err != nil {
		t.Fatal(err)
	}
	files, _, err = LoadGit(ctx, "HEAD", []string{"m/sub"})
	if err != nil || len(files) != 1 || files[0].File.Path != filepath.Join("m", "sub", "deep.yml") {
		t.Fatalf("deleted folder: %v %v", paths(files), err)
	}
	// LoadRef picks git when no such file or folder exists.
	files, _, err = LoadRef(ctx, "HEAD~1", []string{"m"})
	if err != nil || len(files) != 1 {
		t.Fatalf("LoadRef git: %v %v", paths(files), err)
	}
}

func TestLoadGitErrors(t *testing.T) {
	repo := newRepo(t)
	ctx := context.Background()
	m := filepath.Join(repo, "m")
	for _, tc := range []struct {
		rev   string
		paths []string
		want  string
	}{
		{"no-such-branch", []string{m}, "neither a file or folder nor a revision"},
		{"--output=x", []string{m}, "must not start with '-'"},
		{"HEAD", []string{t.TempDir()}, "not in a git working tree"},
		{"HEAD", nil, "no manifest paths"},
	} {
		_, _, err := LoadGit(ctx, tc.rev, tc.paths)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadGit(%q, %v) = %v, want %q", tc.rev, tc.paths, err, tc.want)
		}
	}
	if _, _, err := LoadRef(ctx, "", []string{m}); err == nil {
		t.Error("empty ref accepted")
	}
}

func TestCheck(t *testing.T) {
	repo := newRepo(t)
	m := filepath.Join(repo, "m")
	ctx := context.Background()
	allow, err := ParseAllow("*:demo/**")
	if err != nil {
		t.Fatal(err)
	}
	// The old side has a manifest that does not load: the check fails
	// closed, comparing nothing.
	res, err := Check(ctx, Options{Against: "HEAD", Paths: []string{m}, Allow: []Allow{allow}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failing() || len(res.Changes) != 0 || len(res.OldInvalid) == 0 || res.OldSkipped ||
		!strings.HasPrefix(res.OldInvalid[0].Message, "the old side (--against HEAD) does not load: ") {
		t.Errorf("Check with an old manifest that does not load: %+v", res)
	}
	// Skipped on request, its family compares as added.
	res, err = Check(ctx, Options{Against: "HEAD", Paths: []string{m}, Allow: []Allow{allow}, SkipInvalidOld: true})
	if err != nil {
		t.Fatal(err)
	}
	// Only the removal of family "other" is left failing.
	s := res.Summary()
	if !res.Failing() || s.Breaking != 6 || s.Allowed != 5 || len(res.OldInvalid) == 0 || !res.OldSkipped || len(res.Unused) != 0 {
		t.Errorf("Check: %s, old invalid %v, unused %v", s, res.OldInvalid, res.Unused)
	}
	// An invalid new manifest stops the comparison.
	writeFile(t, filepath.Join(m, "bad.yaml"), "schema_version: 1\n")
	res, err = Check(ctx, Options{Against: "HEAD", Paths: []string{m}})
	if err != nil || len(res.Invalid) == 0 || len(res.Changes) != 0 || !res.Failing() {
		t.Errorf("invalid new manifest: %+v %v", res, err)
	}
	// A folder as the old side.
	res, err = Check(ctx, Options{Against: filepath.Join("testdata", "golden", "no-change", "old"), Paths: []string{filepath.Join("testdata", "golden", "no-change", "new")}})
	if err != nil || len(res.Changes) != 0 || res.Failing() {
		t.Errorf("folder ref: %+v %v", res, err)
	}
}

// A revision and a path are never confused: git: and path: say which, and
// a bare argument that names both is refused. The attack this stops: a
// pull request adds a folder named after the CI's --against revision,
// holding its own manifests, so that the comparison finds no change.
func TestRefKinds(t *testing.T) {
	repo := newRepo(t)
	t.Chdir(repo)
	ctx := context.Background()
	gitRun(t, repo, "update-ref", "refs/remotes/origin/main", "HEAD")
	// The decoy: the new manifests copied into ./origin/main.
	for _, name := range []string{"demo.yaml", "new.yaml"} {
		writeFile(t, filepath.Join(repo, "origin", "main", name), readFile(t, filepath.Join(repo, "m", name)))
	}

	// (The repository's old broken.yaml is skipped: this test is about
	// which side is read.)
	res, err := Check(ctx, Options{Against: "git:origin/main", Paths: []string{"m"}, SkipInvalidOld: true})
	if err != nil || !res.Failing() || res.Summary().Breaking == 0 {
		t.Fatalf("git:origin/main: %+v, %v; want the breaking changes against the revision", res, err)
	}
	res, err = Check(ctx, Options{Against: "path:origin/main", Paths: []string{"m"}})
	if err != nil || res.Summary().Breaking != 0 {
		t.Fatalf("path:origin/main: %+v, %v; want the folder compared", res, err)
	}
	_, err = Check(ctx, Options{Against: "origin/main", Paths: []string{"m"}})
	var amb *AmbiguousRefError
	if !errors.As(err, &amb) || !strings.Contains(err.Error(), "git:origin/main") || !strings.Contains(err.Error(), "path:origin/main") {
		t.Fatalf("bare origin/main with a folder of that name: %v; want an AmbiguousRefError naming both prefixes", err)
	}
	// Unambiguous bare arguments keep working.
	if files, _, err := LoadRef(ctx, "HEAD~1", []string{"m"}); err != nil || len(files) != 1 {
		t.Errorf("bare revision: %v %v", paths(files), err)
	}
	if files, _, err := LoadRef(ctx, "origin", []string{"m"}); err != nil || len(files) != 2 {
		t.Errorf("bare folder that is no revision: %v %v", paths(files), err)
	}
	// Errors name the kind.
	for ref, want := range map[string]string{
		"git:":              "empty revision",
		"path:":             "empty path",
		"git:no-such":       "no-such is not a revision",
		"path:no-such-dir":  "no-such-dir",
		"git:--output=x":    "must not start with '-'",
		"git:origin/main~9": "is not a revision",
	} {
		if _, _, err := LoadRef(ctx, ref, []string{"m"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadRef(%q) = %v, want %q", ref, err, want)
		}
	}
}

// Excluded files are left out on both sides, so excluding a file is not
// a removal.
func TestLoaderExclude(t *testing.T) {
	repo := newRepo(t)
	t.Chdir(repo)
	opts := Options{Against: "git:HEAD", Paths: []string{"m"},
		Files: validate.Options{Exclude: func(p string) bool { return strings.HasSuffix(p, "other.yaml") || strings.HasSuffix(p, "broken.yaml") }}}
	res, err := Check(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Changes {
		if c.Rule == RuleFamilyRemoved {
			t.Errorf("an excluded file compared as removed: %v", c)
		}
	}
	if len(res.OldInvalid) != 0 {
		t.Errorf("excluded old file validated: %v", res.OldInvalid)
	}
}
