package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A manifest is read only from inside the tree that holds it, its root:
// the nearest folder at or above the manifest's folder that holds a .git
// or a wfgen.yaml (the repository), or, outside any repository, the folder
// given (for a file, its folder). A symbolic link that leads outside the
// root is refused with an *OutsideError, which quotes nothing of what the
// link points to: a pull request can commit a link to /etc/shadow, and CI
// publishes wfgen's diagnostics.

// RootMarkers are the names whose presence makes a folder a root.
var RootMarkers = []string{".git", "wfgen.yaml"}

// OutsideError is a manifest path that leads (through a symbolic link)
// outside its root.
type OutsideError struct {
	// Path is the path as given.
	Path string
	// Root is the folder the path must stay in.
	Root string
}

// Error names the path and the root, and nothing of the link's target.
func (e *OutsideError) Error() string {
	return fmt.Sprintf("%s is a symbolic link (or lies below one) that leads outside %s; wfgen reads manifests only from inside the repository that holds them (its nearest folder with .git or wfgen.yaml)", e.Path, e.Root)
}

// rootCache remembers the root found for each folder.
var rootCache sync.Map // absolute folder -> root

// RootOf returns the root a manifest file or folder at path is confined
// to, as an absolute, clean path (not resolved through symbolic links:
// the root is where the path lies, not where it leads).
func RootOf(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir := abs
	if st, err := os.Lstat(abs); err != nil || !st.IsDir() {
		dir = filepath.Dir(abs)
	}
	if r, ok := rootCache.Load(dir); ok {
		return r.(string), nil
	}
	root := dir
	for d := dir; ; {
		if marked(d) {
			root = d
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	rootCache.Store(dir, root)
	return root, nil
}

// marked reports whether folder d holds one of RootMarkers.
func marked(d string) bool {
	for _, m := range RootMarkers {
		if _, err := os.Lstat(filepath.Join(d, m)); err == nil {
			return true
		}
	}
	return false
}

// Resolve returns the root of path (see RootOf) and path's name inside it,
// both with every symbolic link resolved, or an *OutsideError when path
// leads outside its root. A path that does not resolve (missing, a
// dangling link, a loop) is the error of resolving it, naming path.
func Resolve(path string) (realRoot, name string, err error) {
	root, err := RootOf(path)
	if err != nil {
		return "", "", err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", pathError(path, err)
	}
	if realRoot, err = filepath.EvalSymlinks(root); err != nil {
		return "", "", err
	}
	r, err := filepath.Rel(realRoot, real)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", "", &OutsideError{Path: path, Root: root}
	}
	return realRoot, r, nil
}

// Inside returns an *OutsideError when path, once its symbolic links are
// resolved, leads outside its root, and nil otherwise (also when path does
// not resolve: opening it reports why).
func Inside(path string) error {
	_, _, err := Resolve(path)
	var oe *OutsideError
	if errors.As(err, &oe) {
		return err
	}
	return nil
}

// pathError names path in err the way os.ReadFile would (an os.Root or
// EvalSymlinks names another path).
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return err
}
