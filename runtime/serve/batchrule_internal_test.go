package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// TestBatcherGroupsAsInProcess puts the same items through the server's
// cross-request batcher — each item as the request a remote client sends,
// decoded as the server decodes it, queued in arrival order — and through
// the in-process batch executor, from typed params: every group the server
// forms is a batch the in-process executor runs, and any two items the
// server keeps apart are a batch it refuses (client.BatchConflictError),
// so both decide by the same rule.
func TestBatcherGroupsAsInProcess(t *testing.T) {
	t.Parallel()
	fam := tinyencoder.Spec()
	task := &fam.Tasks[0]
	model, err := oip.NewModel(fam)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(n, seed int) *tensor.Tensor {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(seed*31 + i)
		}
		return tensor.FromInt64(v, int64(n))
	}
	// Three lengths, both normalize settings, interleaved: five classes of
	// at most four items (under the max batch size of 8).
	var ps []tinyencoder.EmbedParams
	for i := range 14 {
		p := tinyencoder.DefaultEmbedParams()
		p.Tokens = ids([]int{6, 8, 6, 10}[i%4], i)
		p.Normalize = i%3 != 0
		ps = append(ps, p)
	}

	// The server: requests decoded and queued, then grouped batch by batch.
	b := &batcher{task: task, max: task.Batching.MaxBatchSize}
	for i := range ps {
		inputs, err := oip.EncodeInputs(task, ps[i].CallKwargs(), ps[i].LoadKwargs())
		if err != nil {
			t.Fatal(err)
		}
		call, _, err := model.Args(task, inputs, oip.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b.waiting = append(b.waiting, &pending{ctx: context.Background(), call: call, in: client.Kwargs(task, call)})
	}
	index := map[*pending]int{}
	for i, p := range b.waiting {
		index[p] = i
	}
	var groups [][]int
	for len(b.waiting) > 0 {
		g := b.group()
		b.take(g)
		var idx []int
		for _, p := range g {
			idx = append(idx, index[p])
		}
		groups = append(groups, idx)
	}
	if len(groups) < 2 || len(groups) == len(ps) {
		t.Fatalf("groups %v: the items should fall into a few batches", groups)
	}

	// In-process: the generated client's EmbedBatch on a client whose
	// checkpoint is missing — a batch the executor accepts gets as far as
	// loading; one it refuses fails before, on the rule.
	in, err := client.New(fam, client.WithCheckpointPath(t.TempDir()+"/missing.pt"))
	if err != nil {
		t.Fatal(err)
	}
	c := tinyencoder.NewClient(in)
	run := func(items ...int) error {
		batch := make([]tinyencoder.EmbedParams, len(items))
		for k, i := range items {
			batch[k] = ps[i]
		}
		_, err := c.EmbedBatch(context.Background(), batch)
		return err
	}
	var conflict *client.BatchConflictError
	for _, g := range groups {
		if err := run(g...); errors.As(err, &conflict) || !errors.Is(err, client.ErrCheckpoint) {
			t.Errorf("server group %v: in-process %v, want it accepted (and the load to fail)", g, err)
		}
	}
	for a, ga := range groups {
		for _, gb := range groups[a+1:] {
			for _, i := range ga {
				for _, j := range gb {
					if err := run(i, j); !errors.As(err, &conflict) {
						t.Errorf("items %d and %d, apart on the server: in-process %v, want a BatchConflictError", i, j, err)
					}
				}
			}
		}
	}
	t.Log("server groups:", fmt.Sprint(groups))
	if !slices.IsSortedFunc(groups, func(x, y []int) int { return x[0] - y[0] }) {
		t.Errorf("groups %v: each batch starts with the oldest request left", groups)
	}
}
