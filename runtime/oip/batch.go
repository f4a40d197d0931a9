package oip

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Batch requests. A request to a batchable task with the parameter
// BatchParameter true is a batch of items, as client.Client.RunBatch takes
// them: each stacked input (a tensor, image or video call_kwargs field)
// carries the items along a leading dimension N, every other input is
// shared by all N items (the items of one batch must agree on them), and
// each output carries the items' artifacts along a leading dimension N. A
// server runs the items as the in-process batch executor would (the same
// batches, the same padding), so the answers are the in-process client's
// bit for bit.
const (
	// BatchParameter (a boolean) makes a request a batch of items.
	BatchParameter = "batch"
	// ItemErrorsParameter (a boolean) asks that an item that fails on its
	// own leaves the others' answers: the response's ItemErrorsParameter
	// then lists the failed items, whose rows of the outputs are zeros.
	ItemErrorsParameter = "item_errors"
)

// ItemError is one failed item of a batch response: the response
// parameter ItemErrorsParameter holds a list of them as JSON text.
type ItemError struct {
	// Index is the item's position in the batch.
	Index int `json:"index"`
	// Error says why it failed.
	Error string `json:"error"`
}

// BatchArgs maps a batch request's inputs onto its items: the call kwargs
// of each item and the load kwargs they share. Every item is checked with
// the manifest's rules like one request's inputs (Args); a problem names
// the item and matches ErrBadRequest.
func (m *Model) BatchArgs(task *spec.InferenceTaskProfile, inputs []Tensor, lim Limits) (items []map[string]any, load map[string]any, err error) {
	if task.Batching == nil || len(task.BatchingProblems()) > 0 {
		return nil, nil, bad("parameter %q: task %q is not batchable (it has no usable batching block)", BatchParameter, task.TaskID)
	}
	values, err := m.decodeInputs(task, inputs, lim)
	if err != nil {
		return nil, nil, err
	}
	n, by := int64(-1), ""
	for i := range task.Inputs {
		f := &task.Inputs[i]
		t, ok := values[i].(*tensor.Tensor)
		if !f.IsStacked() || !ok {
			continue
		}
		if len(t.Shape) == 0 {
			return nil, nil, bad("input %q: a batch request's stacked input carries the items along its first dimension, and this one is a scalar", f.FieldID)
		}
		switch {
		case n < 0:
			n, by = t.Shape[0], f.FieldID
		case t.Shape[0] != n:
			return nil, nil, bad("input %q holds %d items, but input %q holds %d: the stacked inputs of a batch request agree on the first dimension", f.FieldID, t.Shape[0], by, n)
		}
	}
	switch {
	case n < 0:
		return nil, nil, bad("a batch request holds its items along the first dimension of its stacked inputs (tensor, image and video fields), and it has none")
	case n == 0:
		return nil, nil, bad("input %q holds no item: a batch request holds one or more", by)
	}
	items = make([]map[string]any, n)
	item := make([]any, len(values))
	for k := range n {
		copy(item, values)
		for i := range task.Inputs {
			if t, ok := values[i].(*tensor.Tensor); ok && task.Inputs[i].IsStacked() {
				item[i] = row(t, k, n)
			}
		}
		call, ld, err := m.check(task, item)
		if err != nil {
			return nil, nil, bad("item %d: %v", k, err)
		}
		items[k], load = call, ld
	}
	return items, load, nil
}

// row returns row k of n of t as a tensor of its own (sharing t's data).
func row(t *tensor.Tensor, k, n int64) *tensor.Tensor {
	step := int64(len(t.Data)) / n
	return &tensor.Tensor{DType: t.DType, Shape: slices.Clip(t.Shape[1:]), Data: t.Data[k*step : (k+1)*step : (k+1)*step]}
}

