package client

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/infra"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// moduleKey identifies one loaded module: the same file (by path, size,
// modification time and, on unix, device and inode: a file renamed over
// it is another) loaded by the same engine in the same format on the same
// device with the same dtype, compiled the same way.
type moduleKey struct {
	engine  any // the engine, or a value of its own when it is not comparable
	path    string
	size    int64
	mtime   time.Time
	file    [2]uint64 // fileID
	format  spec.CheckpointFormat
	device  string
	dtype   tensor.DType
	compile string
}

type cacheEntry struct {
	once sync.Once
	mod  engine.Module
	err  error
	refs int
}

var cache = struct {
	sync.Mutex
	entries map[moduleKey]*cacheEntry
}{entries: map[moduleKey]*cacheEntry{}}

// acquire returns the cached module for path in format on device/dtype —
// compiled as the variant's compile spec and the WORLDFOUNDRY_TORCH_COMPILE*
// variables ask when the engine is an engine.Compiler — loading (and
// compiling) it through e on first use; concurrent first uses load once, and
// every client of one checkpoint, format, device, dtype and compile setting
// shares one module. The op libraries are the engine's to load before a
// load (engine.LoadOptions.OpLibraries); they are process-wide, so they
// are no part of the key. Each successful acquire must be paired with
// release.
func acquire(e engine.Engine, path string, format spec.CheckpointFormat, device string, dtype tensor.DType, compile *spec.CompileSpec, opLibraries []string) (engine.Module, moduleKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, moduleKey{}, fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	var eng any = e
	if t := reflect.TypeOf(e); t == nil || !t.Comparable() {
		eng = new(int) // an engine that cannot be a map key shares nothing
	}
	key := moduleKey{eng, path, st.Size(), st.ModTime(), fileID(st), format, device, dtype, compileKey(compile)}
	cache.Lock()
	ent, ok := cache.entries[key]
	if !ok {
		ent = &cacheEntry{}
		cache.entries[key] = ent
	}
	ent.refs++
	cache.Unlock()

	ent.once.Do(func() {
		ent.mod, ent.err = load(e, path, engine.LoadOptions{Device: device, DType: dtype, Format: format, OpLibraries: opLibraries}, compile)
	})
	if ent.err != nil {
		cache.Lock()
		ent.refs--
		if cache.entries[key] == ent {
			delete(cache.entries, key) // a later call may retry the load
		}
		cache.Unlock()
		return nil, key, ent.err
	}
	return ent.mod, key, nil
}

func release(key moduleKey) {
	cache.Lock()
	defer cache.Unlock()
	if ent, ok := cache.entries[key]; ok && ent.refs > 0 {
		ent.refs--
	}
}

// ReleaseCaches drops cached modules that no open client uses, closing them,
// and then asks every registered engine to return unreferenced accelerator
// memory (the seed's drop-caches: strong references go first, the
// allocator cache after). It returns how many modules were released.
func ReleaseCaches() (int, error) {
	n, err := releaseUnused()
	for _, name := range engine.Engines() {
		e, lerr := engine.Lookup(name)
		if lerr != nil {
			continue
		}
		if r, ok := e.(engine.CacheReleaser); ok {
			if cerr := r.EmptyCache(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}
	return n, err
}

// The module cache is one of the cached runtimes infra.DropCaches releases.
func init() {
	infra.RegisterCacheDropper("runtime/client modules", func() { _, _ = releaseUnused() })
}

// releaseUnused closes and forgets the cached modules no open client uses.
func releaseUnused() (int, error) {
	cache.Lock()
	var drop []engine.Module
	for k, ent := range cache.entries {
		if ent.refs == 0 && ent.mod != nil {
			drop = append(drop, ent.mod)
			delete(cache.entries, k)
		}
	}
	cache.Unlock()
	var errs []error
	for _, m := range drop {
		if err := m.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return len(drop), errors.Join(errs...)
}

// load loads path and, when the engine is an engine.Compiler, compiles the
// module (a no-op when compilation is off); the uncompiled module is closed
// once a compiled one replaces it.
func load(e engine.Engine, path string, opts engine.LoadOptions, compile *spec.CompileSpec) (engine.Module, error) {
	m, err := e.Load(path, opts)
	if err != nil {
		return nil, err
	}
	c, ok := e.(engine.Compiler)
	if !ok {
		return m, nil
	}
	var spec spec.CompileSpec
	if compile != nil {
		spec = *compile
	}
	cm, err := c.Compile(m, spec)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("compile %s: %w", path, err)
	}
	if cm != m {
		m.Close()
	}
	return cm, nil
}

// compileKey is what decides compilation, for the module cache's key: the
// variant's spec and the compile variables.
func compileKey(c *spec.CompileSpec) string {
	var b strings.Builder
	if c != nil {
		fmt.Fprintf(&b, "%v|%s|%s|%v|", ptrText(c.Enabled), c.Backend, c.Mode, ptrText(c.Strict))
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if strings.HasPrefix(kv, "WORLDFOUNDRY_TORCH_COMPILE") {
			b.WriteString(kv)
			b.WriteByte('|')
		}
	}
	return b.String()
}

func ptrText(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}
