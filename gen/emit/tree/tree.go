// Package tree applies a set of generated files to an output folder: it
// writes only files whose bytes change (so unchanged files keep their
// modification time), checks a folder without writing, and cleans files a
// generator produced earlier but no longer produces.
//
// Every file operation goes through an os.Root opened on the output folder,
// so no path — not even one reached through a symbolic link — can read,
// write or remove anything outside it.
package tree

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/worldfoundry/wfgen/gen/emit/udiff"
)

// Files maps slash-separated paths relative to the output folder to their
// contents. It is a Source.
type Files map[string][]byte

// Source is the set of files a generator produces. Write and Check ask for
// each file's bytes once, in the sorted order of Paths, and drop them when
// done with them, so a Source that renders on demand keeps a run over many
// inputs to a few files in memory at a time.
type Source interface {
	// Paths lists every output path: slash-separated, relative to the
	// output folder.
	Paths() []string
	// Content returns the bytes of one of Paths.
	Content(p string) ([]byte, error)
}

// Paths lists the files' paths.
func (f Files) Paths() []string {
	out := make([]string, 0, len(f))
	for p := range f {
		out = append(out, p)
	}
	return out
}

// Content returns the bytes of path p.
func (f Files) Content(p string) ([]byte, error) {
	b, ok := f[p]
	if !ok {
		return nil, fmt.Errorf("tree: no file %s", p)
	}
	return b, nil
}

// pathSet is the set of a Source's paths.
type pathSet map[string]bool

// Options configure Write and Check.
type Options struct {
	// Owned reports whether an existing file was produced by this generator
	// (it recognises the generator's header). Only owned files are ever
	// reported stale or removed. Required.
	Owned func(content []byte) bool
	// Ext limits the stale-file search to names with this suffix (".go").
	Ext string
	// Clean removes stale files in Write.
	Clean bool
	// Record, when set, keeps the record of what was written (see Record),
	// and only files it lists for a covered source are ever stale. Without
	// a record every owned file with the extension that files does not
	// hold is stale: that is only right for a folder the caller owns
	// entirely, such as a test's.
	Record *Record
}

// Report says what Write did or what Check found. Paths are relative to the
// output folder, slash-separated and sorted.
type Report struct {
	// Created are files that did not exist (Check: missing).
	Created []string
	// Updated are files whose contents changed (Check: differ).
	Updated []string
	// Unchanged are files that already held the right bytes.
	Unchanged []string
	// Stale are owned files that no input produces any more.
	Stale []string
	// Removed are the stale files Write deleted (with Clean).
	Removed []string
	// Diff is the unified diff of every file in Updated (Check only).
	Diff string
}

// Written is the number of files Write wrote.
func (r Report) Written() int { return len(r.Created) + len(r.Updated) }

// Current reports whether the folder matched the files: nothing missing,
// changed or stale.
func (r Report) Current() bool {
	return len(r.Created) == 0 && len(r.Updated) == 0 && len(r.Stale) == 0
}

// maxOwnedProbe is how many leading bytes are read to recognise an owned file.
const maxOwnedProbe = 4096

