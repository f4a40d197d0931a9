package client

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/spec"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

// stackedItems is a batch as runStacked reads it: column by column, so that
// neither the typed path (generated params) nor the map path needs a kwargs
// map or a tensor per item.
type stackedItems struct {
	// n is the number of items.
	n int
	// call is item 0's call kwargs; its stacked entries are replaced by the
	// stacked tensors of each forward call.
	call map[string]any
	// ids are the call kwargs that batching stacks.
	ids []string
	// tensor returns item i's value of ids[j] (nil when the item has none).
	tensor func(i, j int) *wftensor.Tensor
	// differs returns the first call kwarg, other than ids, in which item i
	// (> 0) differs from item 0, or "" when they agree.
	differs func(i int) string
}

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

// mapItems describes per-item kwargs maps as stackedItems: every tensor in
// item 0's kwargs is stacked (sorted by name); every other value must be
// equal across the items.
func mapItems(items []map[string]any) stackedItems {
	s := stackedItems{n: len(items)}
	if len(items) == 0 {
		return s
	}
	s.call = items[0]
	for k, v := range items[0] {
		if _, ok := v.(*wftensor.Tensor); ok {
			s.ids = append(s.ids, k)
		}
	}
	sort.Strings(s.ids)
	s.tensor = func(i, j int) *wftensor.Tensor {
		t, _ := items[i][s.ids[j]].(*wftensor.Tensor)
		return t
	}
	s.differs = func(i int) string {
		for k, v := range items[0] {
			if _, stacked := v.(*wftensor.Tensor); stacked {
				continue
			}
			if w, ok := items[i][k]; !ok || !sameValue(v, w) {
				return k
			}
		}
		for k := range items[i] {
			if _, ok := items[0][k]; !ok {
				return k
			}
		}
		return ""
	}
	return s
}

