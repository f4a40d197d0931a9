package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// DefaultName is the name of the engine DefaultEngine returns when more
// than one is registered: libtorch's (runtime/torch).
const DefaultName = "libtorch"

var (
	registryMu sync.RWMutex
	registry   = map[string]Engine{}
)

// Register makes engine e available under name, as database/sql.Register
// does for drivers: engines call it from init. It panics when e is nil or
// an engine is registered under name already.
func Register(name string, e Engine) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if e == nil {
		panic("engine: Register of a nil engine")
	}
	if old, dup := registry[name]; dup {
		panic(fmt.Sprintf("engine: Register called twice for engine %q (already %s %s)", name, old.Name(), old.Version()))
	}
	registry[name] = e
}

// Engines returns the names of the registered engines, sorted.
func Engines() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return slices.Sorted(maps.Keys(registry))
}

// Lookup returns the engine registered under name: ErrNoEngine when none
// is registered at all, else an error naming the registered ones.
func Lookup(name string) (Engine, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if e, ok := registry[name]; ok {
		return e, nil
	}
	if len(registry) == 0 {
		return nil, ErrNoEngine
	}
	return nil, fmt.Errorf("no engine %q is registered (registered: %s)", name, strings.Join(slices.Sorted(maps.Keys(registry)), ", "))
}

// DefaultEngine returns the process's default engine: the only one
// registered, else the one registered as DefaultName. It returns
// ErrNoEngine when none is registered, and an error naming them when
// several are and none is DefaultName.
func DefaultEngine() (Engine, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return defaultLocked()
}

func defaultLocked() (Engine, error) {
	switch len(registry) {
	case 0:
		return nil, ErrNoEngine
	case 1:
		for _, e := range registry {
			return e, nil
		}
	}
	if e, ok := registry[DefaultName]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("engines %s are registered and none is %q, the default: choose one (engine.Lookup)",
		strings.Join(slices.Sorted(maps.Keys(registry)), ", "), DefaultName)
}

// ForFormat returns a registered engine that reads checkpoints of format
// f: the default engine when it does, else the first by name that does.
// It returns ErrNoEngine when none is registered, and a *FormatError
// naming every registered engine and the formats it reads when none reads
// f.
func ForFormat(f spec.CheckpointFormat) (Engine, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if len(registry) == 0 {
		return nil, ErrNoEngine
	}
	if e, err := defaultLocked(); err == nil && Reads(e, f) {
		return e, nil
	}
	names := slices.Sorted(maps.Keys(registry))
	for _, name := range names {
		if e := registry[name]; Reads(e, f) {
			return e, nil
		}
	}
	ferr := &FormatError{Format: f}
	for _, name := range names {
		ferr.Engines = append(ferr.Engines, readsText(name, registry[name]))
	}
	return nil, ferr
}
