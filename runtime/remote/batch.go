package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/batch"
)

// RunBatch runs a batchable task over many items on the server, one infer
// request per item with up to twice the max batch size in flight, so that
// a server with cross-request batching (wfserve -batch) merges them into
// full batches while the previous batch runs; against any other OIP server
// each item is one call. The outputs are in input order, as
// client.Client.RunBatch returns them.
//
// opts are checked as in-process (batch.NewConfig over the task's batching
// settings): WithMaxBatchSize sets the requests in flight (twice it),
// WithStats is called after every answered request, and with
// WithPerItemErrors an item the server refused (400) or failed on (500)
// gets its own error while the others' outputs are returned with a
// batch.ItemErrors. Any other failure, or ctx ending, stops every request
// in flight and returns no outputs.
func (c *Client) RunBatch(ctx context.Context, taskID string, items []map[string]any, opts ...batch.Option) ([]map[string]any, error) {
	task, err := c.spec.Task(taskID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err)
	}
	all, err := batch.TaskOptions(task)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	cfg, err := batch.NewConfig(append(all, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	outs := make([]map[string]any, len(items))
	if len(items) == 0 {
		return outs, nil
	}
	ctx, cancel := context.WithCancel(ctx)

	type done struct {
		i   int
		out map[string]any
		err error
	}
	jobs := make(chan int)
	results := make(chan done)
	var wg sync.WaitGroup
	for range min(2*cfg.MaxBatchSize, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				out, err := c.run(ctx, task, items[i], nil)
				select {
				case results <- done{i, out, err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range items {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }() // no request outlives RunBatch

	st := batch.Stats{Items: len(items)}
	var itemErrs batch.ItemErrors
	for range items {
		var d done
		select {
		case d = <-results:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: batch: stopped after %d of %d items: %w", c.where(task.TaskID), st.Done, st.Items, ctx.Err())
		}
		st.Calls++
		switch {
		case d.err == nil:
			outs[d.i] = d.out
			st.Done++
			st.Batches++
		case cfg.PerItemErrors && itemFailure(d.err):
			itemErrs = append(itemErrs, batch.ItemError{Index: d.i, Err: d.err})
			st.Failed++
		default:
			cancel()
			return nil, fmt.Errorf("%s: item %d: %w", c.where(task.TaskID), d.i, d.err)
		}
		if cfg.OnStats != nil {
			cfg.OnStats(st)
		}
	}
	if len(itemErrs) > 0 {
		sort.Slice(itemErrs, func(a, b int) bool { return itemErrs[a].Index < itemErrs[b].Index })
		return outs, fmt.Errorf("%s: %w", c.where(task.TaskID), itemErrs)
	}
	return outs, nil
}

// itemFailure reports whether err is an item's own failure: the server
// refused the item (400) or the model failed on it (500).
func itemFailure(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Status == http.StatusBadRequest || se.Status == http.StatusInternalServerError)
}
