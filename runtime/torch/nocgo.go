//go:build !cgo

package torch

import (
	"fmt"
	"os"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// DefineModule needs cgo; this build returns ErrUnavailable.
func DefineModule(source string, params map[string]*tensor.Tensor, path string) error {
	return ErrUnavailable
}

// BuildModule needs cgo; this build returns ErrUnavailable.
func BuildModule(src ModuleSource, path string) error { return ErrUnavailable }

// CompileModule needs cgo to compile; this build returns ErrUnavailable
// when compilation is enabled, and m itself when it is disabled (the
// seed's compile_module_if_enabled(enabled=False)).
func CompileModule(m engine.Module, opts CompileOptions) (engine.Module, error) {
	if on, err := boolVar(opts.Enabled, EnvCompile, os.Getenv); err != nil || !on {
		if err != nil {
			return nil, fmt.Errorf("torch: compile: %w", err)
		}
		return m, nil
	}
	return nil, ErrUnavailable
}
