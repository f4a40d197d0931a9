package enginetest

import (
	"archive/zip"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Checkpoints is a folder of checkpoints built once per test binary, the
// first time a test asks for it, and removed by Main when the tests are
// over. Declare one per set of checkpoints as a package variable:
//
//	var tiny = enginetest.Checkpoints{Name: "tiny", Build: tinymodels.Build}
//
//	func TestMain(m *testing.M) { enginetest.Main(m) }
//
//	func TestX(t *testing.T) { root := tiny.Dir(t); ... }
//
// Tests share the folder: they must not change what is in it. A test whose
// clients must not share modules with other tests' — clients cache loaded
// modules by checkpoint path, whatever engine loaded them, so a client on
// the fake engine needs paths of its own — takes a Copy (or builds a file
// of its own with Fresh).
//
// The same holds for anything else a package's tests build once, such as a
// command's executable.
type Checkpoints struct {
	// Name names the temporary folder (wfgen-<Name>-*).
	Name string
	// Build writes the checkpoints into dir.
	Build func(dir string) error

	once sync.Once
	dir  string
	err  error
}

var (
	dirsMu sync.Mutex
	dirs   []string
)

// Dir returns the folder, building it on the first call; a failed build
// fails every test that asks.
func (c *Checkpoints) Dir(t testing.TB) string {
	t.Helper()
	c.once.Do(func() {
		c.dir, c.err = os.MkdirTemp("", "wfgen-"+c.Name+"-")
		if c.err != nil {
			return
		}
		dirsMu.Lock()
		dirs = append(dirs, c.dir)
		dirsMu.Unlock()
		c.err = c.Build(c.dir)
	})
	if c.err != nil {
		t.Fatalf("building the %s checkpoints: %v", c.Name, c.err)
	}
	return c.dir
}

// Path returns the file name in the folder, building it first.
func (c *Checkpoints) Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(c.Dir(t), name)
}

// Copy returns a copy of the folder in the test's temporary folder (files
// hard-linked where the file system allows): the same checkpoints at paths
// no other test uses.
func (c *Checkpoints) Copy(t testing.TB) string {
	t.Helper()
	src := c.Dir(t)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if os.Link(path, to) == nil {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying the %s checkpoints: %v", c.Name, err)
	}
	return dst
}

// Fresh builds a checkpoint of the test's own into its temporary folder
// (file name name) and returns its path: for a test that must not share a
// module another test has loaded (clients cache modules by path).
func Fresh(t testing.TB, name string, build func(path string) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := build(path); err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return path
}

// Main runs the tests, removes the folders of every Checkpoints they
// built and exits with the tests' code: a package whose tests use
// Checkpoints calls it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes the folders of every Checkpoints built so far, for a
// TestMain that does more than Main.
func Cleanup() {
	dirsMu.Lock()
	defer dirsMu.Unlock()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	dirs = nil
}

// ZipFile writes a zip of empty files with the given names (paths inside
// the zip) to a file named name in a temporary folder of t, and returns
// its path: the layout of a checkpoint archive without its contents, which
// is what engine.DetectFormat reads.
func ZipFile(t testing.TB, name string, names ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := zip.NewWriter(f)
	for _, n := range names {
		if _, err := w.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
