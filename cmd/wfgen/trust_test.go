package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// secret is what a file outside the repository holds; no output of wfgen
// may contain any part of it.
const secret = "root:$6$S3CRETsalt$S3CRETHASH:19000:0:99999:7:::\nS3CRETkey: S3CRETvalue\n"

// leakRepo makes a git repository whose manifests folder holds symbolic
// links out of it: a file link (relative and absolute) to a password-style
// file and a folder link, and returns the repository and the secret file.
func leakRepo(t *testing.T) (repo, secretFile string) {
	t.Helper()
	base := t.TempDir()
	secretFile = filepath.Join(base, "shadow")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	outsideDir := filepath.Join(base, "elsewhere")
	if err := os.MkdirAll(outsideDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outsideDir, "x.yaml"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	repo = filepath.Join(base, "leak")
	m := filepath.Join(repo, "m")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(m, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"s.yaml":   filepath.Join("..", "..", "shadow"),
		"abs.yaml": secretFile,
		"d.yaml":   outsideDir, // a folder with a manifest's name
		"sub":      outsideDir,
	} {
		if err := os.Symlink(target, filepath.Join(m, name)); err != nil {
			t.Fatal(err)
		}
	}
	return repo, secretFile
}

// A symbolic link committed into a repository cannot make wfgen print what
// it points to (issue 32, item 1): validate, breaking --against path:,
// and an explicit argument all refuse it at the link, quoting nothing.
func TestSymlinksOutOfTheRepositoryLeakNothing(t *testing.T) {
	repo, secretFile := leakRepo(t)
	t.Chdir(repo)
	for _, args := range [][]string{
		{"validate", "--format", "github", "m"},
		{"validate", "--format", "json", "m"},
		{"validate", "m/s.yaml", "m/abs.yaml"},
		{"validate", "m/sub"},
		{"breaking", "--format", "github", "--against", "path:m", "m/s.yaml"},
		{"breaking", "--format", "github", "--skip-invalid-old", "--against", "path:m", "m/s.yaml"},
	} {
		code, out, errs := wfgenRun(args...)
		if strings.Contains(out+errs, "S3CRET") || strings.Contains(out+errs, "root:") {
			t.Errorf("wfgen %v printed the linked file's content:\n%s%s", args, out, errs)
		}
		if code != 1 || !strings.Contains(out, "leads outside "+repo) {
			t.Errorf("wfgen %v: exit %d, want 1 and a diagnostic at the link:\n%s%s", args, code, out, errs)
		}
	}
	code, out, _ := wfgenRun("validate", "--format", "github", "m")
	for _, name := range []string{"s.yaml", "abs.yaml"} {
		if !strings.Contains(out, "::error file=m/"+name+",line=1,col=1::m/"+name+" is a symbolic link") {
			t.Errorf("exit %d; no annotation at m/%s:\n%s", code, name, out)
		}
	}
	if strings.Contains(out, secretFile) {
		t.Errorf("the annotation names the link's target:\n%s", out)
	}
}

// breaking fails closed (issue 32, item 2): an old manifest that does not
// load (a leftover merge marker) is exit 1 with an annotation at the file,
// not a "family added" that lets a removed field through; the
// --skip-invalid-old flag compares without it, and says so in the
// annotations too.
func TestBreakingFailsClosedOnAnOldManifestThatDoesNotLoad(t *testing.T) {
	repo := t.TempDir()
	gitc := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	oldD, newD := breakingCase("removed")
	old, err := os.ReadFile(filepath.Join(oldD, "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := os.ReadFile(filepath.Join(newD, "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(repo, "manifests", "demo.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// The base revision holds the manifest with a merge conflict left in.
	if err := os.WriteFile(p, append([]byte("<<<<<<< HEAD\n"), old...), 0o644); err != nil {
		t.Fatal(err)
	}
	gitc("init", "-q", "-b", "main")
	gitc("add", ".")
	gitc("commit", "-q", "-m", "base")
	gitc("checkout", "-q", "-b", "feature")
	if err := os.WriteFile(p, newer, 0o644); err != nil {
		t.Fatal(err)
	}
	gitc("commit", "-q", "-am", "remove things")
	t.Chdir(repo)

	code, out, errs := wfgenRun("breaking", "--format", "github", "--against", "git:main", "manifests")
	if code != 1 || !strings.HasPrefix(out, "::error file=manifests/demo.yaml,line=") || !strings.Contains(out, "the old side (--against git:main) does not load") ||
		strings.Contains(out, "added") || !strings.Contains(errs, "--skip-invalid-old") {
		t.Errorf("exit %d, want 1 and an annotation at the old manifest:\n%s%s", code, out, errs)
	}
	code, out, errs = wfgenRun("breaking", "--format", "github", "--skip-invalid-old", "--against", "git:main", "manifests")
	if code != 0 || !strings.Contains(out, "::warning file=manifests/demo.yaml,") || !strings.Contains(errs, "not compared") {
		t.Errorf("--skip-invalid-old: exit %d, want 0 and a warning annotation:\n%s%s", code, out, errs)
	}
}

// Hints name the command the user ran (issue 32, item 5): a binary built
// into /tmp is run as built, a go tool build in a module with the tool
// line is "go tool wfgen", and only a go run build elsewhere is go run.
func TestHintsNameTheCommandTheUserRan(t *testing.T) {
	for exe, want := range map[string]bool{
		filepath.Join(os.TempDir(), "wfgen"):                                false,
		filepath.Join(os.TempDir(), "bin", "wfgen"):                         false,
		filepath.Join(os.TempDir(), "go-build1234", "b001", "exe", "wfgen"): true,
	} {
		if got := transientBuild(exe); got != want {
			t.Errorf("transientBuild(%s) = %v, want %v", exe, got, want)
		}
	}
	// The test binary is a go test build: with the tool line in the
	// working folder's module, hints say go tool.
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n\ntool "+modulePath+"/cmd/wfgen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mod, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(mod, "sub"))
	if got := selfCommand(); got != "go tool wfgen" {
		t.Errorf("in a module with the tool line: %q, want go tool wfgen", got)
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := selfCommand(); got != "go run "+modulePath+"/cmd/wfgen" {
		t.Errorf("in a module without it: %q", got)
	}
}
