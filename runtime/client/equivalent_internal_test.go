package client

import (
	"bytes"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A measurement stands for the items of one shape and one set of other
// inputs: a text encoder's sequences of one token take other kernels than
// those of sixteen, so each gets its own; a probe of items whose stacked
// inputs it cannot fill is refused; the probe's stacked values are random
// (zeros would hide kernel differences), its other inputs the item's.
func TestProbeKeyAndItems(t *testing.T) {
	t.Parallel()
	task := &spec.InferenceTaskProfile{TaskID: "embed", Batching: &spec.BatchingSpec{MaxBatchSize: 4, Dim: "N"},
		Inputs: []spec.InferenceFieldSpec{
			{FieldID: "tokens", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, DType: "int64", Shape: spec.Shape{"N", "L"}, Required: true},
			{FieldID: "normalize", Kind: spec.KindBool, Target: spec.TargetCallKwargs},
		}}
	item := func(l int, normalize bool) map[string]any {
		return map[string]any{"tokens": tensor.FromInt64(make([]int64, l), int64(l)), "normalize": normalize}
	}
	k1, err1 := probeKey(task, item(1, true))
	k16, err16 := probeKey(task, item(16, true))
	k16f, err16f := probeKey(task, item(16, false))
	if err1 != nil || err16 != nil || err16f != nil {
		t.Fatal(err1, err16, err16f)
	}
	if k1 == k16 || k16 == k16f {
		t.Errorf("keys %q, %q, %q: want one per shape and per other input", k1, k16, k16f)
	}
	if again, _ := probeKey(task, item(16, true)); again != k16 {
		t.Errorf("key %q then %q for the same item", k16, again)
	}
	odd := map[string]any{"tokens": &tensor.Tensor{DType: "complex64", Shape: []int64{2}, Data: make([]byte, 16)}}
	if _, err := probeKey(task, odd); err == nil {
		t.Error("a probe of a dtype it cannot fill was accepted")
	}

	probe, err := equivalenceProbe(task, item(16, false), 4, 1000)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 16*8)
	for i, p := range probe {
		tk := p["tokens"].(*tensor.Tensor)
		if bytes.Equal(tk.Data, zero) || p["normalize"] != false || len(tk.Shape) != 1 || tk.Shape[0] != 16 {
			t.Errorf("probe item %d: %v", i, p)
		}
		vs, err := tk.Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v < 0 || v >= 1000 {
				t.Fatalf("probe item %d: token %d outside [0, 1000)", i, v)
			}
		}
	}
	if bytes.Equal(probe[0]["tokens"].(*tensor.Tensor).Data, probe[1]["tokens"].(*tensor.Tensor).Data) {
		t.Error("two probe items are the same")
	}
}
