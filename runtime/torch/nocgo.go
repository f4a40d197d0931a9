//go:build !cgo

package torch

import (
	"github.com/worldfoundry/wfgen/runtime"
)

// DefineModule needs cgo; this build returns ErrUnavailable.
func DefineModule(source string, params map[string]*runtime.Tensor, path string) error {
	return ErrUnavailable
}

// BuildModule needs cgo; this build returns ErrUnavailable.
func BuildModule(src ModuleSource, path string) error { return ErrUnavailable }

// CompileModule needs cgo; this build returns ErrUnavailable.
func CompileModule(m runtime.Module, opts CompileOptions) (runtime.Module, error) {
	return nil, ErrUnavailable
}
