// Package validate checks wfgen manifests: it reads files and folders,
// checks each manifest against the JSON Schema (package schema), decodes
// it, and resolves it with ir.Build, which applies the semantic rules no
// schema can express (unique ids, existing defaults, defaults that fit
// their field, Go name collisions, ...). Every problem of a file is
// reported as a Diagnostic that points at the offending YAML or JSON node.
// A valid manifest comes back as its ir.Family, which is exactly what the
// generators render. A manifest read from a file (File) is also checked
// against the model checkpoints at hand (Checkpoints), as a load would.
//
// A valid family's Spec is decoded with the spec types' defaults applied,
// and every field default (and every default_call_kwargs value that sets a
// field) holds the Go type of the field's kind: string, int64, float64,
// bool, []string, []int64, []float64 or []bool. Other free-form values
// (load_kwargs, call_kwargs) hold int64 for integer literals, float64 for
// other numbers, []any and map[string]any.
package validate

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"golang.org/x/sync/semaphore"
)

// Diagnostic is one problem in one manifest, at a 1-based line and column.
type Diagnostic = manifest.Diagnostic

// Extensions are the file name extensions Paths picks up in folders.
var Extensions = []string{".yaml", ".yml", ".json"}

// Options change how files are found in folders. The zero value is what
// Paths and Check use.
type Options struct {
	// Exclude, when set, leaves out each file found in a folder for which
	// it returns true (the path as Paths names it). A file given
	// explicitly is never excluded.
	Exclude func(path string) bool
	// Skipped, when set, is told about each file found in a folder with a
	// manifest extension that is skipped: one that is not a regular file
	// — a named pipe, a socket, a device, or a symbolic link to one or to
	// a folder — skipped without being opened (the error is a
	// *manifest.NotRegularError), and a JSON Schema document, such as the
	// one "wfgen schema" writes (a *manifest.JSONSchemaError). A JSON
	// Schema document given explicitly is a diagnostic instead: it is not
	// a manifest.
	Skipped func(path string, err error)
}

// Paths expands files and folders (folders recursively, keeping files whose
// extension is in Extensions, skipping hidden folders and, once read, JSON
// Schema documents: see Options.Skipped), then loads and
// validates each file, then checks that family ids, aliases and Go packages
// are unique across the valid files (see ir.Across). The result is sorted
// by path and deterministic. It returns the valid families (a file that
// reuses another's name or package is not valid), every diagnostic, and a
// non-nil error only for usage or I/O problems (a missing path, an
// unreadable file or folder, a path given explicitly that is not a
// regular file).
func Paths(paths []string) ([]*ir.Family, []Diagnostic, error) {
	return Options{}.Paths(paths)
}

// Paths is the package's Paths with the options.
func (o Options) Paths(paths []string) ([]*ir.Family, []Diagnostic, error) {
	return o.walk(paths, true)
}

// Check is Paths for callers that only need the verdict, such as "wfgen
// validate": it returns the diagnostics and the number of valid files
// without keeping the files, so memory stays small however many there are.
func Check(paths []string) (valid int, diags []Diagnostic, err error) {
	return Options{}.Check(paths)
}

// Check is the package's Check with the options.
func (o Options) Check(paths []string) (valid int, diags []Diagnostic, err error) {
	files, diags, err := o.scan(paths, false)
	return len(files), diags, err
}

// walk validates paths in parallel. With keep false each valid file is
// returned as a nil entry: only their number matters.
func (o Options) walk(paths []string, keep bool) ([]*ir.Family, []Diagnostic, error) {
	valid, diags, err := o.scan(paths, keep)
	fams := make([]*ir.Family, len(valid))
	for i, v := range valid {
		fams[i] = v.fam
	}
	return fams, diags, err
}

// Scanned is a valid manifest as Scan returns it: where it is and the Go
// package generated from it.
type Scanned struct {
	// Path is the manifest's path, as found.
	Path string
	// Package is the Go package generated from it (ir.Family.Package).
	Package string
}

// Scan validates like Check and returns, of each valid manifest, only its
// path and Go package. A generator that then reads the manifests again one
// at a time (File) holds one family at a time, whatever their number.
func (o Options) Scan(paths []string) ([]Scanned, []Diagnostic, error) {
	valid, diags, err := o.scan(paths, false)
	out := make([]Scanned, len(valid))
	for i, v := range valid {
		out[i] = Scanned{Path: v.path, Package: v.id.Package.Value}
	}
	return out, diags, err
}

