//go:build cgo

package batch_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// These tests run the executor over real TorchScript modules on libtorch
// (runtime/torch). Items are float32 rows stored as little-endian bytes so
// that stacking a batch is a copy.

// greedySource is an encoder whose scratch memory grows with the batch:
// 2^(6n) float32 elements for a batch of n. Up to n = 5 that is at most
// 4 GiB of address space, never touched; n = 8 asks for 2^50 bytes (1 PiB),
// which no host can map, so libtorch's CPU allocator fails for real. The
// slice of zero elements keeps the allocation in the graph without reading
// it.
//
// heavy allocates as many elements as the largest value in column 0 of the
// batch, so one item can be too big even alone.
const greedySource = `
def forward(self, x: Tensor) -> Tensor:
    n = x.size(0)
    scratch = torch.empty([1 << (6 * n)])
    return torch.tanh(torch.matmul(x, self.weight)) + torch.sum(scratch[0:0])

def heavy(self, x: Tensor) -> Tensor:
    scratch = torch.empty([int(torch.max(x[:, 0]))])
    return torch.tanh(torch.matmul(x, self.weight)) + torch.sum(scratch[0:0])
`

const dIn, dOut = 16, 8

func randomFloats(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (rng.Float32()*2 - 1) * scale
	}
	return v
}

func rowBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// tensorForward returns a forward that stacks rows of width dIn into one
// [n, dIn] tensor, calls method and splits the [n, dOut] output into rows.
func tensorForward(m engine.Module, method string, dIn, dOut int) batch.Forward[[]byte, []byte] {
	return func(ctx context.Context, rows [][]byte) ([][]byte, error) {
		data := make([]byte, 0, len(rows)*dIn*4)
		for _, r := range rows {
			data = append(data, r...)
		}
		x := &tensor.Tensor{DType: tensor.Float32, Shape: []int64{int64(len(rows)), int64(dIn)}, Data: data}
		out, err := m.Call(ctx, method, map[string]any{"x": x}, engine.CallOptions{})
		if err != nil {
			return nil, err
		}
		y, err := tensor.AsTensor(out)
		if err != nil {
			return nil, err
		}
		if len(y.Shape) != 2 || y.Shape[1] != int64(dOut) || y.DType != tensor.Float32 {
			return nil, fmt.Errorf("output %s%v, want float32 [n, %d]", y.DType, y.Shape, dOut)
		}
		res := make([][]byte, y.Shape[0])
		for i := range res {
			res[i] = y.Data[i*dOut*4 : (i+1)*dOut*4]
		}
		return res, nil
	}
}

func loadGreedy(t testing.TB) engine.Module {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	w := tensor.FromFloat32(randomFloats(rng, dIn*dOut, 0.5), dIn, dOut)
	path := filepath.Join(t.TempDir(), "greedy.pt")
	if err := torch.DefineModule(greedySource, map[string]*tensor.Tensor{"weight": w}, path); err != nil {
		t.Fatal(err)
	}
	m, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func floatsOf(t *testing.T, b []byte) []float32 {
	t.Helper()
	tn := &tensor.Tensor{DType: tensor.Float32, Shape: []int64{int64(len(b) / 4)}, Data: b}
	f, err := tn.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A module whose memory grows with the batch hits a real allocation failure
// at batch size 8; the executor halves only those slices and returns every
// output, equal to running the items one by one.
func TestTorchRealOOMRecovery(t *testing.T) {
	m := loadGreedy(t)
	rng := rand.New(rand.NewPCG(9, 10))
	items := make([][]byte, 20) // batches of 8, 8 and 4
	for i := range items {
		items[i] = rowBytes(randomFloats(rng, dIn, 1))
	}
	fwd := tensorForward(m, "forward", dIn, dOut)
	var ooms []error
	counting := func(ctx context.Context, b [][]byte) ([][]byte, error) {
		out, err := fwd(ctx, b)
		if err != nil {
			ooms = append(ooms, err)
		}
		return out, err
	}
	var st batch.Stats
	got, err := batch.Run(context.Background(), items, counting, batch.WithMaxBatchSize(8), batch.WithStats(func(s batch.Stats) { st = s }))
	if err != nil {
		t.Fatal(err)
	}
	if len(ooms) > 0 {
		t.Logf("engine error: %v", ooms[0])
	}
	if len(ooms) != 2 || st.Retries != 2 || st.Batches != 5 {
		t.Fatalf("failures %v, stats %+v; want the two batches of 8 to run out of memory and be halved", ooms, st)
	}
	for _, e := range ooms {
		if !errors.Is(e, engine.ErrOutOfMemory) {
			t.Fatalf("forward failed with %v, not an out-of-memory error", e)
		}
	}
	for i, it := range items {
		one, err := fwd(context.Background(), [][]byte{it})
		if err != nil {
			t.Fatalf("item %d alone: %v", i, err)
		}
		want, have := floatsOf(t, one[0]), floatsOf(t, got[i])
		for j := range want {
			if d := math.Abs(float64(want[j] - have[j])); d > 1e-6 {
				t.Fatalf("item %d output %d: batched %v, alone %v", i, j, have[j], want[j])
			}
		}
	}
}

// An item too big to allocate even alone makes Run return the engine's
// out-of-memory error itself, after halving down to that item.
func TestTorchRealOOMAtSizeOne(t *testing.T) {
	m := loadGreedy(t)
	items := make([][]byte, 8)
	for i := range items {
		row := make([]float32, dIn)
		row[0] = 1
		if i == 5 {
			row[0] = 1 << 50 // 2^50 float32 elements
		}
		items[i] = rowBytes(row)
	}
	fwd := tensorForward(m, "heavy", dIn, dOut)
	var last error
	recording := func(ctx context.Context, b [][]byte) ([][]byte, error) {
		out, err := fwd(ctx, b)
		last = err
		return out, err
	}
	var st batch.Stats
	got, err := batch.Run(context.Background(), items, recording, batch.WithMaxBatchSize(8), batch.WithStats(func(s batch.Stats) { st = s }))
	if err == nil || err != last {
		t.Fatalf("err = %v, want the forward's last error value %v itself", err, last)
	}
	if !errors.Is(err, engine.ErrOutOfMemory) {
		t.Fatalf("err = %v, not out of memory", err)
	}
	var te *torch.Error
	if !errors.As(err, &te) {
		t.Errorf("err %T is not the engine's *torch.Error", err)
	}
	// [0,8) → [4,8) → [4,6) → [5,6) fail; [0,4) and [4,5) succeed.
	if got != nil || st.Retries != 3 || st.Calls != 6 {
		t.Errorf("outputs %v, stats %+v", got, st)
	}
	// The module keeps serving.
	if _, err := fwd(context.Background(), items[:5]); err != nil {
		t.Fatalf("call after OOM: %v", err)
	}
}
