package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// requestBytes is about how many tensor bytes one batch request carries:
// items go in requests of whole max-size batches up to it (at least one
// batch).
const requestBytes = 4 << 20

// RunBatch runs a batchable task over many items on the server, as
// client.Client.RunBatch does in-process, with the same results bit for
// bit: the items go in batch requests (oip.BatchParameter) of whole
// max-size batches, which the server runs through the batch executor — the
// same batches, the same padding — so no answer depends on how the server
// groups requests. Two requests are in flight at once. The outputs are in
// input order.
//
// The items must stack as in-process (client.BatchKey: equal tensor dtypes
// and shapes, equal other values); an item that does not is an error before
// anything is sent. opts are checked as in-process (batch.NewConfig over the
// task's batching settings): WithMaxBatchSize sets the batch size, WithStats
// is called after every answered request, and with WithPerItemErrors an
// item that failed on its own gets its own error while the others' outputs
// are returned with a batch.ItemErrors. Any other failure, or ctx ending,
// stops every request in flight and returns no outputs.
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
	if err := stackable(items); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	per := cfg.MaxBatchSize * max(1, requestBytes/max(1, itemBytes(items[0])*cfg.MaxBatchSize))
	type part struct{ from, to int }
	var parts []part
	for from := 0; from < len(items); from += per {
		parts = append(parts, part{from, min(from+per, len(items))})
	}

	ctx, cancel := context.WithCancel(ctx)
	type done struct {
		p    part
		outs []map[string]any
		errs []oip.ItemError
		err  error
	}
	jobs := make(chan part)
	results := make(chan done)
	var wg sync.WaitGroup
	for range min(2, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				o, errs, err := c.runItems(ctx, task, items[p.from:p.to], cfg.PerItemErrors)
				select {
				case results <- done{p, o, errs, err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, p := range parts {
			select {
			case jobs <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }() // no request outlives RunBatch

	st := batch.Stats{Items: len(items)}
	var itemErrs batch.ItemErrors
	for range parts {
		var d done
		select {
		case d = <-results:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: batch: stopped after %d of %d items: %w", c.where(task.TaskID), st.Done, st.Items, ctx.Err())
		}
		if d.err != nil {
			cancel()
			return nil, fmt.Errorf("%s: items %d to %d: %w", c.where(task.TaskID), d.p.from, d.p.to-1, d.err)
		}
		n := d.p.to - d.p.from
		st.Calls += (n + cfg.MaxBatchSize - 1) / cfg.MaxBatchSize
		st.Batches = st.Calls
		copy(outs[d.p.from:], d.outs)
		for _, e := range d.errs {
			itemErrs = append(itemErrs, batch.ItemError{Index: d.p.from + e.Index, Err: errors.New("server: " + e.Error)})
		}
		st.Done += n - len(d.errs)
		st.Failed += len(d.errs)
		if cfg.OnStats != nil {
			cfg.OnStats(st)
		}
	}
	if len(itemErrs) > 0 {
		slices.SortFunc(itemErrs, func(a, b batch.ItemError) int { return a.Index - b.Index })
		return outs, fmt.Errorf("%s: %w", c.where(task.TaskID), itemErrs)
	}
	return outs, nil
}

// runItems sends one batch request of items and returns their outputs.
func (c *Client) runItems(ctx context.Context, task *spec.InferenceTaskProfile, items []map[string]any, perItem bool) ([]map[string]any, []oip.ItemError, error) {
	call := make(map[string]any, len(items[0]))
	for k, v := range items[0] {
		call[k] = v
	}
	for k, v := range items[0] {
		t, ok := v.(*tensor.Tensor)
		if !ok {
			continue
		}
		data := make([]byte, 0, len(items)*len(t.Data))
		for _, it := range items {
			data = append(data, it[k].(*tensor.Tensor).Data...)
		}
		call[k] = &tensor.Tensor{DType: t.DType, Shape: append([]int64{int64(len(items))}, t.Shape...), Data: data}
	}
	req, err := c.inferRequest(task, call, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Parameters[oip.BatchParameter] = true
	if perItem {
		req.Parameters[oip.ItemErrorsParameter] = true
	}
	var resp oip.InferenceResponse
	if err := c.do(ctx, http.MethodPost, c.path("infer"), req, &resp); err != nil {
		return nil, nil, err
	}
	failed, err := oip.ParseItemErrors(resp.Parameters)
	if err != nil {
		return nil, nil, err
	}
	outs, err := oip.DecodeBatchOutputs(task, resp.Outputs, len(items), failed)
	return outs, failed, err
}

// stackable checks that the items can share forward calls, as the
// in-process batch executor requires: their batch keys agree.
func stackable(items []map[string]any) error {
	first, err := client.BatchKey(items[0])
	if err != nil {
		return fmt.Errorf("item 0: %w", err)
	}
	if first == "" || !hasTensor(items[0]) {
		return errors.New("item 0: no tensor kwarg to stack: the items would share one call")
	}
	for i := 1; i < len(items); i++ {
		k, err := client.BatchKey(items[i])
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		if k != first {
			return fmt.Errorf("item %d: its inputs do not stack with item 0's: the items of a batch agree on their tensors' dtypes and shapes and on every other input", i)
		}
	}
	return nil
}

func hasTensor(call map[string]any) bool {
	for _, v := range call {
		if _, ok := v.(*tensor.Tensor); ok {
			return true
		}
	}
	return false
}

// itemBytes returns the tensor bytes of one item.
func itemBytes(call map[string]any) int {
	n := 0
	for _, v := range call {
		if t, ok := v.(*tensor.Tensor); ok {
			n += len(t.Data)
		}
	}
	return n
}
