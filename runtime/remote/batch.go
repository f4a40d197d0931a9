package remote

import (
	"context"
	"errors"
	"fmt"
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

// CallBatch runs a batchable task (a task of Spec) over the items of in on
// the server, as client.Client.CallBatch does in-process, with the same
// results bit for bit: the items go in batch requests (oip.BatchParameter) of whole
// max-size batches, which the server runs through the batch executor — the
// same batches, the same padding — so no answer depends on how the server
// groups requests. Two requests are in flight at once. The outputs are in
// input order.
//
// The items must share forward calls as in-process (client.BatchConflict);
// an item that does not is an error before anything is sent. opts are
// checked as in-process (batch.NewConfig over the task's batching
// settings): WithMaxBatchSize sets the batch size, WithStats is called
// after every answered request, and with WithPerItemErrors an item that
// failed on its own gets its own error while the others' outputs are
// handed to each with a batch.ItemErrors. each is called once every
// request is answered. Any other failure, or ctx ending, stops every
// request in flight and hands no outputs.
func (c *Client) CallBatch(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, each func(item int, out map[string]any) error, opts ...batch.Option) error {
	all, err := batch.TaskOptions(task)
	if err != nil {
		return fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	cfg, err := batch.NewConfig(append(all, opts...)...)
	if err != nil {
		return fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	n := in.Len()
	if n == 0 {
		return nil
	}
	stacked, err := stackable(task, in)
	if err != nil {
		return fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	outs := make([]map[string]any, n)
	per := cfg.MaxBatchSize * max(1, requestBytes/max(1, itemBytes(in, stacked)*cfg.MaxBatchSize))
	type part struct{ from, to int }
	var parts []part
	for from := 0; from < n; from += per {
		parts = append(parts, part{from, min(from+per, n)})
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
				o, errs, err := c.runItems(ctx, task, in, stacked, p.from, p.to, cfg.PerItemErrors)
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

	st := batch.Stats{Items: n}
	var itemErrs batch.ItemErrors
	for range parts {
		var d done
		select {
		case d = <-results:
		case <-ctx.Done():
			return fmt.Errorf("%s: batch: stopped after %d of %d items: %w", c.where(task.TaskID), st.Done, st.Items, ctx.Err())
		}
		if d.err != nil {
			cancel()
			return fmt.Errorf("%s: items %d to %d: %w", c.where(task.TaskID), d.p.from, d.p.to-1, d.err)
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
	for i, out := range outs {
		if out == nil {
			continue
		}
		if err := each(i, out); err != nil {
			return err
		}
	}
	if len(itemErrs) > 0 {
		slices.SortFunc(itemErrs, func(a, b batch.ItemError) int { return a.Index - b.Index })
		return fmt.Errorf("%s: %w", c.where(task.TaskID), itemErrs)
	}
	return nil
}

// RunBatch runs task taskID over items given as untyped call kwargs and
// returns each item's outputs in input order (nil for an item that failed
// on its own): CallBatch with them as Inputs (client.KwargsOf).
func (c *Client) RunBatch(ctx context.Context, taskID string, items []map[string]any, opts ...batch.Option) ([]map[string]any, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, items, nil)
	if err != nil {
		return nil, err
	}
	return client.CollectBatch(ctx, c, task, in, opts...)
}

// runItems sends one batch request of the items [from, to) of in and
// returns their outputs: the stacked inputs stacked along a new leading
// dimension, every other input item from's (which the others share).
func (c *Client) runItems(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, stacked []int, from, to int, perItem bool) ([]map[string]any, []oip.ItemError, error) {
	call := client.CallKwargs(task, in, from)
	for _, f := range stacked {
		t := in.Input(from, f).(*tensor.Tensor)
		data := make([]byte, 0, (to-from)*len(t.Data))
		for i := from; i < to; i++ {
			data = append(data, in.Input(i, f).(*tensor.Tensor).Data...)
		}
		call[task.Inputs[f].FieldID] = &tensor.Tensor{DType: t.DType, Shape: append([]int64{int64(to - from)}, t.Shape...), Data: data}
	}
	req, err := c.t.request(task, call, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Parameters[oip.BatchParameter] = true
	if perItem {
		req.Parameters[oip.ItemErrorsParameter] = true
	}
	resp, err := c.t.Infer(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	failed, err := oip.ParseItemErrors(resp.Parameters)
	if err != nil {
		return nil, nil, err
	}
	outs, err := oip.DecodeBatchOutputs(task, resp.Outputs, to-from, failed)
	return outs, failed, err
}

// stackable checks that the items can share forward calls, as the
// in-process batch executor requires (client.BatchConflict), and returns
// the stacked inputs: the task's stacked fields item 0 gives a tensor for.
func stackable(task *spec.InferenceTaskProfile, in client.Inputs) ([]int, error) {
	var stacked []int
	for f := range task.Inputs {
		if _, ok := in.Input(0, f).(*tensor.Tensor); ok && task.Inputs[f].IsStacked() {
			stacked = append(stacked, f)
		}
	}
	if len(stacked) == 0 {
		return nil, errors.New("item 0: no tensor kwarg to stack: the items would share one call")
	}
	for i := 1; i < in.Len(); i++ {
		if why := client.BatchConflict(task, in, i, in, 0); why != "" {
			return nil, &client.BatchConflictError{Item: i, Reason: why}
		}
	}
	return stacked, nil
}

// itemBytes returns the stacked tensor bytes of one item.
func itemBytes(in client.Inputs, stacked []int) int {
	n := 0
	for _, f := range stacked {
		n += len(in.Input(0, f).(*tensor.Tensor).Data)
	}
	return n
}
