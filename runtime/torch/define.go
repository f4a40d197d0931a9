//go:build cgo

package torch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// DefineModule builds a TorchScript module from source and saves it to path
// as a TorchScript archive that Engine.Load (and Python's torch.jit.load)
// reads. params are registered as parameters before source is compiled, so
// the source refers to them as self.NAME. The module is saved in eval mode.
// The file appears whole or not at all. Tests and the bundled demo
// checkpoints use it:
//
//	err := torch.DefineModule(`
//	def forward(self, x: Tensor, scale: float = 1.0) -> Dict[str, Tensor]:
//	    return {"y": torch.matmul(x, self.weight) * scale}
//	`, map[string]*tensor.Tensor{"weight": w}, "model.pt")
func DefineModule(source string, params map[string]*tensor.Tensor, path string) error {
	return BuildModule(ModuleSource{Source: source, Parameters: params}, path)
}

// BuildModule is DefineModule with buffers as well as parameters.
func BuildModule(src ModuleSource, path string) error {
	if err := defaultEngine.init(); err != nil {
		return fmt.Errorf("torch: define %s: %w", path, err)
	}
	if path == "" {
		return errors.New("torch: define: empty output path")
	}
	enc := &encoder{}
	enc.u64(uint64(len(src.Parameters) + len(src.Buffers)))
	for kind, set := range []map[string]*tensor.Tensor{src.Parameters, src.Buffers} {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if n == "" {
				return fmt.Errorf("torch: define %s: empty tensor name", path)
			}
			if kind == 0 {
				if _, dup := src.Buffers[n]; dup {
					return fmt.Errorf("torch: define %s: %q is both a parameter and a buffer", path, n)
				}
			}
			enc.u8(uint8(kind))
			enc.str(n)
			if err := enc.tensor(set[n]); err != nil {
				return fmt.Errorf("torch: define %s: tensor %q: %w", path, n, err)
			}
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("torch: define: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	var pinner runtime.Pinner
	enc.pin(&pinner)
	res := shim.Define(src.Source, enc.buf, enc.ptrs, tmpName, make([]byte, 8192))
	pinner.Unpin()
	if res.Status != statusOK {
		os.Remove(tmpName)
		return newError("define", path, "", res.Status, string(res.Payload))
	}
	if err := os.Rename(tmpName, path); err != nil {
		os.Remove(tmpName)
		return fmt.Errorf("torch: define: %w", err)
	}
	return nil
}
