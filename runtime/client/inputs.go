package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"

	"github.com/worldfoundry/wfgen/runtime/batch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Inputs are the input values of the items of one call of a task: what a
// Backend reads, whoever gives them — generated params (Task.Inputs reads
// the params in place) or values decoded from a request (Kwargs). A value
// is in the engine's value form (string, int64, float64, bool,
// *tensor.Tensor, []any of those) or nil for an unset optional field.
type Inputs interface {
	// Len returns the number of items.
	Len() int
	// Input returns item's value of the task's input field (an index into
	// spec.InferenceTaskProfile.Inputs), nil when unset.
	Input(item, field int) any
}

// Kwargs returns items given as kwargs maps keyed by field id — call and
// load kwargs together, in the engine's value form, as a server decodes
// them — as the Inputs of task. Keys that are not fields of task are not
// read (see CheckKwargs).
func Kwargs(task *spec.InferenceTaskProfile, items ...map[string]any) Inputs {
	return kwargsInputs{task: task, items: items}
}

type kwargsInputs struct {
	task  *spec.InferenceTaskProfile
	items []map[string]any
}

func (k kwargsInputs) Len() int { return len(k.items) }

func (k kwargsInputs) Input(item, field int) any {
	return k.items[item][k.task.Inputs[field].FieldID]
}

// OneItem returns an error unless in holds exactly one item, as a call
// (not a batch) and a stream take.
func OneItem(in Inputs) error {
	if n := in.Len(); n != 1 {
		return fmt.Errorf("a call takes the inputs of one item, not %d", n)
	}
	return nil
}

// CheckKwargs returns an error naming the first key of the kwargs maps that
// is not a field of task.
func CheckKwargs(task *spec.InferenceTaskProfile, kwargs ...map[string]any) error {
	for _, kw := range kwargs {
		for k := range kw {
			if _, ok := task.Field(k); !ok {
				return fmt.Errorf("kwarg %q is not a field of task %q", k, task.TaskID)
			}
		}
	}
	return nil
}

// KwargsOf returns untyped kwargs as the Inputs of task: each item's call
// kwargs with the load kwargs they share, keyed by field id, each value
// converted with engine.ValueOf (values already in the engine's form are
// taken as they are). A key that is not a field of task is an error, and
// so is a value engine.ValueOf cannot convert; ctx is checked as the items
// are read.
func KwargsOf(ctx context.Context, task *spec.InferenceTaskProfile, items []map[string]any, load map[string]any) (Inputs, error) {
	if err := CheckKwargs(task, load); err != nil {
		return nil, err
	}
	conv := make([]map[string]any, len(items))
	for i, call := range items {
		if err := checkEvery(ctx, i); err != nil {
			return nil, fmt.Errorf("stopped while reading item %d of %d: %w", i, len(items), err)
		}
		if err := CheckKwargs(task, call); err != nil {
			return nil, err
		}
		if len(load) == 0 && engineForm(call) {
			conv[i] = call
			continue
		}
		m := make(map[string]any, len(call)+len(load))
		for _, kw := range []map[string]any{load, call} {
			for k, v := range kw {
				ev, err := engine.ValueOf(v)
				if err != nil {
					return nil, fmt.Errorf("kwarg %q: %w", k, err)
				}
				if ev != nil {
					m[k] = ev
				}
			}
		}
		conv[i] = m
	}
	return Kwargs(task, conv...), nil
}

