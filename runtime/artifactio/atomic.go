package artifactio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// fileMode is the permission of written files and folders' files.
const fileMode = 0o644

// WriteFileAtomic writes path through write: the bytes go to a temporary file
// in the same folder (mode 0644), which is synced and renamed over path only when write
// and every flush succeeded. On failure the temporary file is removed and
// path is left as it was.
func WriteFileAtomic(path string, write func(w io.Writer) error) (err error) {
	if path == "" {
		return errors.New("empty output path")
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" {
		return fmt.Errorf("%s: output path names a folder, want a file", path)
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(fileMode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return nil
}

// writeDirAtomic fills a new folder through fill (which gets the folder's
// path) and then puts it at dir. If dir exists it must be a folder holding
// only entries for which owned returns true (output of an earlier write);
// it is replaced as a whole. On failure dir is left as it was and the
// temporary folder is removed.
func writeDirAtomic(dir string, owned func(name string) bool, fill func(tmp string) error) (err error) {
	if dir == "" {
		return errors.New("empty output folder")
	}
	dir = filepath.Clean(dir)
	parent, base := filepath.Split(dir)
	if parent == "" {
		parent = "."
	}
	if base == "." || base == ".." || base == "" {
		return fmt.Errorf("%s: cannot write frames into this folder name; name a folder", dir)
	}
	old, statErr := os.Lstat(dir)
	switch {
	case statErr == nil && !old.IsDir():
		return fmt.Errorf("%s exists and is not a folder", dir)
	case statErr == nil:
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !owned(e.Name()) || !e.Type().IsRegular() {
				return fmt.Errorf("%s holds %q, which is not a frame file; refusing to replace the folder", dir, e.Name())
			}
		}
	case !errors.Is(statErr, os.ErrNotExist):
		return statErr
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err = fill(tmp); err != nil {
		return err
	}
	if err = os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if statErr != nil { // no folder yet: one rename
		return os.Rename(tmp, dir)
	}
	// Replace the earlier output: move it aside, move the new folder in,
	// then delete the old one.
	aside, err := os.MkdirTemp(parent, "."+base+".old-*")
	if err != nil {
		return err
	}
	if err = os.Remove(aside); err != nil {
		return err
	}
	if err = os.Rename(dir, aside); err != nil {
		return err
	}
	if err = os.Rename(tmp, dir); err != nil {
		if back := os.Rename(aside, dir); back != nil {
			return fmt.Errorf("%w (and restoring the earlier folder from %s failed: %v)", err, aside, back)
		}
		return err
	}
	return os.RemoveAll(aside)
}
