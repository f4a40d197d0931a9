package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/engine"
)

// A forward function maps a batch of inputs to one output per input, in
// order; Run cuts the items into batches of at most the max batch size
// and, with pad sizes, pads a short batch by repeating its final item, so
// that forward sees only the sizes a compiled model was built for. The
// padding's outputs are dropped.
func ExampleRun() {
	words := []string{"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g"}
	upper := func(ctx context.Context, b []string) ([]string, error) {
		c, _ := batch.CallFrom(ctx)
		fmt.Printf("forward: %d items at offset %d, sent as %d: %v\n", c.Items, c.Offset, c.Size, b)
		out := make([]string, len(b))
		for i, w := range b {
			out[i] = strings.ToUpper(w)
		}
		return out, nil
	}
	out, err := batch.Run(context.Background(), words, upper,
		batch.WithMaxBatchSize(4), batch.WithPadSizes(1, 2, 4))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
	// Output:
	// forward: 4 items at offset 0, sent as 4: [a bb ccc dddd]
	// forward: 3 items at offset 4, sent as 4: [eeeee ffffff g g]
	// [A BB CCC DDDD EEEEE FFFFFF G]
}

// When forward runs out of memory (an error matching engine.ErrOutOfMemory,
// as the libtorch engine returns it), Run retries only the failed slice,
// halved, and keeps the outputs of the batches that succeeded. Here the
// device holds at most two items at once.
func ExampleRun_outOfMemory() {
	items := []int{1, 2, 3, 4, 5, 6, 7, 8}
	square := func(ctx context.Context, b []int) ([]int, error) {
		if len(b) > 2 {
			fmt.Printf("forward %v: out of memory\n", b)
			return nil, fmt.Errorf("allocating %d activations: %w", len(b), engine.ErrOutOfMemory)
		}
		fmt.Printf("forward %v\n", b)
		out := make([]int, len(b))
		for i, x := range b {
			out[i] = x * x
		}
		return out, nil
	}
	out, err := batch.Run(context.Background(), items, square, batch.WithMaxBatchSize(4))
	fmt.Println(out, err)
	// Output:
	// forward [1 2 3 4]: out of memory
	// forward [1 2]
	// forward [3 4]
	// forward [5 6 7 8]: out of memory
	// forward [5 6]
	// forward [7 8]
	// [1 4 9 16 25 36 49 64] <nil>
}

// With WithPerItemErrors, an item that fails on its own gets its own
// error and every other item its output: Run bisects the failing batch
// until the item is alone. The error is a batch.ItemErrors listing the
// failed items by index.
func ExampleWithPerItemErrors() {
	paths := []string{"a.png", "b.png", "broken.png", "d.png", "e.png"}
	decode := func(ctx context.Context, b []string) ([]int, error) {
		out := make([]int, len(b))
		for i, p := range b {
			if strings.HasPrefix(p, "broken") {
				return nil, fmt.Errorf("%s: not a PNG", p)
			}
			out[i] = len(p)
		}
		return out, nil
	}
	out, err := batch.Run(context.Background(), paths, decode,
		batch.WithMaxBatchSize(4), batch.WithPerItemErrors())
	var ie batch.ItemErrors
	if errors.As(err, &ie) {
		for _, e := range ie {
			fmt.Printf("item %d failed: %v\n", e.Index, e.Err)
		}
	}
	fmt.Println(out) // the failed item's output is the zero value
	// Output:
	// item 2 failed: broken.png: not a PNG
	// [5 5 0 5 5]
}

// WithStats reports progress after every forward call.
func ExampleWithStats() {
	items := make([]int, 10)
	identity := func(ctx context.Context, b []int) ([]int, error) { return b, nil }
	_, err := batch.Run(context.Background(), items, identity, batch.WithMaxBatchSize(4),
		batch.WithStats(func(s batch.Stats) { fmt.Printf("%d of %d items\n", s.Done, s.Items) }))
	fmt.Println(err)
	// Output:
	// 4 of 10 items
	// 8 of 10 items
	// 10 of 10 items
	// <nil>
}
