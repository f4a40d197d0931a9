package emit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/ir"

	"github.com/worldfoundry/wfgen/gen/validate"
)

// fingerprintVersion changes when the fingerprint encoding changes.
const fingerprintVersion = "wfgen-go-1"

// Fingerprint is a canonical encoding of everything a family's Go output
// depends on apart from the generator itself: the header path (the
// manifest's OriginPath), the package name and the spec (with the dynamic
// types of free-form values).
func Fingerprint(fam *ir.Family) []byte {
	var w canon
	w.str(fingerprintVersion)
	w.str(fam.File.OriginPath())
	w.str(fam.Package)
	w.value(reflect.ValueOf(fam.Spec))
	return w.b
}

// canon writes values in a canonical, unambiguous binary form.
type canon struct{ b []byte }

func (w *canon) tag(t byte)   { w.b = append(w.b, t) }
func (w *canon) u64(x uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, x) }
func (w *canon) str(s string) { w.u64(uint64(len(s))); w.b = append(w.b, s...) }

func (w *canon) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		w.tag('0')
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			w.tag('n')
			return
		}
		if v.Kind() == reflect.Interface {
			w.tag('i')
			w.str(v.Elem().Type().PkgPath() + "." + v.Elem().Type().String())
		} else {
			w.tag('p')
		}
		w.value(v.Elem())
	case reflect.Struct:
		w.tag('s')
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			w.str(t.Field(i).Name)
			w.value(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			w.tag('n')
			return
		}
		w.tag('l')
		w.u64(uint64(v.Len()))
		for i := 0; i < v.Len(); i++ {
			w.value(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			w.tag('n')
			return
		}
		type entry struct{ k, v []byte }
		entries := make([]entry, 0, v.Len())
		for _, k := range v.MapKeys() {
			var kw, vw canon
			kw.value(k)
			vw.value(v.MapIndex(k))
			entries = append(entries, entry{kw.b, vw.b})
		}
		sort.Slice(entries, func(i, j int) bool { return string(entries[i].k) < string(entries[j].k) })
		w.tag('m')
		w.u64(uint64(len(entries)))
		for _, e := range entries {
			w.b = append(append(w.b, e.k...), e.v...)
		}
	case reflect.String:
		w.tag('S')
		w.str(v.String())
	case reflect.Bool:
		w.tag('b')
		if v.Bool() {
			w.tag(1)
		} else {
			w.tag(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.tag('I')
		w.u64(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.tag('U')
		w.u64(v.Uint())
	case reflect.Float32, reflect.Float64:
		w.tag('F')
		w.u64(math.Float64bits(v.Float()))
	default:
		w.tag('?')
		w.str(fmt.Sprintf("%#v", v.Interface()))
	}
}

// GenerateCached is Generate for an output folder that may already hold
// the output: a family whose fingerprint the cache knows, and whose file in
// outDir hashes to the recorded sum, is taken from disk instead of being
// generated again. Everything else is generated and recorded. A nil cache
// or a missing outDir makes it exactly Generate.
//
// The cache trusts the folder it verifies against (an edited file plus an
// edited cache index pass), so it is for writing only: checking a folder
// ("wfgen generate --check") must compare it with Generate's bytes.
func GenerateCached(fams []*ir.Family, outDir string, c *cache.Cache) (Files, error) {
	out, _, err := GenerateWithOrigins(fams, outDir, c)
	return out, err
}

// GenerateWithOrigins is GenerateCached that also returns, for each output
// path, the path of the manifest it was generated from. A nil cache generates
// everything. It holds every file in memory; NewOutput does not.
func GenerateWithOrigins(fams []*ir.Family, outDir string, c *cache.Cache) (Files, map[string]string, error) {
	o, err := NewOutput(fams, outDir, c)
	if err != nil {
		return nil, nil, err
	}
	defer o.Close()
	out := make(Files, len(fams))
	for _, p := range o.Paths() {
		b, err := o.Content(p)
		if err != nil {
			return nil, nil, err
		}
		out[p] = b
	}
	return out, o.Origins(), nil
}

// Output is the Go output of families as a tree.Source: a file is rendered
// when tree.Write or tree.Check asks for it — a few files ahead, on up to
// GOMAXPROCS goroutines — or read from the output folder when the cache
// vouches for it (see GenerateCached), and dropped once returned. So a run
// over ten thousand manifests holds a handful of files, not all of them.
// Close it when done.
type Output struct {
	byPath map[string]source
	paths  []string // sorted: the order tree asks in
	root   *os.Root // the output folder, when the cache may read it
	c      *cache.Cache

	mu      sync.Mutex
	started int                      // paths[:started] are rendering or done
	pending map[string]chan rendered // by path
	slots   chan struct{}            // bounds concurrent renders
}

// source is where one output file comes from: the manifest's path, its
// package and its family, resolved when the file is rendered — or, for
// the aggregate package, its path and its bytes.
type source struct {
	manifest string
	pkg      string
	family   func() (*ir.Family, error)
	content  []byte // fixed contents (no family)
}

// rendered is one file's bytes or error.
type rendered struct {
	b   []byte
	err error
}

// NewOutput returns the lazy output of fams for the folder outDir, using
// the cache c (nil: render everything).
func NewOutput(fams []*ir.Family, outDir string, c *cache.Cache) (*Output, error) {
	srcs := make(map[string]source, len(fams))
	for _, fam := range fams {
		srcs[GoPath(fam)] = source{manifest: fam.File.Path, pkg: fam.Package, family: func() (*ir.Family, error) { return fam, nil }}
	}
	return newOutput(srcs, outDir, c)
}

// NewScannedOutput is NewOutput for manifests validated by
// validate.Options.Scan: each is read and resolved again by load when its
// file is rendered, so that only the families being rendered are in
// memory.
func NewScannedOutput(valid []validate.Scanned, load func(validate.Scanned) (*ir.Family, error), outDir string, c *cache.Cache) (*Output, error) {
	srcs := make(map[string]source, len(valid))
	for _, v := range valid {
		srcs[path.Join(v.Package, v.Package+".go")] = source{manifest: v.Path, pkg: v.Package, family: func() (*ir.Family, error) { return load(v) }}
	}
	return newOutput(srcs, outDir, c)
}

func newOutput(srcs map[string]source, outDir string, c *cache.Cache) (*Output, error) {
	o := &Output{byPath: srcs, pending: map[string]chan rendered{}, c: c,
		slots: make(chan struct{}, runtime.GOMAXPROCS(0))}
	for p := range srcs {
		o.paths = append(o.paths, p)
	}
	sort.Strings(o.paths)
	if c != nil {
		if r, err := os.OpenRoot(outDir); err == nil {
			o.root = r
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return o, nil
}

// Paths lists the output paths.
func (o *Output) Paths() []string { return slices.Clone(o.paths) }

// Origins maps each output path to the path of the manifest it comes from
// (for the aggregate package, its Aggregate.Source).
func (o *Output) Origins() map[string]string {
	m := make(map[string]string, len(o.byPath))
	for p, s := range o.byPath {
		m[p] = s.manifest
	}
	return m
}

// Content returns the bytes of path p, rendering it (and starting the
// next few) unless already done.
func (o *Output) Content(p string) ([]byte, error) {
	o.mu.Lock()
	i, found := slices.BinarySearch(o.paths, p)
	if !found {
		o.mu.Unlock()
		return nil, fmt.Errorf("emit: no output %s", p)
	}
	for o.started < len(o.paths) && o.started <= i+2*cap(o.slots) {
		o.start(o.paths[o.started])
		o.started++
	}
	ch, ok := o.pending[p]
	if !ok { // asked again: render it anew
		o.start(p)
		ch = o.pending[p]
	}
	delete(o.pending, p)
	o.mu.Unlock()
	r := <-ch
	return r.b, r.err
}

// start renders path p in the background (o.mu held).
func (o *Output) start(p string) {
	ch := make(chan rendered, 1)
	o.pending[p] = ch
	src := o.byPath[p]
	if src.family == nil {
		ch <- rendered{src.content, nil}
		return
	}
	go func() {
		o.slots <- struct{}{}
		defer func() { <-o.slots }()
		fam, err := src.family()
		if err != nil {
			ch <- rendered{nil, err}
			return
		}
		b, err := o.render(p, fam)
		ch <- rendered{b, err}
	}()
}

// render returns the file of fam: from disk when the cache knows its
// fingerprint and the file hashes to the recorded sum, else rendered (and
// recorded).
func (o *Output) render(p string, fam *ir.Family) ([]byte, error) {
	if o.c == nil {
		return GoSource(fam)
	}
	key := o.c.Key(Fingerprint(fam))
	if sum, ok := o.c.Get(key); ok && o.root != nil {
		if b, err := tree.ReadRegular(o.root, p); err == nil && cache.SumOf(b) == sum {
			return b, nil
		}
	}
	b, err := GoSource(fam)
	if err == nil {
		o.c.Put(key, cache.SumOf(b))
	}
	return b, err
}

// Close waits for renders still running, flushes the cache and closes the
// output folder.
func (o *Output) Close() error {
	o.mu.Lock()
	pending := o.pending
	o.pending = map[string]chan rendered{}
	o.mu.Unlock()
	for _, ch := range pending {
		<-ch
	}
	o.c.Flush() // a failed flush only costs time on the next run
	if o.root != nil {
		return o.root.Close()
	}
	return nil
}

// PathsCached is Paths with GenerateCached.
func PathsCached(paths []string, outDir string, c *cache.Cache) (Files, []Diagnostic, error) {
	fams, diags, err := validate.Paths(paths)
	if err != nil || len(diags) > 0 {
		return nil, diags, err
	}
	out, err := GenerateCached(fams, outDir, c)
	return out, nil, err
}
