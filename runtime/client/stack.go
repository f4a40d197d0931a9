package client

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/spec"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

// itemOutputs is one item's outputs: a row of the forward call that ran it.
// The zero value is an item that did not run (batch.WithPerItemErrors).
type itemOutputs struct {
	f   *forwardOutputs
	row int
}

// forwardOutputs are one forward call's outputs split by item: views[row*
// len(ids)+a] is artifact ids[a] of the call's row-th item, sharing the
// call's output memory.
type forwardOutputs struct {
	ids   []string
	views []wftensor.Tensor
}

// ran reports whether the item ran.
func (o itemOutputs) ran() bool { return o.f != nil }

// fill sets m (cleared first) to the item's outputs keyed by artifact id.
func (o itemOutputs) fill(m map[string]any) {
	clear(m)
	k := o.row * len(o.f.ids)
	for a, id := range o.f.ids {
		m[id] = &o.f.views[k+a]
	}
}

// runStacked runs a batchable task over the items of in (see
// Client.CallBatch): each forward call stacks the items' tensors straight
// into one reused input buffer per stacked input and splits the outputs
// into per-item views, allocating per call, not per item.
func (c *Client) runStacked(ctx context.Context, ti int, task *spec.InferenceTaskProfile, in Inputs, co CallOptions, opts ...batch.Option) ([]itemOutputs, error) {
	if _, _, err := c.runConfig(ti, task, c.current(), opts); err != nil { // before loading anything
		return nil, err
	}
	n := in.Len()
	if n == 0 {
		if _, err := c.load(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.where(""), err)
		}
		return []itemOutputs{}, nil
	}
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("%s: item %d: %s", c.where(task.TaskID), i, fmt.Sprintf(format, args...))
	}
	// What is stacked: the stacked inputs item 0 gives a tensor for.
	var stacked []int
	var first []*wftensor.Tensor
	for f := range task.Inputs {
		fs := &task.Inputs[f]
		if !fs.IsStacked() {
			continue
		}
		v := in.Input(0, f)
		t, isTensor := v.(*wftensor.Tensor)
		switch {
		case isTensor && t != nil:
			if err := t.Check(); err != nil {
				return nil, fail(0, "field %q: %v", fs.FieldID, err)
			}
			stacked, first = append(stacked, f), append(first, t)
		case v != nil || fs.Required:
			return nil, fail(0, "field %q is stacked by batching and required, but the item gives %s, not a tensor", fs.FieldID, describe(v))
		}
	}
	if len(stacked) == 0 {
		return nil, fail(0, "no tensor kwarg to stack: the items would share one call")
	}
	// Every item must share forward calls with the first (the one rule,
	// BatchConflict): say so before anything is loaded or run.
	for i := 1; i < n; i++ {
		if err := checkEvery(ctx, i); err != nil {
			return nil, fmt.Errorf("%s: stopped while preparing item %d of %d: %w", c.where(task.TaskID), i, n, err)
		}
		if why := BatchConflict(task, in, i, in, 0); why != "" {
			return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), &BatchConflictError{Item: i, Reason: why})
		}
		for j, f := range stacked {
			if t := in.Input(i, f).(*wftensor.Tensor); len(t.Data) != len(first[j].Data) {
				return nil, fail(i, "field %q: %v", task.Inputs[f].FieldID, t.Check())
			}
		}
	}
	l, err := c.load()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err) // a load error is the variant's, not the task's
	}
	all, cfg, err := c.runConfig(ti, task, l, opts)
	if err != nil {
		return nil, err
	}
	if cfg.Invariant {
		first := make(map[string]any, len(task.Inputs))
		for f := range task.Inputs {
			if v := in.Input(0, f); v != nil {
				first[task.Inputs[f].FieldID] = v
			}
		}
		all, cfg, err = c.withEquivalence(ctx, ti, task, l, all, cfg, first)
	}
	if err != nil {
		return nil, err
	}
	kw, err := l.kwargs(ti, task, in, 0)
	if err != nil {
		return nil, fail(0, "%v", err)
	}

	// One input buffer and one tensor per stacked kwarg and lane, reused by
	// every forward call of the lane (the engine copies its inputs), sized
	// for the largest call these items make: a single item is one row (or
	// its pad size), not max_batch_size rows.
	rowsAtMost := min(n, cfg.MaxBatchSize)
	maxRows := max(rowsAtMost, cfg.PaddedSize(rowsAtMost))
	type laneInputs struct {
		call    map[string]any
		stacked []wftensor.Tensor
	}
	// Lane 0's buffers are made now, in kw itself; another lane's by its
	// first call, from a copy of kw: Run may use fewer lanes than cfg.Lanes
	// (WithAutoLanes), and calls of one lane never overlap.
	lanes := make([]laneInputs, cfg.Lanes)
	newLane := func(call map[string]any) laneInputs {
		ln := laneInputs{call: call, stacked: make([]wftensor.Tensor, len(stacked))}
		for j, f := range stacked {
			ln.stacked[j] = wftensor.Tensor{
				DType: first[j].DType,
				Shape: append([]int64{0}, first[j].Shape...),
				Data:  make([]byte, 0, maxRows*len(first[j].Data)),
			}
			call[task.Inputs[f].FieldID] = &ln.stacked[j]
		}
		return ln
	}
	lanes[0] = newLane(kw)
	forward := func(ctx context.Context, rows []int) ([]itemOutputs, error) {
		bc, _ := batch.CallFrom(ctx)
		ln := &lanes[bc.Lane]
		if ln.call == nil {
			*ln = newLane(maps.Clone(kw))
		}
		for j := range ln.stacked {
			st := &ln.stacked[j]
			st.Shape[0] = int64(len(rows))
			st.Data = st.Data[:0]
			for _, i := range rows {
				st.Data = append(st.Data, in.Input(i, stacked[j]).(*wftensor.Tensor).Data...)
			}
		}
		call := ln.call
		raw, err := l.mod.Call(ctx, task.MethodName(), call, co.engine(l.autocast))
		if err != nil {
			return nil, err
		}
		out, err := l.checkedOutputs(ti, task, raw)
		if err != nil {
			return nil, err
		}
		if ctx.Value(measuringKey{}) != nil {
			out = withUndeclared(out, raw, len(rows))
		}
		f, err := splitOutputs(out, len(rows))
		if err != nil {
			return nil, err
		}
		res := make([]itemOutputs, len(rows))
		for r := range res {
			res[r] = itemOutputs{f: f, row: r}
		}
		return res, nil
	}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	res, err := batch.Run(ctx, rows, forward, all...)
	if err != nil {
		return res, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return res, nil
}