// scanned is one valid file of a scan; fam is kept only when asked.
type scanned struct {
	path string
	fam  *ir.Family
	id   ir.Identity
}

// scan validates paths in parallel. With keep false the families are not
// kept: only their paths and identities.
func (o Options) scan(paths []string, keep bool) ([]scanned, []Diagnostic, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("no manifest paths given")
	}
	files, explicit, err := o.expand(paths)
	if err != nil {
		return nil, nil, err
	}
	type result struct {
		fam    *ir.Family
		valid  bool
		id     ir.Identity
		diags  []Diagnostic
		schema *manifest.JSONSchemaError // a JSON Schema document found in a folder: skipped
		err    error
	}
	results := make([]result, len(files))
	workers := min(runtime.GOMAXPROCS(0), len(files))
	next := make(chan int)
	budget := semaphore.NewWeighted(parseBudget)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w := parseWeight(files[i])
				_ = budget.Acquire(context.Background(), w) // never fails without a deadline
				f, d, err := loadFile(files[i])
				budget.Release(w)
				r := result{valid: f != nil, diags: d, err: err}
				if js := (*manifest.JSONSchemaError)(nil); errors.As(err, &js) {
					// The one place that decides what a JSON Schema
					// document is worth: skipped in a folder, a problem
					// when given by name.
					r.err = nil
					if explicit[files[i]] {
						r.diags = []Diagnostic{{File: files[i], Line: js.Line, Column: js.Column, Path: "/$schema",
							Message: "this file is " + js.What() + "; name manifests only (in a folder, wfgen skips such files with a note)"}}
					} else {
						r.schema = js
					}
				}
				if f != nil {
					r.id = f.Identity()
				}
				if keep {
					r.fam = f
				}
				results[i] = r
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	// Names and packages must be unique across the valid files; a file
	// that reuses one is not valid either.
	var ids []ir.Identity
	var owners []int
	for i, r := range results {
		if r.valid {
			ids = append(ids, r.id)
			owners = append(owners, i)
		}
	}
	for j, d := range ir.Across(ids) {
		if len(d) > 0 {
			r := &results[owners[j]]
			r.valid = false
			r.diags = manifest.SortDiagnostics(append(r.diags, d...))
		}
	}
	var valid []scanned
	var diags []Diagnostic
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		if r.schema != nil {
			if o.Skipped != nil {
				o.Skipped(files[i], r.schema)
			}
			continue
		}
		if r.valid {
			valid = append(valid, scanned{path: files[i], fam: r.fam, id: r.id})
		}
		diags = append(diags, r.diags...)
	}
	return valid, diags, errors.Join(errs...)
}

// parseBudget caps the bytes of manifest source being parsed at once, over
// all workers. A hostile YAML file can take about 160 bytes of memory per
// byte of source while it is parsed (yaml.v3 builds a node for every
// scalar before the max nodes limit can count them: 170 MB for a 1 MiB
// flow list of 500,000 numbers), so the number of workers alone would let
// memory grow with the number of CPUs. Two max-size files at a time keep
// the worst case near 350 MB; ordinary manifests, a few KiB each, never
// wait.
const parseBudget = 2 * manifest.MaxFileSize

// loadFile is File; tests replace it to watch the parse budget.
var loadFile = File

// parseWeight is a file's share of parseBudget: its size, capped at
// MaxFileSize+1 (ReadFile reads no more) and at least 1.
func parseWeight(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 1 // File reports the error
	}
	return min(max(st.Size(), 1), manifest.MaxFileSize+1)
}

// Files lists the manifest files paths name as Paths finds them (folders
// searched recursively, hidden folders skipped, sorted), without reading
// them: a model repository's manifests now, for wfserve's poll mode.
func (o Options) Files(paths []string) ([]string, error) {
	files, _, err := o.expand(paths)
	return files, err
}

