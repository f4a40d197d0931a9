package client_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// One call of a batchable task allocates input buffers for the rows it
// runs, not for max_batch_size rows (issue 31: a served 16 MiB request
// allocated 128 MiB, eight times its input, through the batch-of-one path).
func TestOneItemAllocatesOneRow(t *testing.T) {
	c, err := client.New(loadSpec(t, "tiny-encoder"), client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 1 << 20 // 8 MiB of token ids
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i % 1000)
	}
	call := map[string]any{"tokens": tensor.FromInt64(ids, n)}
	ctx := context.Background()
	if _, err := c.Run(ctx, "embed", call, nil); err != nil { // load, warm
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := c.Run(ctx, "embed", call, nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 3*8<<20/2 {
		t.Errorf("one %d MiB item allocated %d MiB in Go; want about one copy of it", 8, got>>20)
	}
}
