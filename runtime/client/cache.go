package client

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/infra"
)

// moduleKey identifies one loaded module: the same file (by path, size and
// modification time) in the same format on the same device with the same
// dtype.
type moduleKey struct {
	path   string
	size   int64
	mtime  time.Time
	format runtime.CheckpointFormat
	device string
	dtype  runtime.DType
}

type cacheEntry struct {
	once sync.Once
	mod  runtime.Module
	err  error
	refs int
}

var cache = struct {
	sync.Mutex
	entries map[moduleKey]*cacheEntry
}{entries: map[moduleKey]*cacheEntry{}}

// acquire returns the cached module for path in format on device/dtype,
// loading it through e on first use; concurrent first uses load once. Each
// successful acquire must be paired with release.
func acquire(e runtime.Engine, path string, format runtime.CheckpointFormat, device string, dtype runtime.DType) (runtime.Module, moduleKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, moduleKey{}, fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	key := moduleKey{path, st.Size(), st.ModTime(), format, device, dtype}
	cache.Lock()
	ent, ok := cache.entries[key]
	if !ok {
		ent = &cacheEntry{}
		cache.entries[key] = ent
	}
	ent.refs++
	cache.Unlock()

	ent.once.Do(func() {
		ent.mod, ent.err = e.Load(path, runtime.LoadOptions{Device: device, DType: dtype, Format: format})
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
// and then asks the engine to return unreferenced accelerator memory (the
// seed's drop-caches: strong references go first, the allocator cache after).
// It returns how many modules were released.
func ReleaseCaches() (int, error) {
	n, err := releaseUnused()
	if e, eerr := runtime.DefaultEngine(); eerr == nil {
		if r, ok := e.(runtime.CacheReleaser); ok {
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
	var drop []runtime.Module
	for k, ent := range cache.entries {
		if ent.refs == 0 && ent.mod != nil {
			drop = append(drop, ent.mod)
			delete(cache.entries, k)
		}
	}
	cache.Unlock()
	var errs []error
	for _, m := range drop {
		if err := m.Close(); err != nil && !errors.Is(err, runtime.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return len(drop), errors.Join(errs...)
}
