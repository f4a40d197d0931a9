package spec

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// WarmupSpec asks for a task to be warmed up: run on made-up inputs as soon
// as its model is loaded, before any request, at each batch size the batch
// executor sends (every pad size of a batchable task), so that the first
// request at each size does not pay for libtorch's first calls (the
// TorchScript profiling runs, the kernels and memory a new shape needs).
// runtime/client's Warmup runs it; InferenceTaskProfile.WarmupValues says
// what the inputs are. `warmup: {}` takes every default.
type WarmupSpec struct {
	// Inputs gives the warm-up value of fields that have no default, or
	// overrides a default: field id → a value that fits the field. A
	// tensor, image, video or tensor_list field cannot be given here: a
	// required one gets zeros of its declared dtype and shape.
	Inputs map[string]any `json:"inputs,omitempty"`
	// Dims gives the size of named dimensions in the warm-up tensors (for
	// example the sequence length L that requests usually have). A named
	// dimension not listed takes the smallest size the task's dims allow,
	// and at least 1. The batch dimension is not listed: its sizes are the
	// batch sizes.
	Dims map[string]int64 `json:"dims,omitempty"`
	// Runs is how many rounds of warm-up calls are made: each round makes
	// every call once. By default, as many rounds as make at least three
	// calls (one round of four pad sizes, three rounds of a plain task):
	// TorchScript's profiling executor profiles a module's first call and
	// optimises its graph on the second, and both are many times slower
	// than the calls after them.
	Runs int `json:"runs,omitempty" jsonschema:"minimum=1"`
}

// pointerKey escapes a map key as one JSON Pointer segment.
var pointerKey = strings.NewReplacer("~", "~0", "/", "~1")

// WarmupValues returns the inputs of one warm-up call of the task, keyed by
// field id — of one item for a batchable task whose batching names its
// dimension (batching.dim) — built from the task's warmup block (the zero
// WarmupSpec when the task has none), and every problem that keeps them
// from being built (paths relative to the task; nil when there is none).
//
// Each input field gets, the first that applies:
//
//   - its warm-up input (warmup.inputs), as the manifest writes it;
//   - nothing when the task's default_call_kwargs set it (the client merges
//     those into every call);
//   - its default, as the spec holds it;
//   - for a required field of kind tensor, image or video: a tensor of
//     zeros of its declared dtype and shape, each named dimension at its
//     warmup.dims size, else at the smallest size the task's dims allow
//     (at least 1), and — for a stacked input of a task whose batching
//     names its dimension — without that leading dimension;
//   - for a required field of kind tensor_dict or tensor_tuple: such zeros
//     for each required part, of the part's dtype and shape, as the dict
//     or tuple (InferenceFieldSpec.PartsValue);
//   - nothing for an optional field (the model decides, as when a caller
//     leaves it unset).
//
// A required field that gets nothing, a required tensor field without a
// dtype or shape or with a wildcard (*) dimension, and a required
// tensor_list field are problems located at the warmup key, as are
// warm-up inputs and dims that name nothing or break a rule. Values are
// not converted: runtime/client and the manifest validator check them
// against their fields.
func (t *InferenceTaskProfile) WarmupValues() (map[string]any, []Problem) {
	w := t.Warmup
	if w == nil {
		w = &WarmupSpec{}
	}
	var ps []Problem
	if w.Runs < 0 {
		ps = append(ps, Problem{Path: "warmup/runs", Message: fmt.Sprintf("warmup.runs %d must be at least 1", w.Runs)})
	}
	for _, id := range sortedKeys(w.Inputs) {
		f, ok := t.Field(id)
		at := "warmup/inputs/" + pointerKey.Replace(id)
		switch {
		case !ok:
			ps = append(ps, Problem{Path: at, Key: true, Message: fmt.Sprintf("warmup.inputs: the task has no input field %q", id)})
		case f.Kind.TensorLike():
			ps = append(ps, Problem{Path: at, Key: true, Message: fmt.Sprintf(
				"warmup.inputs: field %q is of kind %s, whose warm-up value cannot be written in a manifest: a required one gets zeros of its declared dtype and shape; remove it", id, f.Kind)})
		}
	}
	batchDim := ""
	if t.Batching != nil {
		batchDim = t.Batching.Dim
	}
	used := map[string]bool{}
	for i := range t.Inputs {
		for _, d := range t.Inputs[i].Shape {
			if d.Named() {
				used[string(d)] = true
			}
		}
		for _, p := range t.Inputs[i].Fields {
			for _, d := range p.Shape {
				if d.Named() {
					used[string(d)] = true
				}
			}
		}
	}
	for _, name := range sortedKeys(w.Dims) {
		n := w.Dims[name]
		at := "warmup/dims/" + pointerKey.Replace(name)
		switch {
		case batchDim != "" && name == batchDim:
			ps = append(ps, Problem{Path: at, Key: true, Message: fmt.Sprintf(
				"warmup.dims: %s is the batch dimension (batching.dim), whose warm-up sizes are the batch sizes the executor sends; remove it", name)})
		case !used[name]:
			ps = append(ps, Problem{Path: at, Key: true, Message: fmt.Sprintf("warmup.dims: no input shape of the task has the dimension %s", name)})
		case n < 1:
			ps = append(ps, Problem{Path: at, Message: fmt.Sprintf("warmup.dims: size %d of %s must be at least 1", n, name)})
		default:
			if why := t.Dims[name].Check(n); why != "" {
				ps = append(ps, Problem{Path: at, Message: fmt.Sprintf("warmup.dims: size %d of %s breaks the task's dims: it %s", n, name, why)})
			}
		}
	}

	values := map[string]any{}
	for i := range t.Inputs {
		f := &t.Inputs[i]
		if v, ok := w.Inputs[f.FieldID]; ok && !f.Kind.TensorLike() {
			values[f.FieldID] = v
			continue
		}
		if _, ok := t.DefaultCallKwargs[f.FieldID]; ok {
			continue
		}
		if f.Default != nil {
			values[f.FieldID] = f.Default
			continue
		}
		if !f.Required {
			continue
		}
		why := ""
		switch {
		case f.Kind.TensorLike() && f.Kind.IsList():
			why = fmt.Sprintf("field %q is a required tensor_list, whose length a warm-up cannot know", f.FieldID)
		case f.Kind.HasParts():
			// zeros for each required part, of the part's dtype and shape
			parts := make([]*tensor.Tensor, len(f.Fields))
			for k, p := range f.Fields {
				if !f.PartRequired(k) {
					continue
				}
				ps := &InferenceFieldSpec{FieldID: f.FieldID, Kind: f.Kind.Elem(), DType: p.DType, Shape: p.Shape}
				tn, msg := t.warmupTensor(ps, w.Dims, "")
				if msg != "" {
					why = fmt.Sprintf("field %q, %s %q: %s", f.FieldID, f.partNoun(), p.Name, msg)
					break
				}
				parts[k] = tn
			}
			if why == "" {
				values[f.FieldID] = f.PartsValue(parts)
			}
		case !f.Kind.TensorLike():
			why = fmt.Sprintf("field %q is required and has no default; give it a value under warmup.inputs (or a default)", f.FieldID)
		default:
			tn, msg := t.warmupTensor(f, w.Dims, batchDim)
			if msg != "" {
				why = fmt.Sprintf("field %q: %s", f.FieldID, msg)
			} else {
				values[f.FieldID] = tn
			}
		}
		if why != "" {
			ps = append(ps, Problem{Path: "warmup", Key: true, Message: "cannot build the warm-up inputs: " + why})
		}
	}
	return values, ps
}