// checkPaths returns the source's paths, sorted and checked, and their set.
func checkPaths(src Source) ([]string, pathSet, error) {
	names := src.Paths()
	set := make(pathSet, len(names))
	for _, p := range names {
		if !fs.ValidPath(p) || p == "." || strings.Contains(p, `\`) {
			return nil, nil, fmt.Errorf("output path %q is not a relative slash-separated path inside the output folder", p)
		}
		if set[p] {
			return nil, nil, fmt.Errorf("output path %q given twice", p)
		}
		set[p] = true
	}
	sort.Strings(names)
	return names, set, nil
}

// Check compares dir with files without writing anything. A missing dir
// means every file is missing. With a Record, the record is compared too:
// a missing or different record is reported in Created or Updated (and
// in Diff) like a file.
func Check(dir string, src Source, opts Options) (Report, error) {
	names, set, err := checkPaths(src)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		rep.Created = names
		if opts.Record != nil {
			rep.Created = append(rep.Created, opts.Record.Name)
			sort.Strings(rep.Created)
		}
		return rep, nil
	}
	if err != nil {
		return Report{}, err
	}
	defer root.Close()
	var diff strings.Builder
	compare := func(p string, want []byte, counted bool) error {
		old, err := ReadRegular(root, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			rep.Created = append(rep.Created, p)
		case err != nil:
			return err
		case bytes.Equal(old, want):
			if counted {
				rep.Unchanged = append(rep.Unchanged, p)
			}
		default:
			rep.Updated = append(rep.Updated, p)
			shown := path.Join(dir, p)
			diff.WriteString(udiff.Unified(shown+" (on disk)", shown+" (generated)", string(old), string(want), 3))
		}
		return nil
	}
	for _, p := range names {
		want, err := src.Content(p)
		if err != nil {
			return Report{}, err
		}
		if err := compare(p, want, true); err != nil {
			return Report{}, err
		}
	}
	if opts.Record != nil {
		plan, err := planRecord(root, dir, set, opts, false)
		if err != nil {
			return Report{}, err
		}
		rep.Stale = plan.stale
		if err := compare(opts.Record.Name, plan.content(set, nil), false); err != nil {
			return Report{}, err
		}
		sort.Strings(rep.Created)
		sort.Strings(rep.Updated)
	} else if rep.Stale, err = stale(root, set, opts); err != nil {
		return Report{}, err
	}
	rep.Diff = diff.String()
	return rep, nil
}

// Write makes dir hold files, writing only files whose bytes differ (each
// through a temporary file renamed into place) and, with opts.Clean,
// removing stale owned files and the folders that become empty. An existing
// file that is not owned is never overwritten: Write then fails before
// writing anything, and so does a Clean that a missing record makes unsafe
// (*UnrecordedError). With a Record, the record is rewritten last (it is
// not counted in the report).
//
// The bytes of each file are asked from src only after every file has been
// classified, one file at a time.
func Write(dir string, src Source, opts Options) (Report, error) {
	names, set, err := checkPaths(src)
	if err != nil {
		return Report{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Report{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Report{}, err
	}
	defer root.Close()
	// Classify every file before writing any, so that a file in the way
	// (not ours, or not a regular file) stops the run with nothing written.
	var rep Report
	exists := make(map[string]bool, len(names))
	owns := opts.Owned
	if owns == nil {
		owns = func([]byte) bool { return true }
	}
	for _, p := range names {
		owned, err := probe(root, p, owns)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return Report{}, err
		case !owned:
			return Report{}, fmt.Errorf("%s exists and was not generated by this tool; move it away or choose another output folder", path.Join(dir, p))
		default:
			exists[p] = true
		}
	}
	var plan *recordPlan
	if opts.Record != nil {
		if plan, err = planRecord(root, dir, set, opts, opts.Clean); err != nil {
			return Report{}, err
		}
		rep.Stale = plan.stale
	}
	for _, p := range names {
		want, err := src.Content(p)
		if err != nil {
			return rep, err
		}
		if !exists[p] {
			rep.Created = append(rep.Created, p)
		} else if old, err := ReadRegular(root, p); err != nil {
			return rep, err
		} else if bytes.Equal(old, want) {
			rep.Unchanged = append(rep.Unchanged, p)
			continue
		} else {
			rep.Updated = append(rep.Updated, p)
		}
		if err := writeFile(root, p, want); err != nil {
			return rep, fmt.Errorf("write %s: %w", path.Join(dir, p), err)
		}
	}
	if plan == nil {
		if rep.Stale, err = stale(root, set, opts); err != nil {
			return rep, err
		}
	}
	if opts.Clean {
		for _, p := range rep.Stale {
			if err := root.Remove(p); err != nil {
				return rep, err
			}
			rep.Removed = append(rep.Removed, p)
			// Remove the folders the file leaves empty (Remove fails on a
			// folder that still holds anything, which ends the climb).
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				if root.Remove(d) != nil {
					break
				}
			}
		}
	}
	if plan != nil {
		want := plan.content(set, rep.Removed)
		if old, err := ReadRegular(root, plan.rec.Name); err != nil || !bytes.Equal(old, want) {
			if err := writeFile(root, plan.rec.Name, want); err != nil {
				return rep, fmt.Errorf("write %s: %w", path.Join(dir, plan.rec.Name), err)
			}
		}
	}
	return rep, nil
}

// ReadRegular reads the regular file p under root. Anything else at p — a
// folder, a named pipe, a device, or a symbolic link to one — is an error
// that says so, and a named pipe is never opened for a blocking read.
func ReadRegular(root *os.Root, p string) ([]byte, error) {
	f, err := openRegular(root, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// openRegular opens p for reading when it is a regular file: it checks the
// type before opening (a device is not even opened) and after (a file
// swapped for a pipe in between cannot block: the open does not wait for a
// writer).
func openRegular(root *os.Root, p string) (*os.File, error) {
	st, err := root.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: exists and is not a regular file", p)
	}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s: exists and is not a regular file", p)
		}
		return nil, err
	}
	return f, nil
}

func writeFile(root *os.Root, p string, data []byte) error {
	if d := path.Dir(p); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(p), ".wfgen-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, p); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// stale lists owned files under root (not following symbolic links, and
// skipping hidden, testdata and vendor folders) that files does not hold.
func stale(root *os.Root, files pathSet, opts Options) ([]string, error) {
	if opts.Owned == nil {
		return nil, errors.New("tree: Options.Owned is required")
	}
	var out []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, opts.Ext) {
			return nil
		}
		if _, ok := files[p]; ok {
			return nil
		}
		owned, err := probe(root, p, opts.Owned)
		if err != nil {
			return err
		}
		if owned {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func probe(root *os.Root, p string, owned func([]byte) bool) (bool, error) {
	f, err := openRegular(root, p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, maxOwnedProbe)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	return owned(buf[:n]), nil
}
