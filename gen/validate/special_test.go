package validate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// within fails the test when f does not return within
// enginetest.Patience (a blocking open of a named pipe never returns).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{}, 1)
	go func() { f(); done <- struct{}{} }()
	enginetest.Receive(t, what+" (blocked?)", done)
}

// A named pipe (or a symbolic link to one, or to a folder) with a manifest
// extension in a searched folder is reported and skipped; given
// explicitly, it is refused. Nothing blocks.
func TestNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink(fifo, filepath.Join(dir, "to-pipe.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "to-folder.yml")); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	opts := Options{Skipped: func(p string, err error) {
		skipped = append(skipped, filepath.Base(p)+": "+err.Error())
	}}
	within(t, "Paths(folder with a pipe)", func() {
		files, diags, err := opts.Paths([]string{dir})
		if err != nil || len(diags) != 0 || len(files) != 1 {
			t.Errorf("Paths = %d files, %v, %v; want the one good file", len(files), diags, err)
		}
	})
	if len(skipped) != 3 || !strings.Contains(skipped[0], "pipe.yaml: ") || !strings.Contains(skipped[0], "is not a regular file (it is a named pipe)") ||
		!strings.Contains(skipped[1], "to-folder.yml: ") || !strings.Contains(skipped[1], "(it is a folder)") ||
		!strings.Contains(skipped[2], "to-pipe.json: ") || !strings.Contains(skipped[2], "(it is a named pipe)") {
		t.Errorf("skipped = %q", skipped)
	}
	within(t, "Check(folder with a pipe)", func() {
		if n, diags, err := Check([]string{dir}); err != nil || n != 1 || len(diags) != 0 {
			t.Errorf("Check = %d, %v, %v", n, diags, err)
		}
	})
	for _, p := range []string{fifo, filepath.Join(dir, "to-pipe.json"), "/dev/null"} {
		within(t, "Paths("+p+")", func() {
			_, _, err := Paths([]string{p})
			var nr *manifest.NotRegularError
			if !errors.As(err, &nr) {
				t.Errorf("Paths(%s) error = %v, want a NotRegularError", p, err)
			}
		})
	}
}

// Exclude leaves out files found in folders, never files given explicitly.
func TestExclude(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.yaml", "drafts/b.yaml"} {
		p = filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{Exclude: func(p string) bool { return strings.Contains(p, "drafts") }}
	files, diags, err := opts.Paths([]string{dir})
	if err != nil || len(diags) != 0 || len(files) != 1 || filepath.Base(files[0].File.Path) != "a.yaml" {
		t.Errorf("Paths with exclude = %v, %v, %v", files, diags, err)
	}
	files, _, err = opts.Paths([]string{filepath.Join(dir, "drafts", "b.yaml")})
	if err != nil || len(files) != 1 {
		t.Errorf("an explicit file was excluded: %v, %v", files, err)
	}
}
