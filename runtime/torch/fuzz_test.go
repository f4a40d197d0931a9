//go:build cgo

package torch

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Loading arbitrary bytes as a TorchScript archive returns a module or an
// error; it never crashes the process.
func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.pt")
	if err := DefineModule("def forward(self, x: Tensor) -> Tensor:\n    return x * self.w\n",
		map[string]*tensor.Tensor{"w": tensor.FromFloat32([]float32{1, 2}, 2)}, path); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:len(good)-22]) // without the zip end-of-central-directory record
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/3] ^= 0x55
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "m.pt")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Default().Load(p, engine.LoadOptions{})
		if err != nil {
			return
		}
		defer m.Close()
		for _, name := range m.Methods() {
			if _, err := m.Schema(name); err != nil {
				t.Fatalf("listed method %q has no schema: %v", name, err)
			}
		}
	})
}

const blobSource = `
def forward(self, x: Tensor, n: int, s: str, l: List[float], o: Optional[Tuple[int, str]], d: Dict[str, Tensor]) -> int:
    return n
`

// The C++ reader checks every length and index in a kwargs blob: malformed
// blobs are errors, never crashes or out-of-bounds reads.
func FuzzCallBlob(f *testing.F) {
	path := filepath.Join(f.TempDir(), "blob.pt")
	if err := DefineModule(blobSource, nil, path); err != nil {
		f.Fatal(err)
	}
	m, err := Default().load(path, engine.LoadOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	valid, err := encodeKwargs(map[string]any{
		"x": tensor.FromFloat32([]float32{1}, 1), "n": 2, "s": "a", "l": []float64{1},
		"o": []any{int64(1), "b"}, "d": map[string]any{"k": tensor.FromFloat32([]float32{2}, 1)},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid.buf)
	f.Add(valid.buf[:len(valid.buf)-1])
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<40))
	f.Fuzz(func(t *testing.T, b []byte) {
		res := callBlob(m, b)
		if res.Status != statusOK && res.Status != statusError {
			t.Fatalf("status %d: %s", res.Status, res.Payload)
		}
	})
}

// callBlob sends a raw kwargs blob with an empty pointer array: the blob's
// lengths are the Go encoder's to guarantee, so a fuzzed blob may not refer
// to tensor memory at all (the shim must reject any index).
func callBlob(m *Module, blob []byte) shim.Result {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return shim.Call(m.h, "forward", blob, nil, 0, make([]byte, 4096))
}
