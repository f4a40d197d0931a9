//go:build cgo

package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// mobileNetCkpt holds torchvision's mobilenet_v3_small as TorchScript
// (testdata/mobilenet.py, random weights), built once per test binary.
var mobileNetCkpt = enginetest.Checkpoints{Name: "client-mobilenet", Build: func(dir string) error {
	if out, err := exec.Command(debianPython, filepath.Join("testdata", "mobilenet.py"), filepath.Join(dir, "mobilenet.pt")).CombinedOutput(); err != nil {
		return fmt.Errorf("mobilenet.py: %v\n%s", err, out)
	}
	return nil
}}

// mobileNet returns the mobilenet checkpoint, or skips when Debian's
// python3-torchvision is missing.
func mobileNet(t testing.TB) string {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import torch, torchvision").Run(); err != nil {
		t.Skipf("%s cannot import torch and torchvision: install python3-torchvision (scripts/setup.sh)", debianPython)
	}
	return mobileNetCkpt.Path(t, "mobilenet.pt")
}

// invModel is a model of the invariance tests: where its checkpoint is, the
// name of its tensor argument, and item i's input.
type invModel struct {
	name   string
	path   func(t testing.TB) string
	arg    string
	item   func(i int) *tensor.Tensor
	bySize bool // its bits differ between any two batch sizes, by construction
}

func tokenItem(i int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(uint64(i), 11))
	v := make([]int64, 32)
	for j := range v {
		v[j] = r.Int64N(1000)
	}
	return tensor.FromInt64(v, 32)
}

func imageItem(i int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(uint64(i), 12))
	v := make([]float32, 3*224*224)
	for j := range v {
		v[j] = float32(r.NormFloat64())
	}
	return tensor.FromFloat32(v, 3, 224, 224)
}

// built returns the path of a checkpoint that build writes, built once per
// test binary.
func built(name string, build func(string) error) func(testing.TB) string {
	c := &enginetest.Checkpoints{Name: name, Build: func(dir string) error { return build(filepath.Join(dir, name+".pt")) }}
	return func(t testing.TB) string {
		t.Helper()
		return c.Path(t, name+".pt")
	}
}

var invModels = []invModel{
	{"tiny-encoder", built("inv-tiny-encoder", tinymodels.BuildEncoder), "tokens", tokenItem, false},
	{"attention", built("inv-attention", tinymodels.BuildAttention), "tokens", tokenItem, false},
	{"size-sensitive", built("inv-size-sensitive", tinymodels.BuildSizeSensitive), "tokens", tokenItem, true},
	{"mobilenet_v3_small", mobileNet, "x", imageItem, false},
}