// warmupTensor returns the zero tensor of required tensor-like field f, or
// why it cannot be built.
func (t *InferenceTaskProfile) warmupTensor(f *InferenceFieldSpec, sizes map[string]int64, batchDim string) (*tensor.Tensor, string) {
	if !f.DType.Valid() {
		return nil, "declare its dtype, so that a warm-up tensor can be made"
	}
	if f.Shape == nil {
		return nil, "declare its shape, so that a warm-up tensor can be made"
	}
	shape := f.Shape
	if batchDim != "" && f.IsStacked() && len(shape) > 0 && string(shape[0]) == batchDim {
		shape = shape[1:]
	}
	dims := make([]int64, len(shape))
	n := int64(1)
	for i, d := range shape {
		switch size, fixed := d.Size(); {
		case fixed:
			dims[i] = size
		case d.Named():
			s, msg := t.warmupDim(string(d), sizes)
			if msg != "" {
				return nil, msg
			}
			dims[i] = s
		default:
			return nil, fmt.Sprintf("shape %s has a dimension of any size (%s), which a warm-up cannot choose; name it (and give its size under warmup.dims)", f.Shape, d)
		}
		if dims[i] > 0 && n > (1<<40)/dims[i] {
			return nil, fmt.Sprintf("a warm-up tensor of shape %v would have more than 2^40 elements", dims)
		}
		n *= dims[i]
	}
	return &tensor.Tensor{DType: f.DType, Shape: dims, Data: make([]byte, n*int64(f.DType.Size()))}, ""
}

// warmupDim returns the warm-up size of named dimension name: its
// warmup.dims entry, else the smallest size ≥ 1 the task's dims allow.
func (t *InferenceTaskProfile) warmupDim(name string, sizes map[string]int64) (int64, string) {
	if n, ok := sizes[name]; ok {
		return max(n, 0), "" // a size below 1 is a problem of warmup.dims
	}
	spec := t.Dims[name]
	n := int64(1)
	if spec.Minimum != nil {
		n = max(n, *spec.Minimum)
	}
	if m := spec.MultipleOf; m != nil && *m > 0 && n%*m != 0 {
		n += *m - n%*m
	}
	if spec.Check(n) != "" {
		return 0, fmt.Sprintf("no size of %s fits the task's dims (%s); give one under warmup.dims", name, spec.Check(n))
	}
	return n, ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
