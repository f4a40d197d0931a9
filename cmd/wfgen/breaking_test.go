package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// breakingCase returns the old and new folders of a golden case of
// gen/breaking.
func breakingCase(name string) (string, string) {
	dir := filepath.Join("..", "..", "gen", "breaking", "testdata", "golden", name)
	return filepath.Join(dir, "old"), filepath.Join(dir, "new")
}

func TestBreakingExitCodesAndOutput(t *testing.T) {
	oldNC, newNC := breakingCase("no-change")
	code, out, errs := wfgenRun("breaking", "--against", oldNC, newNC)
	if code != 0 || out != "" || errs != "" {
		t.Errorf("no change: exit %d, stdout %q, stderr %q; want 0 and no output", code, out, errs)
	}
	for _, f := range []string{"json", "github"} {
		if code, out, errs := wfgenRun("breaking", "--format", f, "--against", oldNC, newNC); code != 0 || out != "" || errs != "" {
			t.Errorf("no change, %s: exit %d, %q %q", f, code, out, errs)
		}
	}

	oldR, newR := breakingCase("removed")
	code, out, errs = wfgenRun("breaking", "--against", oldR, newR)
	if code != 1 || !strings.Contains(out, "breaking: family \"demo\" task \"generate\": field \"seed\" removed (field-removed:demo/generate/seed)") {
		t.Errorf("removed: exit %d\n%s", code, out)
	}
	if !strings.Contains(errs, "10 breaking, 0 behavioural, 0 additive change(s)") {
		t.Errorf("removed: summary %q", errs)
	}

	// Allowing every breaking change of the case passes; flags may follow paths.
	code, out, errs = wfgenRun("breaking", "--against", oldR, newR, "--allow", "*:demo/**", "--allow", "family-removed:other", "--allow", "task-removed:nope")
	if code != 0 || strings.Count(out, "; allowed: --allow") != 10 {
		t.Errorf("allowed: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "--allow task-removed:nope matched no breaking change") {
		t.Errorf("no warning for an unused rule: %q", errs)
	}

	oldD, newD := breakingCase("deprecated")
	code, out, _ = wfgenRun("breaking", "--format", "json", "--against", oldD, newD)
	var changes []struct {
		File, Path, Message, Class, Rule, Subject, Allowed string
		Line, Column                                       int
	}
	if err := json.Unmarshal([]byte(out), &changes); err != nil || code != 0 || len(changes) != 5 {
		t.Fatalf("deprecated json: exit %d, %v\n%s", code, err, out)
	}
	for _, c := range changes {
		if c.Class != "breaking" || !strings.Contains(c.Allowed, "deprecated in the old manifest") || c.Line < 1 {
			t.Errorf("deprecated json change: %+v", c)
		}
	}

	oldB, newB := breakingCase("behavioural")
	code, out, _ = wfgenRun("breaking", "--format", "github", "--against", oldB, newB)
	if code != 0 || !strings.HasPrefix(out, "::warning file=") || strings.Contains(out, "::error") {
		t.Errorf("behavioural github: exit %d\n%s", code, out)
	}
	code, out, _ = wfgenRun("breaking", "--format", "github", "--against", oldR, newR)
	if code != 1 || strings.Count(out, "::error file=") != 10 {
		t.Errorf("removed github: exit %d\n%s", code, out)
	}
}

func TestBreakingUsageErrors(t *testing.T) {
	oldR, newR := breakingCase("removed")
	oldR, _ = filepath.Abs(oldR)
	newR, _ = filepath.Abs(newR)
	t.Chdir(t.TempDir()) // no wfgen.yaml (this repository's would give the paths)
	for _, args := range [][]string{
		{"breaking", newR},                                            // no --against
		{"breaking", "--against", oldR},                               // no path
		{"breaking", "--format", "xml", "--against", oldR, newR},      // bad format
		{"breaking", "--allow", "renamed:x", "--against", oldR, newR}, // unknown rule
		{"breaking", "--against", "no-such-ref-or-dir", newR},
		{"breaking", "--against", oldR, filepath.Join(newR, "missing.yaml")},
	} {
		code, out, errs := wfgenRun(args...)
		if code != 2 || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errs)
		}
	}
}

func TestBreakingInvalidNewManifest(t *testing.T) {
	oldR, _ := breakingCase("removed")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("schema_version: 1\nmodel_family_id: Bad Id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := wfgenRun("breaking", "--against", oldR, bad)
	if code != 1 || !strings.HasPrefix(out, bad+":") || !strings.Contains(errs, "nothing compared") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}

// TestBreakingAgainstGitRevision runs the command the CI step in
// docs/ci.md runs, in a real repository with a branch to compare against.
func TestBreakingAgainstGitRevision(t *testing.T) {
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
	copyFile := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(oldD, "demo.yaml"), filepath.Join(repo, "manifests", "demo.yaml"))
	gitc("init", "-q", "-b", "main")
	gitc("add", ".")
	gitc("commit", "-q", "-m", "base")
	gitc("checkout", "-q", "-b", "feature")
	copyFile(filepath.Join(newD, "demo.yaml"), filepath.Join(repo, "manifests", "demo.yaml"))
	gitc("commit", "-q", "-am", "remove things")
	t.Chdir(repo)

	code, out, errs := wfgenRun("breaking", "--against", "main", "manifests")
	if code != 1 || !strings.HasPrefix(out, filepath.Join("manifests", "demo.yaml")+":") || strings.Count(out, "\n") != 9 {
		t.Errorf("against main: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = wfgenRun("breaking", "--against", "HEAD", "manifests")
	if code != 0 || out != "" || errs != "" {
		t.Errorf("against HEAD: exit %d, %q %q", code, out, errs)
	}
}

// A pull request that adds a folder named after the revision CI compares
// against cannot make a breaking change pass: the documented step names
// the revision with git:, and a bare argument that is both is refused.
func TestBreakingFolderNamedAfterTheRef(t *testing.T) {
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
	put := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeText(t, to, string(data))
	}
	put(filepath.Join(oldD, "demo.yaml"), filepath.Join(repo, "manifests", "demo.yaml"))
	gitc("init", "-q", "-b", "main")
	gitc("add", ".")
	gitc("commit", "-q", "-m", "base")
	gitc("update-ref", "refs/remotes/origin/main", "HEAD")
	gitc("checkout", "-q", "-b", "pr")
	put(filepath.Join(newD, "demo.yaml"), filepath.Join(repo, "manifests", "demo.yaml"))
	// The decoy: the new manifest again, in a folder named origin/main.
	put(filepath.Join(newD, "demo.yaml"), filepath.Join(repo, "origin", "main", "demo.yaml"))
	gitc("add", ".")
	gitc("commit", "-q", "-m", "break things, add a decoy")
	t.Chdir(repo)

	code, out, errs := wfgenRun("breaking", "--format", "github", "--against", "git:origin/main", "manifests/")
	if code != 1 || strings.Count(out, "::error file=") != 9 {
		t.Errorf("--against git:origin/main: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = wfgenRun("breaking", "--against", "origin/main", "manifests/")
	if code != 2 || out != "" || !strings.Contains(errs, "write git:origin/main for the revision or path:origin/main for the folder") {
		t.Errorf("bare --against origin/main: exit %d, %q, %q; want 2 and the prefixes", code, out, errs)
	}
	if code, _, errs := wfgenRun("breaking", "--against", "path:origin/main", "manifests/"); code != 0 {
		t.Errorf("--against path:origin/main: exit %d, %s", code, errs)
	}
}