// runStacked runs a batchable task over items (see Client.RunBatch): each
// forward call stacks the items' tensors straight into one reused input
// buffer per stacked kwarg and splits the outputs into per-item views,
// allocating per call, not per item.
func (c *Client) runStacked(ctx context.Context, task *spec.InferenceTaskProfile, items stackedItems, co CallOptions, opts ...batch.Option) ([]itemOutputs, error) {
	if _, _, err := c.batchConfig(task, nil, opts); err != nil { // before loading anything
		return nil, err
	}
	l, err := c.load()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err) // a load error is the variant's, not the task's
	}
	all, cfg, err := c.batchConfig(task, l, opts)
	if err != nil {
		return nil, err
	}
	if items.n == 0 {
		return []itemOutputs{}, nil
	}
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("%s: item %d: %s", c.where(task.TaskID), i, fmt.Sprintf(format, args...))
	}
	kw, err := c.kwargs(task, items.call)
	if err != nil {
		return nil, fail(0, "%v", err)
	}
	for _, f := range task.Inputs {
		if f.Required && f.IsStacked() && !slices.Contains(items.ids, f.FieldID) {
			return nil, fail(0, "field %q is stacked by batching and required, but the item gives %s, not a tensor", f.FieldID, describe(kw[f.FieldID]))
		}
	}
	if len(items.ids) == 0 {
		return nil, fail(0, "no tensor kwarg to stack: the items would share one call")
	}
	// Every item must stack with the first: say so before anything runs.
	first := make([]*wftensor.Tensor, len(items.ids))
	for j := range items.ids {
		first[j] = items.tensor(0, j)
		if err := first[j].Check(); err != nil {
			return nil, fail(0, "field %q: %v", items.ids[j], err)
		}
	}
	for i := 1; i < items.n; i++ {
		if err := checkEvery(ctx, i); err != nil {
			return nil, fmt.Errorf("%s: stopped while preparing item %d of %d: %w", c.where(task.TaskID), i, items.n, err)
		}
		for j, id := range items.ids {
			t := items.tensor(i, j)
			if t == nil {
				return nil, fail(i, "field %q is stacked by batching, but the item gives no tensor (item 0 does)", id)
			}
			if t.DType != first[j].DType || !slices.Equal(t.Shape, first[j].Shape) {
				return nil, fail(i, "field %q is %s%v, but item 0's is %s%v: the items of a batch must agree on dtype and shape",
					id, t.DType, t.Shape, first[j].DType, first[j].Shape)
			}
			if len(t.Data) != len(first[j].Data) {
				return nil, fail(i, "field %q: %v", id, t.Check())
			}
		}
		if k := items.differs(i); k != "" {
			return nil, fail(i, "field %q differs from item 0's: the items of a batch share every input that batching does not stack", k)
		}
	}

	// One input buffer and one tensor per stacked kwarg and lane, reused by
	// every forward call of the lane (the engine copies its inputs), sized
	// for the largest call these items make: a single item is one row (or
	// its pad size), not max_batch_size rows.
	rowsAtMost := min(items.n, cfg.MaxBatchSize)
	maxRows := max(rowsAtMost, cfg.PaddedSize(rowsAtMost))
	type laneInputs struct {
		call    map[string]any
		stacked []wftensor.Tensor
	}
	lanes := make([]laneInputs, cfg.Lanes)
	for k := range lanes {
		ln := &lanes[k]
		ln.call = maps.Clone(kw)
		ln.stacked = make([]wftensor.Tensor, len(items.ids))
		for j, id := range items.ids {
			ln.stacked[j] = wftensor.Tensor{
				DType: first[j].DType,
				Shape: append([]int64{0}, first[j].Shape...),
				Data:  make([]byte, 0, maxRows*len(first[j].Data)),
			}
			ln.call[id] = &ln.stacked[j]
		}
	}
	forward := func(ctx context.Context, rows []int) ([]itemOutputs, error) {
		bc, _ := batch.CallFrom(ctx)
		ln := &lanes[bc.Lane]
		for j := range ln.stacked {
			st := &ln.stacked[j]
			st.Shape[0] = int64(len(rows))
			st.Data = st.Data[:0]
			for _, i := range rows {
				st.Data = append(st.Data, items.tensor(i, j).Data...)
			}
		}
		call := ln.call
		raw, err := l.mod.Call(ctx, task.MethodName(), call, co.engine(l.autocast))
		if err != nil {
			return nil, err
		}
		out, err := l.checkedOutputs(task, raw)
		if err != nil {
			return nil, err
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
	rows := make([]int, items.n)
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
	all = append(all, batch.WithPersistentForward(c.where(task.TaskID)))
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

// sameValue reports whether two engine values are equal: == where both are
// comparable (no allocation), reflect.DeepEqual otherwise (lists).
func sameValue(a, b any) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta == nil || ta.Comparable() {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// typedItems describes a batch of generated params as stackedItems: tensor
// and differs are the params' StackedInput and BatchDiff (see BatchParams),
// tensor indexed by the task's stacked inputs in declaration order. Stacked
// inputs that item 0 leaves unset are not stacked, and every item must
// leave them unset.
func typedItems(task *spec.InferenceTaskProfile, n int, call map[string]any, tensor func(i, j int) *wftensor.Tensor, differs func(i int) string) stackedItems {
	s := stackedItems{n: n, call: call}
	var kept, unset []int
	var unsetIDs []string
	j := 0
	for _, f := range task.Inputs {
		if !f.IsStacked() {
			continue
		}
		if n > 0 && tensor(0, j) != nil {
			kept = append(kept, j)
			s.ids = append(s.ids, f.FieldID)
		} else {
			unset = append(unset, j)
			unsetIDs = append(unsetIDs, f.FieldID)
		}
		j++
	}
	s.tensor = func(i, j int) *wftensor.Tensor { return tensor(i, kept[j]) }
	s.differs = func(i int) string {
		for k, j := range unset {
			if tensor(i, j) != nil {
				return unsetIDs[k]
			}
		}
		return differs(i)
	}
	return s
}

// SameOptional reports whether two optional params fields give the same
// call kwarg: both unset, or both set to equal values (generated BatchDiff
// methods use it).
func SameOptional[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// SameList reports whether two list params fields give the same call
// kwarg: both unset (nil), or both set with equal items.
func SameList[T comparable](a, b []T) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// SameTensors reports whether two tensor-list params fields give the same
// call kwarg: both unset (nil), or both set with tensors of equal dtype,
// shape and contents.
func SameTensors(a, b []*wftensor.Tensor) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y *wftensor.Tensor) bool {
		return x == y || x != nil && y != nil && x.DType == y.DType && slices.Equal(x.Shape, y.Shape) && bytes.Equal(x.Data, y.Data)
	})
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

// BatchKey identifies what an item (its call kwargs) must share with others
// to run in one forward call with them: the dtype and shape of each tensor,
// and every other value with its type. Items with equal keys stack; the
// server's cross-request batcher groups requests by it and the remote
// client checks a batch's items with it before sending them.
func BatchKey(call map[string]any) (string, error) {
	keys := slices.Sorted(maps.Keys(call))
	var sb bytes.Buffer
	for _, k := range keys {
		sb.WriteString(k)
		sb.WriteByte('=')
		switch v := call[k].(type) {
		case *wftensor.Tensor:
			fmt.Fprintf(&sb, "tensor %s%v", v.DType, v.Shape)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("kwarg %q: %w", k, err)
			}
			fmt.Fprintf(&sb, "%T ", v)
			sb.Write(b)
		}
		sb.WriteByte(';')
	}
	return sb.String(), nil
}
