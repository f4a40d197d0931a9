//go:build cgo

package torch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"
)

// opLibraries are the op libraries loaded into the process, by the name
// dlopen was given (an absolute path, or a library name without '/').
var opLibraries = struct {
	sync.Mutex
	loaded map[string]bool
}{loaded: map[string]bool{}}

// loadOpLibraries loads, once per process each, the op libraries that
// engine.EnvOpLibraries lists and then those given (a load's
// LoadOptions.OpLibraries), so that the ops they register exist when a
// checkpoint's code is compiled. A library that cannot be loaded is an
// error naming it and where it was listed.
func loadOpLibraries(given []string) error {
	type lib struct{ name, from string }
	var libs []lib
	for _, l := range filepath.SplitList(os.Getenv(engine.EnvOpLibraries)) {
		if l = strings.TrimSpace(l); l != "" {
			libs = append(libs, lib{l, engine.EnvOpLibraries})
		}
	}
	for _, l := range given {
		libs = append(libs, lib{l, "op_libraries"})
	}
	if len(libs) == 0 {
		return nil
	}
	opLibraries.Lock()
	defer opLibraries.Unlock()
	for _, l := range libs {
		name := l.name
		if strings.ContainsRune(name, 0) {
			return fmt.Errorf("torch: op library %q (from %s): the path holds a NUL byte", name, l.from)
		}
		if strings.ContainsRune(name, '/') {
			abs, err := filepath.Abs(name)
			if err != nil {
				return fmt.Errorf("torch: op library %s (from %s): %w", name, l.from, err)
			}
			name = abs
		}
		if opLibraries.loaded[name] {
			continue
		}
		if err := shim.Dlopen(name); err != nil {
			return fmt.Errorf("torch: op library %s (from %s): %w", l.name, l.from, err)
		}
		opLibraries.loaded[name] = true
	}
	return nil
}