// batchConfig returns the options of a batched run of task, in the order
// they apply — the task's batching block, the persistent key, the client's
// invariance (WithBatchInvariant), opts, and, once the module is loaded
// (l not nil), the batch range a compiled package was exported for — and
// the config they make. Errors name the task.
func (c *Client) batchConfig(task *spec.InferenceTaskProfile, l *loaded, opts []batch.Option) ([]batch.Option, batch.Config, error) {
	all, err := batch.TaskOptions(task)
	if err != nil {
		return nil, batch.Config{}, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	if bs, ok := l.scaledBatchSize(task); ok {
		all = append(all, scaledBatchSize(task.Batching, bs)...)
	}
	// The forward below keeps its buffers per lane: Run may choose lanes.
	all = append(all, batch.WithPersistentForward(c.where(task.TaskID)), batch.WithAutoLanes())
	if c.opts.BatchInvariant {
		all = append(all, batch.WithInvariant())
	}
	all = append(all, opts...)
	if l != nil && l.callSpec != nil {
		// A compiled package takes the batch sizes it was exported for.
		if r, ok := contract.BatchRange(task, *l.callSpec); ok {
			all = append(all, batch.WithBatchRange(int(r.Min), int(r.Max)))
		}
	}
	cfg, err := batch.NewConfig(all...)
	if err != nil {
		return nil, batch.Config{}, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return all, cfg, nil
}

// runConfig is batchConfig for task (index ti), read from what the load
// resolved when the caller adds no options; l is nil before the load.
func (c *Client) runConfig(ti int, task *spec.InferenceTaskProfile, l *loaded, opts []batch.Option) ([]batch.Option, batch.Config, error) {
	if l != nil && len(opts) == 0 && (ti < len(c.spec.Tasks) && task == &c.spec.Tasks[ti] || task == l.tasks[ti].task) {
		lt := &l.tasks[ti]
		return lt.batch, lt.batchCfg, lt.batchErr
	}
	return c.batchConfig(task, l, opts)
}

// scaledBatchSize returns the max batch size chosen from free memory for
// task (scale_to_memory), when the load chose one.
func (l *loaded) scaledBatchSize(task *spec.InferenceTaskProfile) (int, bool) {
	if l == nil || l.batchSizes == nil {
		return 0, false
	}
	bs, ok := l.batchSizes[task.TaskID]
	return bs.Size, ok
}

// scaledBatchSize returns the options that make n a task's max batch size:
// the max, and the pad sizes below n with n ending them.
func scaledBatchSize(b *spec.BatchingSpec, n int) []batch.Option {
	opts := []batch.Option{batch.WithMaxBatchSize(n)}
	if len(b.PadToBatchSizes) > 0 {
		pads := slices.DeleteFunc(slices.Clone(b.PadToBatchSizes), func(p int) bool { return p >= n })
		opts = append(opts, batch.WithPadSizes(append(pads, n)...))
	}
	return opts
}

// withEquivalence adds to an invariant batch config the sizes measured to
// give the max batch size's bits for items like item (one item's inputs by
// field id; equivalentSizes), measuring them first when the loaded model
// has not.
func (c *Client) withEquivalence(ctx context.Context, ti int, task *spec.InferenceTaskProfile, l *loaded, all []batch.Option, cfg batch.Config, item map[string]any) ([]batch.Option, batch.Config, error) {
	o := c.equivalentSizes(ctx, ti, task, l, cfg, item)
	if o == nil {
		return all, cfg, nil
	}
	all = append(slices.Clip(all), o)
	cfg, err := batch.NewConfig(all...)
	if err != nil {
		return nil, batch.Config{}, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return all, cfg, nil
}

// splitOutputs splits each output tensor of a forward call of n items
// along its leading dimension: one allocation for all the views.
func splitOutputs(out map[string]any, n int) (*forwardOutputs, error) {
	f := &forwardOutputs{ids: make([]string, 0, len(out))}
	for k := range out {
		f.ids = append(f.ids, k)
	}
	sort.Strings(f.ids)
	f.views = make([]wftensor.Tensor, n*len(f.ids))
	for a, k := range f.ids {
		t, ok := out[k].(*wftensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("artifact %q: a batched method must return tensors, got %s", k, describe(out[k]))
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("artifact %q: %w", k, err)
		}
		if len(t.Shape) == 0 || t.Shape[0] != int64(n) {
			return nil, fmt.Errorf("artifact %q: tensor %s%v has no leading dimension of %d", k, t.DType, t.Shape, n)
		}
		shape := slices.Clip(slices.Clone(t.Shape[1:]))
		step := len(t.Data) / max(n, 1)
		for r := range n {
			f.views[r*len(f.ids)+a] = wftensor.Tensor{DType: t.DType, Shape: shape, Data: t.Data[r*step : (r+1)*step : (r+1)*step]}
		}
	}
	return f, nil
}

// GobEncode encodes the item's outputs keyed by artifact id, so that a
// sharded run (batch.WithSharding) can send them to other ranks.
func (o itemOutputs) GobEncode() ([]byte, error) {
	m := map[string]*wftensor.Tensor{}
	if o.ran() {
		k := o.row * len(o.f.ids)
		for a, id := range o.f.ids {
			m[id] = &o.f.views[k+a]
		}
	}
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(m)
	return b.Bytes(), err
}

// GobDecode decodes what GobEncode encoded into a one-row forwardOutputs.
func (o *itemOutputs) GobDecode(data []byte) error {
	var m map[string]*wftensor.Tensor
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil {
		return err
	}
	f := &forwardOutputs{ids: make([]string, 0, len(m)), views: make([]wftensor.Tensor, 0, len(m))}
	for id := range m {
		f.ids = append(f.ids, id)
	}
	sort.Strings(f.ids)
	for _, id := range f.ids {
		if m[id] == nil {
			return fmt.Errorf("artifact %q: no tensor", id)
		}
		f.views = append(f.views, *m[id])
	}
	*o = itemOutputs{f: f}
	return nil
}