// engineForm reports whether every value of kw is a scalar of the engine's
// value form or a well-formed tensor, which engine.ValueOf leaves as it is.
func engineForm(kw map[string]any) bool {
	for _, v := range kw {
		switch x := v.(type) {
		case string, int64, float64, bool:
		case *tensor.Tensor:
			if x == nil || x.Check() != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// CollectBatch runs b.CallBatch and returns each item's outputs in a map
// of its own, in input order, nil for an item that failed on its own; no
// outputs when the batch failed as a whole, or on a rank of a sharded run
// that does not receive them.
func CollectBatch(ctx context.Context, b Backend, task *spec.InferenceTaskProfile, in Inputs, opts ...batch.Option) ([]map[string]any, error) {
	outs := make([]map[string]any, in.Len())
	got := 0
	err := b.CallBatch(ctx, task, in, func(i int, out map[string]any) error {
		outs[i] = maps.Clone(out)
		got++
		return nil
	}, opts...)
	var itemErrs batch.ItemErrors
	if err != nil && !errors.As(err, &itemErrs) || err == nil && got == 0 && len(outs) > 0 {
		return nil, err
	}
	return outs, err
}

// CallKwargs returns item's set fields of task that are passed as call
// keyword arguments (spec.InferenceFieldSpec.CallKwarg), keyed by field
// id. It is what a generated params' CallKwargs returns, and what a remote
// backend sends.
func CallKwargs(task *spec.InferenceTaskProfile, in Inputs, item int) map[string]any {
	return targetKwargs(task, in, item, true)
}

// LoadKwargs returns item's set fields of task whose target is
// load_kwargs, as CallKwargs does.
func LoadKwargs(task *spec.InferenceTaskProfile, in Inputs, item int) map[string]any {
	return targetKwargs(task, in, item, false)
}

func targetKwargs(task *spec.InferenceTaskProfile, in Inputs, item int, call bool) map[string]any {
	kw := make(map[string]any, len(task.Inputs))
	for i := range task.Inputs {
		if task.Inputs[i].CallKwarg() != call {
			continue
		}
		if v := in.Input(item, i); v != nil {
			kw[task.Inputs[i].FieldID] = v
		}
	}
	return kw
}

// BatchConflict is the one batch-compatibility rule: it returns "" when
// item i of a and item j of b may share a forward call of task, and
// otherwise why not, as a phrase about item i next to item j (the first
// item of the batch), naming the field. Items may share a call when
//
//   - every input that batching stacks (call_kwargs fields of kind tensor,
//     image or video) is unset in both, or set in both with equal dtype and
//     shape, and
//   - every other call_kwargs input is unset in both or equal in both
//     (tensors in a tensor_list by dtype, shape and data).
//
// Load kwargs do not reach the forward call and are not compared. The
// in-process batch executor checks a batch's items with it (typed params
// read in place), the server's cross-request batcher groups requests by it
// (decoded values), and the remote client checks a batch with it before
// sending it; a sharded run (runtime/dist) checks its items, on every rank,
// as the in-process executor does.
func BatchConflict(task *spec.InferenceTaskProfile, a Inputs, i int, b Inputs, j int) string {
	for f := range task.Inputs {
		fs := &task.Inputs[f]
		if !fs.CallKwarg() {
			continue
		}
		x, y := a.Input(i, f), b.Input(j, f)
		if fs.IsStacked() {
			tx, _ := x.(*tensor.Tensor)
			ty, _ := y.(*tensor.Tensor)
			switch {
			case tx == nil && ty == nil:
			case tx == nil:
				return fmt.Sprintf("field %q is stacked by batching, but the item gives no tensor (the first item does)", fs.FieldID)
			case ty == nil:
				return fmt.Sprintf("field %q is stacked by batching, but the item gives a tensor (the first item gives none)", fs.FieldID)
			case tx.DType != ty.DType || !equalShape(tx.Shape, ty.Shape):
				return fmt.Sprintf("field %q is %s%v, but the first item's is %s%v: the items of a batch agree on the dtype and shape of what batching stacks",
					fs.FieldID, tx.DType, tx.Shape, ty.DType, ty.Shape)
			}
			continue
		}
		if !sameValue(x, y) {
			return fmt.Sprintf("field %q differs from the first item's: the items of a batch share every input that batching does not stack", fs.FieldID)
		}
	}
	return ""
}

// A BatchConflictError is an item of a batch that may not share a forward
// call with the batch's first item (BatchConflict says why): the in-process
// batch executor and the remote client refuse the batch with it before
// anything runs.
type BatchConflictError struct {
	// Item is the item's index in the batch.
	Item int
	// Reason is BatchConflict's answer.
	Reason string
}

// Error returns "item N: reason".
func (e *BatchConflictError) Error() string { return fmt.Sprintf("item %d: %s", e.Item, e.Reason) }

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// sameValue reports whether two engine values are equal: == where both are
// comparable, item by item for lists (and tuples), key by key for dicts,
// and tensors by dtype, shape and data.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameValue(x[k], y[k]) {
				return false
			}
		}
		return true
	case *tensor.Tensor:
		y, ok := b.(*tensor.Tensor)
		return ok && (x == y || x != nil && y != nil && x.DType == y.DType && equalShape(x.Shape, y.Shape) && bytes.Equal(x.Data, y.Data))
	}
	if x, ok := a.(map[string]any); ok { // a dict of tensors
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta == nil || ta.Comparable() {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}
