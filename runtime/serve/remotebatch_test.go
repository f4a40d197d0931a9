package serve_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// sizeSensitiveItem is item i of the size-sensitive encoder's tests: 32 token ids.
func sizeSensitiveItem(i int) map[string]any {
	r := rand.New(rand.NewPCG(uint64(i), 21))
	v := make([]int64, 32)
	for j := range v {
		v[j] = r.Int64N(1000)
	}
	return map[string]any{"tokens": tensor.FromInt64(v, 32)}
}

// sizeSensitiveClient is an in-process client of the size-sensitive encoder.
func sizeSensitiveClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(loadSpec(t, "size-sensitive"), append(clientOptions(t), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func embedding(out map[string]any) []byte { return out["embedding"].(*tensor.Tensor).Data }

// A remote <Task>Batch sends the batch: the server runs the same batches
// and padding as the in-process client, so every item's answer is the
// in-process batch's bit for bit — with cross-request batching on
// (invariant, the server's default) and off — on a model whose answers
// depend on the batch size.
func TestRemoteBatchEqualsInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	items := make([]map[string]any, 37) // four full batches and a padded one
	for i := range items {
		items[i] = sizeSensitiveItem(i)
	}
	for _, batching := range []bool{false, true} {
		var opts []client.Option
		if batching {
			opts = append(opts, client.WithBatchInvariant())
		}
		in := sizeSensitiveClient(t, opts...)
		want, err := in.RunBatch(ctx, "embed", items)
		if err != nil {
			t.Fatal(err)
		}
		// The model can tell: one item run alone (a batch of one) differs
		// from its row of the batch, so a remote batch sent item by item
		// would not give the in-process answers.
		alone, err := in.Run(ctx, "embed", items[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		if !batching && bytes.Equal(embedding(alone), embedding(want[0])) {
			t.Fatal("the size-sensitive encoder gives the same bits alone and in a batch: this test could not fail")
		}
		s := startFamilies(t, serve.Config{Batching: batching, BatchInvariant: batching}, loadSpec(t, "size-sensitive"))
		got, err := remoteClient(t, s, "size-sensitive").RunBatch(ctx, "embed", items)
		if err != nil {
			t.Fatal(err)
		}
		for i := range items {
			if !bytes.Equal(embedding(got[i]), embedding(want[i])) {
				t.Errorf("batching %v, item %d: the remote batch's answer differs from the in-process batch's", batching, i)
			}
		}
	}
}

// With cross-request batching in invariant mode, 32 clients' single
// requests get answers that do not depend on how the server grouped them:
// each is bit for bit what an in-process client in the same mode answers —
// on the size-sensitive encoder (every batch padded to the max) and on the
// attention encoder, whose batches are padded only to the sizes measured
// to give the max's bits (a wrongly measured size fails here).
func TestBatchInvariantServing(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"size-sensitive", "attention"} {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			in, err := client.New(loadSpec(t, family), append(clientOptions(t), client.WithBatchInvariant())...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { in.Close() })
			s := startFamilies(t, serve.Config{Batching: true, BatchInvariant: true, BatchDelay: time.Millisecond}, loadSpec(t, family))
			re := remoteClient(t, s, family)
			const clients, each = 32, 8
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := range each {
						item := sizeSensitiveItem(c*each + k)
						got, err := re.Run(ctx, "embed", item, nil)
						if err != nil {
							t.Error(err)
							return
						}
						want, err := in.Run(ctx, "embed", item, nil)
						if err != nil {
							t.Error(err)
							return
						}
						if !bytes.Equal(embedding(got), embedding(want)) {
							t.Errorf("client %d request %d: the served answer differs from the in-process one", c, k)
						}
					}
				}()
			}
			wg.Wait()
			st := s.srv.Stats()
			t.Logf("%d requests in %d batches", st.BatchedRequests, st.Batches)
			if st.Batches >= st.BatchedRequests {
				t.Errorf("no request shared a batch (%+v): the test did not exercise grouping", st)
			}
		})
	}
}
