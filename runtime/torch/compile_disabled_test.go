package torch

import (
	"errors"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
)

// TestCompileDisabledReturnsModule checks the seed's
// compile_module_if_enabled(module, enabled=False) is module, in cgo and
// no-cgo builds alike: a disabled compile returns the module unchanged
// whatever it is, without reading the other options; an enabled one on a
// module of another engine is an error (ErrUnavailable without cgo).
func TestCompileDisabledReturnsModule(t *testing.T) {
	off, on := false, true
	m := enginetest.NewModule()         // a module no libtorch engine loaded
	t.Setenv(EnvCompileStrict, "maybe") // not read while disabled
	if got, err := CompileModule(m, CompileOptions{Enabled: &off, Backend: "no-such-backend"}); err != nil || got != engine.Module(m) {
		t.Errorf("enabled=false: %v, %v; want the module itself", got, err)
	}
	t.Setenv(EnvCompile, "")
	if got, err := CompileModule(m, CompileOptions{}); err != nil || got != engine.Module(m) {
		t.Errorf("%s unset: %v, %v; want the module itself", EnvCompile, got, err)
	}
	t.Setenv(EnvCompile, "off")
	if got, err := CompileModule(nil, CompileOptions{}); err != nil || got != nil {
		t.Errorf("%s=off with a nil module: %v, %v", EnvCompile, got, err)
	}
	t.Setenv(EnvCompile, "maybe")
	if _, err := CompileModule(m, CompileOptions{}); err == nil || !strings.Contains(err.Error(), EnvCompile) {
		t.Errorf("malformed %s: error = %v, want it named", EnvCompile, err)
	}
	_, engErr := engine.DefaultEngine() // registered only in a cgo build
	_, err := CompileModule(m, CompileOptions{Enabled: &on})
	switch {
	case err == nil:
		t.Error("compiling a module of another engine succeeded")
	case engErr != nil && !errors.Is(err, ErrUnavailable):
		t.Errorf("no-cgo enabled compile: error = %v, want ErrUnavailable", err)
	case engErr == nil && !strings.Contains(err.Error(), "not loaded by the libtorch engine"):
		t.Errorf("enabled compile of a foreign module: error = %v", err)
	}
}