// expand turns the given files and folders into a sorted list of files.
// A path given explicitly must be a regular file or a folder (or a
// symbolic link to one); in folders, files that are not regular are
// reported to o.Skipped and left out, so that nothing ever opens a named
// pipe or a device.
func (o Options) expand(paths []string) (files []string, explicit map[string]bool, err error) {
	seen := map[string]bool{}
	explicit = map[string]bool{}
	var out []string
	add := func(p string) {
		if key := filepath.Clean(p); !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		if manifest.Inside(p) != nil {
			add(p) // File reports it, reading nothing
			explicit[p] = true
			continue
		}
		if !st.IsDir() {
			if !st.Mode().IsRegular() {
				return nil, nil, &manifest.NotRegularError{Path: p, Mode: st.Mode()}
			}
			add(p)
			explicit[p] = true
			continue
		}
		root := p
		if lst, err := os.Lstat(p); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
			// WalkDir does not follow a symbolic link, even as its root;
			// a trailing separator makes the root the linked folder.
			root = p + string(filepath.Separator)
		}
		var found []string
		err = filepath.WalkDir(root, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if q != root && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !slices.Contains(Extensions, strings.ToLower(filepath.Ext(q))) {
				return nil
			}
			if o.Exclude != nil && o.Exclude(q) {
				return nil
			}
			mode := d.Type()
			if mode&fs.ModeSymlink != 0 {
				if manifest.Inside(q) != nil {
					found = append(found, q) // File reports it, reading nothing
					return nil
				}
				st, err := os.Stat(q) // what the link points to
				if err != nil {
					return err
				}
				mode = st.Mode().Type()
			}
			if !mode.IsRegular() {
				if o.Skipped != nil {
					o.Skipped(q, &manifest.NotRegularError{Path: q, Mode: mode})
				}
				return nil
			}
			found = append(found, q)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		slices.Sort(found)
		for _, q := range found {
			add(q)
		}
	}
	return out, explicit, nil
}

// File loads and validates one manifest file and, when it is valid,
// checks it against the model checkpoints at hand (Checkpoints). The
// error is non-nil when the file cannot be read, and when it is a JSON
// Schema document rather than a manifest (a *manifest.JSONSchemaError).
func File(path string) (*ir.Family, []Diagnostic, error) {
	data, err := manifest.ReadFile(path)
	if err != nil {
		var le *manifest.LimitError
		if errors.As(err, &le) {
			return nil, []Diagnostic{{File: path, Line: 1, Column: 1, Message: le.Error()}}, nil
		}
		var oe *manifest.OutsideError
		if errors.As(err, &oe) {
			return nil, []Diagnostic{{File: path, Line: 1, Column: 1, Message: oe.Error()}}, nil
		}
		return nil, nil, err
	}
	f, diags, js := parseBytes(path, data)
	if js != nil {
		return nil, nil, js
	}
	if diags := Checkpoints(f); len(diags) > 0 {
		return nil, diags, nil
	}
	return f, diags, nil
}

// Bytes validates the manifest data read from path (the path names the file
// in diagnostics, picks JSON or YAML by its extension and sets the File's
// Dir). It returns the resolved family when the manifest is valid, or nil
// and every diagnostic when it is not. It never panics.
//
// A JSON Schema document (see manifest.JSONSchemaError) is not a manifest:
// its one diagnostic, at its "$schema" key, says so.
func Bytes(path string, data []byte) (*ir.Family, []Diagnostic) {
	fam, diags, js := parseBytes(path, data)
	if js != nil {
		return nil, []Diagnostic{{File: path, Line: js.Line, Column: js.Column, Path: "/$schema", Message: "this file is " + js.What()}}
	}
	return fam, diags
}

// parseBytes is Bytes, with a JSON Schema document returned as such
// instead of checked.
func parseBytes(path string, data []byte) (*ir.Family, []Diagnostic, *manifest.JSONSchemaError) {
	f, errs := manifest.Parse(path, data)
	if f != nil {
		if js := f.JSONSchema(); js != nil {
			return nil, nil, js
		}
	}
	c := &checker{file: f, path: path}
	for _, e := range errs {
		c.diags = append(c.diags, Diagnostic{File: path, Line: e.Line, Column: e.Column, Path: e.Path, Message: e.Message})
	}
	if f != nil {
		c.run()
	}
	if len(c.diags) > 0 || c.fam == nil {
		return nil, manifest.SortDiagnostics(c.diags), nil
	}
	return c.fam, nil, nil
}

// Across checks what must be unique across valid families used together
// (see ir.Across) and returns every diagnostic, in the families' order.
func Across(fams []*ir.Family) []Diagnostic {
	ids := make([]ir.Identity, len(fams))
	for i, f := range fams {
		ids[i] = f.Identity()
	}
	var diags []Diagnostic
	for _, d := range ir.Across(ids) {
		diags = append(diags, d...)
	}
	return diags
}
