package emit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"sort"

	"github.com/worldfoundry/wfgen/gen/emit/cache"
	"github.com/worldfoundry/wfgen/gen/emit/tree"
	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
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
// path, the manifest it was generated from. A nil cache generates
// everything.
func GenerateWithOrigins(fams []*ir.Family, outDir string, c *cache.Cache) (Files, map[string]*manifest.File, error) {
	origins := make(map[string]*manifest.File, len(fams))
	for _, fam := range fams {
		origins[GoPath(fam)] = fam.File
	}
	var root *os.Root
	if c != nil {
		if r, err := os.OpenRoot(outDir); err == nil {
			root = r
			defer r.Close()
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	out := make(Files, len(fams))
	var todo []*ir.Family
	var keys []cache.Key
	for _, fam := range fams {
		if c == nil {
			todo = append(todo, fam)
			continue
		}
		p := GoPath(fam)
		key := c.Key(Fingerprint(fam))
		if sum, ok := c.Get(key); ok && root != nil {
			if b, err := tree.ReadRegular(root, p); err == nil && cache.SumOf(b) == sum {
				out[p] = b
				continue
			}
		}
		todo = append(todo, fam)
		keys = append(keys, key)
	}
	srcs, err := renderAll(todo, GoSource)
	if err != nil {
		return nil, nil, err
	}
	for i, fam := range todo {
		out[GoPath(fam)] = srcs[i]
		if c != nil {
			c.Put(keys[i], cache.SumOf(srcs[i]))
		}
	}
	c.Flush() // a failed flush only costs time on the next run
	return out, origins, nil
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
