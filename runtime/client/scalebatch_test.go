package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// A task whose batching says scale_to_memory gets its max batch size from
// the device's free memory when the model loads (the seed's memory-based
// batch size, device.ChooseBatchSize): max_batch_size 16 is the size for
// about 24 GiB free, so a GPU with 8 GiB free runs batches of 4 and one
// with 78 GiB batches of 48; pad sizes above the chosen size give way to
// it; the task's variable sets it outright. The engine is a fake whose
// GPUs report that memory and whose module answers zeros.
func TestScaleToMemory(t *testing.T) {
	path := enginetest.Fresh(t, "model.pt", tinymodels.BuildAttention) // read by nothing but the format check
	sp := func(pads ...int) *spec.ModelInferenceSpec {
		return &spec.ModelInferenceSpec{
			ModelFamilyID: "scaled", DefaultVariantID: "default", DefaultTaskID: "embed",
			Variants: []spec.InferenceVariantSpec{{VariantID: "default"}},
			Tasks: []spec.InferenceTaskProfile{{
				TaskID: "embed",
				Inputs: []spec.InferenceFieldSpec{{FieldID: "tokens", Kind: spec.KindTensor, Target: spec.TargetCallKwargs,
					Required: true, DType: tensor.Int64, Shape: spec.Shape{"N", "4"}}},
				Outputs:  []spec.InferenceArtifactSpec{{ArtifactID: "out", Kind: spec.ArtifactTensor, Required: true}},
				Batching: &spec.BatchingSpec{MaxBatchSize: 16, PadToBatchSizes: pads, Dim: "N", ScaleToMemory: true},
			}},
		}
	}
	run := func(t *testing.T, s *spec.ModelInferenceSpec, freeGiB float64, items int) []string {
		t.Helper()
		eng := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, freeGiB)},
			Schemas: []engine.MethodSchema{{Name: "forward", Arguments: []engine.Argument{{Name: "tokens", Type: "Tensor"}}, Returns: []string{"Tensor"}}}}
		var sizes []string // the client reuses its input buffers: read each call's size as it runs
		eng.OnCall = func(_ context.Context, c enginetest.Call, _ func(context.Context, map[string]any) (any, error)) (any, error) {
			n := c.Kwargs["tokens"].(*tensor.Tensor).Shape[0]
			sizes = append(sizes, fmt.Sprint(n))
			return tensor.FromFloat32(make([]float32, n), n), nil
		}
		c, err := client.New(s, client.WithEngine(eng), client.WithCheckpointPath(path), client.WithDevice("cuda:0"), client.WithDType("float32"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		in := make([]map[string]any, items)
		for i := range in {
			in[i] = map[string]any{"tokens": tensor.FromInt64([]int64{1, 2, 3, 4}, 4)}
		}
		if _, err := c.RunBatch(context.Background(), "embed", in, batch.WithLanes(1)); err != nil {
			t.Fatal(err)
		}
		return sizes
	}
	for _, tc := range []struct {
		name    string
		pads    []int
		freeGiB float64
		env     string
		items   int
		want    []string
	}{
		{"8 GiB free: a quarter", nil, 8, "", 10, []string{"4", "4", "2"}},
		{"8 GiB free, pad sizes give way", []int{1, 2, 8, 16}, 8, "", 10, []string{"4", "4", "2"}},
		{"24 GiB free: as written", []int{1, 2, 8, 16}, 24, "", 18, []string{"16", "2"}},
		{"78 GiB free: three times", nil, 78, "", 50, []string{"48", "2"}},
		{"the task's variable wins", nil, 78, "3", 7, []string{"3", "3", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WORLDFOUNDRY_BATCH_SIZE_EMBED", tc.env)
			if got := run(t, sp(tc.pads...), tc.freeGiB, tc.items); !slices.Equal(got, tc.want) {
				t.Errorf("batch sizes %v, want %v", got, tc.want)
			}
		})
	}
}
