package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// pkgDir is this package's folder (tests change the working folder).
var pkgDir, _ = os.Getwd()

// wfgenBin holds the wfgen executable, built once per test run (with VCS
// stamping, as go build in a checkout does) and removed at the end.
var wfgenBin = enginetest.Checkpoints{Name: "wfgen-bin", Build: func(dir string) error {
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "wfgen"), ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}}

func TestMain(m *testing.M) { enginetest.Main(m) }

// builtWfgen returns the wfgen executable, built once.
func builtWfgen(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds wfgen")
	}
	return wfgenBin.Path(t, "wfgen")
}

func TestHelpForEveryCommand(t *testing.T) {
	for name := range commands {
		for _, args := range [][]string{{"help", name}, {name, "--help"}, {name, "-h"}} {
			code, out, errs := wfgenRun(args...)
			if code != 0 || !strings.HasPrefix(out, "usage: wfgen "+name) || errs != "" {
				t.Errorf("wfgen %v: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", args, code, out, errs)
			}
		}
	}
	if code, out, _ := wfgenRun("help", "generate"); !strings.Contains(out, "\nflags:\n") || !strings.Contains(out, "-check") || code != 0 {
		t.Errorf("help generate lacks the flags:\n%s", out)
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		if code, out, _ := wfgenRun(args...); code != 0 || !strings.Contains(out, "commands:") || !strings.Contains(out, "version") {
			t.Errorf("wfgen %v: exit %d, %q", args, code, out)
		}
	}
	for _, args := range [][]string{{}, {"help", "nope"}, {"help", "a", "b"}, {"nope"}} {
		if code, out, errs := wfgenRun(args...); code != 2 || out != "" || errs == "" {
			t.Errorf("wfgen %v: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", args, code, out, errs)
		}
	}
	// A usage error prints the error and the usage on stderr, exit 2.
	code, out, errs := wfgenRun("validate", "--bogus")
	if code != 2 || out != "" || !strings.Contains(errs, "flag provided but not defined: -bogus") || !strings.Contains(errs, "usage: wfgen validate") {
		t.Errorf("bad flag: exit %d, %q, %q", code, out, errs)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := wfgenRun(args...)
		if code != 0 || !strings.HasPrefix(out, "wfgen ") || !strings.Contains(out, "built with go") {
			t.Errorf("wfgen %v: exit %d, %q", args, code, out)
		}
	}
	if code, _, _ := wfgenRun("version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d", code)
	}
	// As a dependency of another module (go tool, go run in a downstream
	// module), the wfgen module's version is reported.
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
		Deps:     []*debug.Module{{Path: modulePath, Version: "v1.4.0"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionText(bi)
	if !strings.HasPrefix(got, "wfgen v1.4.0\nrevision abc123 2026-01-02T03:04:05Z (modified)\nbuilt with go1.26.8 ") {
		t.Errorf("versionText = %q", got)
	}
	// A real build prints what go version -m reads from it: the revision
	// when the build recorded one (go build in a git checkout does; in a
	// git worktree, whose .git is a file, the go command records none).
	exe := builtWfgen(t)
	out, err := exec.Command(exe, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	meta, err := exec.Command("go", "version", "-m", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "wfgen (devel)\n"
	for _, line := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			want += "revision " + strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "built with go") {
		t.Errorf("built wfgen version:\n%s\nwant it to start with %q (go version -m:\n%s)", out, want, meta)
	}
}

// Flags may follow the paths, for every command; "--" ends the flags.
func TestFlagsAfterPaths(t *testing.T) {
	manifests := filepath.Join("..", "..", "manifests")
	code, out, errs := wfgenRun("validate", manifests, "--format", "json")
	var diags []any
	if code != 0 || json.Unmarshal([]byte(out), &diags) != nil || len(diags) != 0 {
		t.Errorf("validate manifests --format json: exit %d, %q, %q", code, out, errs)
	}
	code, out, _ = wfgenRun("validate", manifests, "--format=github")
	if code != 0 || out != "" {
		t.Errorf("validate manifests --format=github: exit %d, %q", code, out)
	}
	// A manifest whose name starts with '-' after "--".
	dir := t.TempDir()
	t.Chdir(dir)
	data, err := os.ReadFile(filepath.Join(goldenDir, "kinds", "input", "kinds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("-m.yaml", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := wfgenRun("validate", "--format", "json", "--", "-m.yaml"); code != 0 || out != "[]\n" {
		t.Errorf("validate -- -m.yaml: exit %d, %q, %q", code, out, errs)
	}
	// A flag value "--" is a value, not the end of the flags.
	if code, _, errs := wfgenRun("generate", "-o", "--", "--check", "--", "-m.yaml"); code != 1 || !strings.Contains(errs, "out of date: 0 changed, 2 missing") {
		t.Errorf("generate -o -- --check -- -m.yaml: exit %d, %q", code, errs)
	}
	if code, _, errs := wfgenRun("validate", "--", "--format"); code != 2 || !strings.Contains(errs, "--format") {
		t.Errorf("validate -- --format: exit %d, %q; want the path --format reported missing", code, errs)
	}
}

// splitAtTerminator knows which flags take a value.
func TestSplitAtTerminator(t *testing.T) {
	fs := newFlags("x", nil)
	fs.String("o", "", "")
	fs.Bool("check", false, "")
	for _, c := range []struct {
		args, flags, rest []string
	}{
		{[]string{"a", "--", "-b"}, []string{"a"}, []string{"-b"}},
		{[]string{"-o", "--", "a"}, []string{"-o", "--", "a"}, nil},
		{[]string{"--check", "--", "-o"}, []string{"--check"}, []string{"-o"}},
		{[]string{"-o=x", "--", "--"}, []string{"-o=x"}, []string{"--"}},
	} {
		f, r := splitAtTerminator(fs, c.args)
		if strings.Join(f, " ") != strings.Join(c.flags, " ") || strings.Join(r, " ") != strings.Join(c.rest, " ") {
			t.Errorf("split(%q) = %q, %q; want %q, %q", c.args, f, r, c.flags, c.rest)
		}
	}
}

func TestSchemaToFile(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "schema", "manifest.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "manifest.schema.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := wfgenRun("schema", "-o", p)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("schema -o: exit %d, %q, %q", code, out, errs)
	}
	if got, _ := os.ReadFile(p); string(got) != string(want) {
		t.Error("schema -o wrote something else than the schema")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if code, _, _ := wfgenRun("schema", "-o", filepath.Join(dir, "missing", "x.json")); code != 2 {
		t.Errorf("schema -o into a missing folder: exit %d", code)
	}
}