// rowsOf runs one forward call on the items stacked and returns each item's
// output bytes.
func rowsOf(t *testing.T, m engine.Module, arg string, items []*tensor.Tensor) [][]byte {
	t.Helper()
	var data []byte
	for _, x := range items {
		data = append(data, x.Data...)
	}
	in := &tensor.Tensor{DType: items[0].DType, Shape: append([]int64{int64(len(items))}, items[0].Shape...), Data: data}
	out, err := m.Call(context.Background(), "forward", map[string]any{arg: in}, engine.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y := out.(*tensor.Tensor)
	step := len(y.Data) / len(items)
	rows := make([][]byte, len(items))
	for i := range rows {
		rows[i] = bytes.Clone(y.Data[i*step : (i+1)*step])
	}
	return rows
}

// relDiff is max|a-b| / max|b| over float32 rows.
func relDiff(t *testing.T, a, b []byte) float64 {
	t.Helper()
	fa := floatsOf(t, a)
	fb := floatsOf(t, b)
	var num, den float64
	for i := range fa {
		num = math.Max(num, math.Abs(float64(fa[i])-float64(fb[i])))
		den = math.Max(den, math.Abs(float64(fb[i])))
	}
	return num / den
}

func floatsOf(t *testing.T, b []byte) []float32 {
	t.Helper()
	v, err := (&tensor.Tensor{DType: tensor.Float32, Shape: []int64{int64(len(b) / 4)}, Data: b}).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// What libtorch does on the CPU with one item in different batches
// depends on the CPU's kernels (docs/batching.md has the figures of two
// machines). What holds on every machine, and is asserted: wherever the
// item's bits differ — between batch sizes, or between neighbours and
// positions at one size — they differ in the last bits only (relative ≤
// 2e-6), and the size-sensitive encoder, built to, differs between any two
// sizes. Which sizes and positions agree is measured and logged:
//
//   - an Intel Xeon (the first figures): at one size the item's bits never
//     depend on its neighbours or position; the tiny encoder gives the same
//     bits at every size, the attention encoder one set for a batch of
//     one and another from 2 on, mobilenet_v3_small one for 1, one for 2
//     to 15 and another from 16 on;
//   - an AVX-512 AMD EPYC: the tiny encoder's rows 8 to 15 of a batch of 16
//     differ from rows 0 to 7 (1.6e-7), the attention encoder and
//     mobilenet give the same bits from 1 to 8.
func TestBatchCompositionBitIdentity(t *testing.T) {
	t.Parallel()
	for _, md := range invModels {
		t.Run(md.name, func(t *testing.T) {
			m, err := torch.Default().Load(md.path(t), engine.LoadOptions{Device: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			x := md.item(0)
			others := make([]*tensor.Tensor, 24)
			for i := range others {
				others[i] = md.item(i + 1)
			}
			sizes := []int{1, 2, 3, 4, 8, 16}
			bySize := map[int][]byte{}
			for _, size := range sizes {
				// x first, in the middle and last, among two sets of
				// neighbours.
				for set := range 2 {
					for _, pos := range []int{0, size / 2, size - 1} {
						items := make([]*tensor.Tensor, size)
						for k := range items {
							items[k] = others[(k+set*7)%len(others)]
						}
						items[pos] = x
						got := rowsOf(t, m, md.arg, items)[pos]
						ref, ok := bySize[size]
						if !ok {
							bySize[size] = got
							continue
						}
						if d := relDiff(t, got, ref); d > 2e-6 {
							t.Errorf("batch of %d: the item at position %d among neighbour set %d differs from its first run by %.2g relative, more than the last bits", size, pos, set, d)
						} else if d > 0 {
							t.Logf("batch of %d: the item at position %d among neighbour set %d differs from its first run (relative %.2g)", size, pos, set, d)
						}
					}
				}
			}
			// The classes of sizes that give the same bits.
			var classes [][]int
			for _, size := range sizes {
				placed := false
				for i, c := range classes {
					if bytes.Equal(bySize[c[0]], bySize[size]) {
						classes[i] = append(c, size)
						placed = true
						break
					}
				}
				if !placed {
					classes = append(classes, []int{size})
				}
				if d := relDiff(t, bySize[size], bySize[1]); d > 2e-6 {
					t.Errorf("batch of %d and batch of 1 differ by %.2g relative, more than the last bits", size, d)
				}
			}
			t.Logf("libtorch %s: the sizes that give the same bits: %v", torch.Default().LibtorchVersion(), classes)
			if md.bySize && len(classes) != len(sizes) {
				t.Errorf("the size-sensitive encoder gives the same bits at two sizes: %v", classes)
			}
		})
	}
}

// invariantSpec is a family whose task batches the model's one tensor
// argument in batches of up to 8, padded to 1, 2, 4 or 8.
func invariantSpec(md invModel, invariant bool) *spec.ModelInferenceSpec {
	x := md.item(0)
	shape := spec.Shape{"N"}
	for _, d := range x.Shape {
		shape = append(shape, spec.Dim(fmt.Sprint(d)))
	}
	return &spec.ModelInferenceSpec{
		ModelFamilyID: "inv", DefaultVariantID: "default", DefaultTaskID: "embed",
		Variants: []spec.InferenceVariantSpec{{VariantID: "default"}},
		Tasks: []spec.InferenceTaskProfile{{
			TaskID: "embed",
			Inputs: []spec.InferenceFieldSpec{{FieldID: md.arg, Kind: spec.KindTensor, Target: spec.TargetCallKwargs,
				Required: true, DType: x.DType, Shape: shape}},
			Outputs:  []spec.InferenceArtifactSpec{{ArtifactID: "out", Kind: spec.ArtifactTensor, Required: true}},
			Batching: &spec.BatchingSpec{MaxBatchSize: 8, PadToBatchSizes: []int{1, 2, 4, 8}, Dim: "N", Invariant: invariant},
		}},
	}
}

// In batch-invariant mode an item's output is bit for bit the same whether
// it runs alone (Run, or RunBatch of one) or in a batch of any size up to
// 8, first, in the middle or last — so every size a batch is padded to,
// measured to give the max's bits, does (a wrongly measured size fails
// here) — whichever way the mode is asked for: the manifest's
// batching.invariant, the client option, or a batch option. Without it the
// size-sensitive encoder's answer alone differs from its answer in a batch
// (so does that of the models whose batch of one takes another kernel path,
// on the CPUs where it does).
func TestRunBatchInvariant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, md := range invModels[1:] {
		t.Run(md.name, func(t *testing.T) {
			path := md.path(t)
			newClient := func(invariant bool, opts ...client.Option) *client.Client {
				c, err := client.New(invariantSpec(md, invariant), append([]client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			x := md.item(0)
			item := func(t *tensor.Tensor) map[string]any { return map[string]any{md.arg: t} }
			out := func(res map[string]any) []byte { return bytes.Clone(res["out"].(*tensor.Tensor).Data) }

			// Without the mode: alone (padded to 1) vs in a batch of 3
			// (padded to 4).
			plain := newClient(false)
			alone, err := plain.Run(ctx, "embed", item(x), nil)
			if err != nil {
				t.Fatal(err)
			}
			grouped, err := plain.RunBatch(ctx, "embed", []map[string]any{item(md.item(1)), item(x), item(md.item(2))})
			if err != nil {
				t.Fatal(err)
			}
			switch same := bytes.Equal(out(alone), out(grouped[1])); {
			case same && md.bySize:
				t.Errorf("without invariant mode the item's output alone equals its output in a batch of 3: the test no longer shows what the mode is for")
			case same:
				t.Logf("on this CPU, without invariant mode the item's output alone equals its output in a batch of 3 (the size-sensitive encoder shows the difference)")
			}

			ways := []struct {
				name string
				c    *client.Client
				opts []batch.Option
			}{
				{"manifest invariant: true", newClient(true), nil},
				{"client.WithBatchInvariant", newClient(false, client.WithBatchInvariant()), nil},
				{"batch.WithInvariant", plain, []batch.Option{batch.WithInvariant()}},
			}
			var want []byte
			for _, w := range ways {
				check := func(what string, got []byte) {
					t.Helper()
					if want == nil {
						want = got
					} else if !bytes.Equal(got, want) {
						t.Errorf("%s: %s differs (relative %.2g)", w.name, what, relDiff(t, got, want))
					}
				}
				if w.opts == nil {
					res, err := w.c.Run(ctx, "embed", item(x), nil)
					if err != nil {
						t.Fatal(err)
					}
					check("Run alone", out(res))
				}
				for n := 1; n <= 8; n++ {
					for _, pos := range slices.Compact([]int{0, n / 2, n - 1}) {
						items := make([]map[string]any, n)
						for k := range items {
							items[k] = item(md.item(k + 3))
						}
						items[pos] = item(x)
						var st batch.Stats
						res, err := w.c.RunBatch(ctx, "embed", items, append(w.opts, batch.WithStats(func(s batch.Stats) { st = s }))...)
						if err != nil {
							t.Fatal(err)
						}
						// One call, padded at most to 8: to the smallest size
						// measured to give the max's bits. Those of the
						// size-sensitive encoder differ at every size: 8 alone.
						if st.Calls != 1 || st.Padded > 8-n || md.bySize && st.Padded != 8-n {
							t.Errorf("%s: batch of %d: stats %+v, want one call padded to a size equivalent to 8", w.name, n, st)
						}
						check(fmt.Sprintf("batch of %d, position %d", n, pos), out(res[pos]))
					}
				}
			}
			if !bytes.Equal(want, out(grouped[1])) && relDiff(t, want, out(grouped[1])) > 2e-6 {
				t.Errorf("the invariant answer is more than the last bits away from the padded batch's")
			}
		})
	}
}

// The equivalent sizes are measured once per machine and item shape: kept
// in the engine's cache folder (the compile cache's), read back by the next
// client of the model, which then pads as the cache says; with the cache
// off they are measured again.
func TestEquivalentSizesCached(t *testing.T) {
	md := invModels[1] // the attention encoder: a batch of one takes its own path on most CPUs
	dir := t.TempDir()
	t.Setenv("WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR", dir)
	ctx := context.Background()
	path := md.path(t)
	padded := func() int {
		t.Helper()
		c, err := client.New(invariantSpec(md, true), client.WithCheckpointPath(path), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var st batch.Stats
		if _, err := c.RunBatch(ctx, "embed", []map[string]any{{md.arg: md.item(0)}}, batch.WithStats(func(s batch.Stats) { st = s })); err != nil {
			t.Fatal(err)
		}
		return st.Padded
	}
	first := padded()
	files, _ := filepath.Glob(filepath.Join(dir, "batch-sizes", "*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Sizes []int  `json:"sizes"`
		Key   string `json:"key"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Sizes) == 0 || rec.Sizes[len(rec.Sizes)-1] != 8 || !strings.Contains(rec.Key, "max=8\n") {
		t.Fatalf("cache record %s (%v)", b, err)
	}
	if first != rec.Sizes[0]-1 {
		t.Errorf("a lone item was padded by %d; the measured sizes are %v", first, rec.Sizes)
	}
	// The next client reads the record: one that says the max alone pads
	// a lone item to 8.
	rec.Sizes = []int{8}
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := padded(); n != 7 {
		t.Errorf("after the cache record said [8], a lone item was padded by %d, want 7", n)
	}
	t.Setenv("WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR", "off")
	if n := padded(); n != first {
		t.Errorf("measured again with the cache off, a lone item was padded by %d, want %d", n, first)
	}
}

// A method whose outputs are all integers hides the last bits of the scores
// it chose them from, so the measurement cannot tell its batch sizes apart:
// an invariant batch of the argmax encoder goes at the max (a lone item
// padded by 7). Before this rule the argmax's equal outputs made every
// size look equivalent to the max, and a lone item ran alone — on the
// world model that let a player alone and in company part after thousands
// of chunks (docs/batching.md, "The equivalent sizes"). With the scores
// returned beside the answer, undeclared, the sizes are measured on them:
// the attention encoder's own.
func TestIntegerOutputsGoAtTheMax(t *testing.T) {
	measure := func(name string, build func(string) error) (sizes []int, padded int) {
		t.Helper()
		dir := t.TempDir()
		t.Setenv("WORLDFOUNDRY_TORCH_COMPILE_CACHE_DIR", dir)
		md := invModel{name, built("inv-"+name, build), "tokens", tokenItem, false}
		c, err := client.New(invariantSpec(md, true), client.WithCheckpointPath(md.path(t)), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var st batch.Stats
		out, err := c.RunBatch(context.Background(), "embed", []map[string]any{{md.arg: md.item(0)}}, batch.WithStats(func(s batch.Stats) { st = s }))
		if err != nil {
			t.Fatal(err)
		}
		if y, _ := out[0]["out"].(*tensor.Tensor); y == nil || len(out[0]) != 1 {
			t.Fatalf("%s answered %v, want one tensor", name, out[0])
		}
		files, _ := filepath.Glob(filepath.Join(dir, "batch-sizes", "*.json"))
		if len(files) != 1 {
			t.Fatalf("%s: cache files %v, want one", name, files)
		}
		var rec struct {
			Sizes []int `json:"sizes"`
		}
		if b, err := os.ReadFile(files[0]); err != nil || json.Unmarshal(b, &rec) != nil {
			t.Fatalf("%s: cache record %s (%v)", name, b, err)
		}
		return rec.Sizes, st.Padded
	}
	if sizes, padded := measure("attention-argmax", tinymodels.BuildAttentionArgmax); !slices.Equal(sizes, []int{8}) || padded != 7 {
		t.Errorf("the argmax encoder: sizes %v, a lone item padded by %d; want [8] and 7 (integer outputs cannot show which sizes agree)", sizes, padded)
	}
	want, _ := measure("attention", tinymodels.BuildAttention)
	if sizes, padded := measure("attention-argmax-scores", tinymodels.BuildAttentionArgmaxScores); !slices.Equal(sizes, want) || padded != want[0]-1 {
		t.Errorf("the argmax encoder with its scores: sizes %v, a lone item padded by %d; want the attention encoder's %v", sizes, padded, want)
	}
}
