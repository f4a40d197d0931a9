package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// bigBatch is large enough that preparing every item (validation, kwargs
// merging) takes far longer than the deadlines below: the issue measured
// 456 ms for 200,000 items before any forward call.
const bigBatch = 200_000

// deadlineSlack bounds how late a batch run may return after its deadline:
// about one batch's time of the tiny encoder (well under a millisecond) plus
// the scheduling noise of a shared, race-instrumented machine.
const deadlineSlack = 60 * time.Millisecond

// TestRunBatchHonoursDeadlineDuringPreparation runs the generated EmbedBatch
// over 200,000 items with deadlines of 1 ms and 20 ms: each must return
// within about one batch's time of its deadline, with an error matching
// context.DeadlineExceeded, whether the deadline falls in the typed
// validation, in the kwargs preparation or between forward calls.
func TestRunBatchHonoursDeadlineDuringPreparation(t *testing.T) {
	dir := checkpoints(t)
	c, err := tinyencoder.New(client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Backend().(*client.Client).Load(); err != nil {
		t.Fatal(err)
	}
	ps := make([]tinyencoder.EmbedParams, bigBatch)
	tok := tensor.FromInt64([]int64{1, 2, 3, 4, 5, 6, 7, 8}, 8)
	for i := range ps {
		ps[i] = tinyencoder.DefaultEmbedParams()
		ps[i].Tokens = tok
	}
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		res, err := c.EmbedBatch(ctx, ps)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || res != nil {
			t.Fatalf("deadline %v: got %d results, err %v; want no results and context.DeadlineExceeded", d, len(res), err)
		}
		if took > d+deadlineSlack {
			t.Errorf("deadline %v: returned after %v, want within %v of the deadline", d, took, deadlineSlack)
		}
	}

	// The untyped runner (what a server calls) honours it the same way.
	items := make([]map[string]any, bigBatch)
	for i := range items {
		items[i] = map[string]any{"tokens": tok, "normalize": true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Backend().(*client.Client).RunBatch(ctx, "embed", items)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > time.Millisecond+deadlineSlack {
		t.Errorf("Client.RunBatch: err %v after %v; want context.DeadlineExceeded within %v", err, took, deadlineSlack)
	}
}