// EncodeBatchOutputs returns the outputs of a batch's items (nil for a
// failed item, whose rows are zeros): each artifact's tensors stacked along
// a leading dimension, in the task's artifact order, restricted to want
// when given. Items agree on their artifacts' dtypes and shapes, as the
// rows of one forward call do.
func EncodeBatchOutputs(task *spec.InferenceTaskProfile, outs []map[string]any, want []RequestOutput) ([]Tensor, error) {
	return EncodeBatchOutputsBinary(task, outs, want, nil)
}

// EncodeBatchOutputsBinary is EncodeBatchOutputs with the outputs binary
// says (BinaryOutputs; nil: none) in the binary tensor data extension's
// form.
func EncodeBatchOutputsBinary(task *spec.InferenceTaskProfile, outs []map[string]any, want []RequestOutput, binary func(name string) bool) ([]Tensor, error) {
	if err := CheckOutputs(task, want); err != nil {
		return nil, err
	}
	var res []Tensor
	for i := range task.Outputs {
		a := &task.Outputs[i]
		if len(want) > 0 && !slices.ContainsFunc(want, func(w RequestOutput) bool { return w.Name == a.ArtifactID }) {
			continue
		}
		var first *tensor.Tensor
		for _, o := range outs {
			if o == nil {
				continue
			}
			t, err := tensor.AsTensor(o[a.ArtifactID])
			if err != nil {
				return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
			}
			if first == nil {
				first = t
			} else if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) {
				return nil, fmt.Errorf("artifact %q: items are %s%v and %s%v, which do not stack", a.ArtifactID, first.DType, first.Shape, t.DType, t.Shape)
			}
		}
		if first == nil {
			continue // every item failed
		}
		step := len(first.Data)
		data := make([]byte, len(outs)*step)
		for k, o := range outs {
			if o != nil {
				t, _ := tensor.AsTensor(o[a.ArtifactID])
				copy(data[k*step:], t.Data)
			}
		}
		stacked := &tensor.Tensor{DType: first.DType, Shape: append([]int64{int64(len(outs))}, first.Shape...), Data: data}
		enc := encodeTensor
		if binary != nil && binary(a.ArtifactID) {
			enc = binaryTensor
		}
		t, err := enc(a.ArtifactID, stacked)
		if err != nil {
			return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
		}
		res = append(res, t)
	}
	return res, nil
}

// DecodeBatchOutputs splits a batch response's outputs into the n items'
// outputs, in the value form runtime/client returns (see DecodeOutputs).
// The items listed in failed get nil.
func DecodeBatchOutputs(task *spec.InferenceTaskProfile, outs []Tensor, n int, failed []ItemError) ([]map[string]any, error) {
	all, err := DecodeOutputs(task, outs)
	if err != nil {
		return nil, err
	}
	items := make([]map[string]any, n)
	for k := range items {
		items[k] = make(map[string]any, len(all))
	}
	for name, v := range all {
		t, ok := v.(*tensor.Tensor)
		if !ok || len(t.Shape) == 0 || t.Shape[0] != int64(n) {
			return nil, fmt.Errorf("output %q: a batch of %d items answers tensors with a leading dimension of %d, got %v", name, n, n, describe(v))
		}
		for k := range n {
			items[k][name] = row(t, int64(k), int64(n))
		}
	}
	for _, e := range failed {
		if e.Index < 0 || e.Index >= n {
			return nil, fmt.Errorf("item error for item %d of a batch of %d", e.Index, n)
		}
		items[e.Index] = nil
	}
	return items, nil
}

// ParseItemErrors reads the ItemErrorsParameter of a batch response.
func ParseItemErrors(p Parameters) ([]ItemError, error) {
	s, ok, err := p.StringParam(ItemErrorsParameter)
	if err != nil || !ok {
		return nil, err
	}
	var errs []ItemError
	if err := json.Unmarshal([]byte(s), &errs); err != nil {
		return nil, fmt.Errorf("parameter %q: %w", ItemErrorsParameter, err)
	}
	return errs, nil
}
