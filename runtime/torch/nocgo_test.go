//go:build !cgo

package torch

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Without cgo the package registers no engine and its helpers say why.
func TestWithoutCgo(t *testing.T) {
	if _, err := engine.DefaultEngine(); !errors.Is(err, engine.ErrNoEngine) {
		t.Errorf("DefaultEngine() error = %v, want ErrNoEngine", err)
	}
	if err := DefineModule("def forward(self) -> int:\n    return 1\n", nil, filepath.Join(t.TempDir(), "m.pt")); !errors.Is(err, engine.ErrNoEngine) {
		t.Errorf("DefineModule error = %v", err)
	}
	on := true
	if _, err := CompileModule(nil, CompileOptions{Enabled: &on}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("CompileModule error = %v", err)
	}
}
