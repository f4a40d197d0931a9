package infra

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

var (
	droppersMu sync.Mutex
	droppers   = map[string]func(){}
)

// RegisterCacheDropper registers drop under name; DropCaches calls it to
// release strong references to cached runtimes (loaded modules, compiled
// wrappers). Registering a name again replaces it. The returned function
// unregisters it.
func RegisterCacheDropper(name string, drop func()) (unregister func()) {
	droppersMu.Lock()
	defer droppersMu.Unlock()
	droppers[name] = drop
	return func() {
		droppersMu.Lock()
		defer droppersMu.Unlock()
		delete(droppers, name)
	}
}

// DropCaches is the seed's drop-caches: it drops strong references first
// (every registered dropper, in name order), collects garbage so that
// unreachable modules' cleanups can run, then returns unreferenced cached
// accelerator memory through the registered engine when it is a
// engine.CacheReleaser (nothing to do without one, or on CPU). Modules still referenced keep their memory: Close them.
func DropCaches() error { return dropCaches(nil) }

func dropCaches(ec engine.CacheReleaser) error {
	droppersMu.Lock()
	names := make([]string, 0, len(droppers))
	for n := range droppers {
		names = append(names, n)
	}
	sort.Strings(names)
	fns := make([]func(), len(names))
	for i, n := range names {
		fns[i] = droppers[n]
	}
	droppersMu.Unlock()
	for _, f := range fns {
		f()
	}
	runtime.GC()
	if ec == nil {
		e, err := engine.DefaultEngine()
		if errors.Is(err, engine.ErrNoEngine) {
			return nil
		}
		if err != nil {
			return err
		}
		r, ok := e.(engine.CacheReleaser)
		if !ok {
			return nil // the engine keeps no cache
		}
		ec = r
	}
	if err := ec.EmptyCache(); err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	return nil
}
