package oip

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/params"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Model is one family served as an OIP model, with its tasks' field rules
// compiled once. It is immutable and safe for concurrent use.
type Model struct {
	// Spec is the family's spec.
	Spec  *spec.ModelInferenceSpec
	rules map[string]params.Rules // by task id
}

// NewModel returns the OIP model of a family.
func NewModel(spec *spec.ModelInferenceSpec) (*Model, error) {
	if spec == nil {
		return nil, errors.New("oip: nil spec")
	}
	m := &Model{Spec: spec, rules: make(map[string]params.Rules, len(spec.Tasks))}
	for i := range spec.Tasks {
		r, err := params.Compile(&spec.Tasks[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.ModelFamilyID, err)
		}
		m.rules[spec.Tasks[i].TaskID] = r
	}
	return m, nil
}

// RequestParameters are the request parameters a server reads (see
// docs/serving.md): the task and variant, a stream's configuration, a
// batch's, binary outputs, Triton's priority and timeout (admission).
var RequestParameters = []string{"task", "variant", "stream", "paced", "max_chunks", "controls", "lockstep",
	SessionSnapshot, SessionReplay, BatchParameter, ItemErrorsParameter, BinaryDataOutput, "priority", "timeout"}

// CheckParameters refuses a request parameter that is not one of
// RequestParameters, naming them (ErrBadRequest): one nobody reads is a
// typo the client would never hear of, or a payload that only costs.
func CheckParameters(p Parameters) error {
	for k := range p {
		if !slices.Contains(RequestParameters, k) {
			return bad("unknown request parameter %q (the parameters: %s)", truncated(k, 64), strings.Join(RequestParameters, ", "))
		}
	}
	return nil
}

// truncated cuts s to at most n bytes, for an error message.
func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Task returns the task a request selects by its "task" parameter (id or
// alias; absent selects the default task). An unknown task matches
// ErrBadRequest.
func (m *Model) Task(p Parameters) (*spec.InferenceTaskProfile, error) {
	id, _, err := p.StringParam("task")
	if err != nil {
		return nil, err
	}
	t, err := m.Spec.Task(id)
	if err != nil {
		return nil, &badRequest{msg: err.Error()}
	}
	return t, nil
}

// Variant returns the variant a request selects: the path's version when
// given, else the "variant" parameter, else the default variant. Ids and
// aliases are accepted; a version and a parameter that name different
// variants, or an unknown id, match ErrBadRequest (the server answers an
// unknown version in the path with 404 before asking).
func (m *Model) Variant(version string, p Parameters) (*spec.InferenceVariantSpec, error) {
	param, _, err := p.StringParam("variant")
	if err != nil {
		return nil, err
	}
	id := version
	if id == "" {
		id = param
	}
	v, err := m.Spec.Variant(id)
	if err != nil {
		return nil, &badRequest{msg: err.Error()}
	}
	if version != "" && param != "" {
		pv, err := m.Spec.Variant(param)
		if err != nil || pv.VariantID != v.VariantID {
			return nil, bad("the path's version %q and the parameter variant %q name different variants", version, param)
		}
	}
	return v, nil
}

// Args maps a request's inputs onto the task's fields: call and load
// kwargs in the engine's value form (see engine.Module), split by the
// fields' targets. Absent fields take their manifest default (optional
// fields without one are left out); every value is checked with the
// manifest's rules, as generated Validate does. Every problem matches
// ErrBadRequest and names the input.
func (m *Model) Args(task *spec.InferenceTaskProfile, inputs []Tensor, lim Limits) (call, load map[string]any, err error) {
	values, err := m.decodeInputs(task, inputs, lim)
	if err != nil {
		return nil, nil, err
	}
	return m.check(task, values)
}

// decodeInputs decodes a request's inputs into the Go form of their
// fields' kinds (see decodeField), by field index; an absent field is nil.
func (m *Model) decodeInputs(task *spec.InferenceTaskProfile, inputs []Tensor, lim Limits) ([]any, error) {
	if _, ok := m.rules[task.TaskID]; !ok {
		return nil, fmt.Errorf("oip: task %q is not a task of %s", task.TaskID, m.Spec.ModelFamilyID)
	}
	values := make([]any, len(task.Inputs)) // the Go form the rules check
	lists := map[int]map[int]*Tensor{}      // tensor_list items by field and index
	parts := map[int]map[int]*Tensor{}      // parts of dicts and tuples by field and part
	for i := range inputs {
		in := &inputs[i]
		if fi, k, known, ok := partField(task, in.Name); known {
			f := &task.Inputs[fi]
			if !ok {
				return nil, bad("input %q is no part of field %q: %s", in.Name, f.FieldID, partsWant(f))
			}
			if parts[fi] == nil {
				parts[fi] = map[int]*Tensor{}
			}
			if _, dup := parts[fi][k]; dup {
				return nil, bad("input %q is given twice", in.Name)
			}
			parts[fi][k] = in
			continue
		}
		fi, item, ok := fieldOf(task, in.Name)
		if ok && task.Inputs[fi].Kind.HasParts() {
			return nil, bad("input %q: %s", in.Name, partsWant(&task.Inputs[fi]))
		}
		if !ok {
			return nil, bad("input %q is not a field of task %q (fields: %s)", in.Name, task.TaskID, fieldNames(task))
		}
		if item >= 0 {
			if lists[fi] == nil {
				lists[fi] = map[int]*Tensor{}
			}
			lists[fi][item] = in
			continue
		}
		v, err := decodeField(&task.Inputs[fi], in, lim)
		if err != nil {
			return nil, bad("input %q: %v", in.Name, err)
		}
		values[fi] = v
	}
	for fi, items := range lists {
		ts := make([]*tensor.Tensor, len(items))
		for j := range ts {
			in, ok := items[j]
			if !ok {
				return nil, bad("input %q: tensor_list items are named %s.0 to %s.%d, and %s.%d is missing",
					task.Inputs[fi].FieldID, task.Inputs[fi].FieldID, task.Inputs[fi].FieldID, len(items)-1, task.Inputs[fi].FieldID, j)
			}
			t, err := decodeTensor(in, lim.MaxTensorBytes)
			if err != nil {
				return nil, bad("input %q: %v", in.Name, err)
			}
			ts[j] = t
		}
		values[fi] = ts
	}
	for fi := range task.Inputs { // in field order: the first problem is reported
		ins, ok := parts[fi]
		if !ok {
			continue
		}
		v, err := decodeParts(&task.Inputs[fi], ins, lim)
		if err != nil {
			return nil, err
		}
		values[fi] = v
	}
	return values, nil
}

// check checks decoded values (by field index) with the task's rules and
// returns them as call and load kwargs, defaults filled in.
func (m *Model) check(task *spec.InferenceTaskProfile, values []any) (call, load map[string]any, err error) {
	rules := m.rules[task.TaskID]
	c := rules.Check()
	var missing []string
	call, load = map[string]any{}, map[string]any{}
	for i := range task.Inputs {
		f := &task.Inputs[i]
		v := values[i]
		if v == nil {
			switch f.Presence() {
			case spec.Required:
				missing = append(missing, f.FieldID)
			case spec.Defaulted:
				dv, err := kindValue(f.Kind, f.Default)
				if err != nil {
					return nil, nil, fmt.Errorf("field %q: default: %w", f.FieldID, err)
				}
				put(call, load, f, dv)
			}
			continue
		}
		switch x := v.(type) {
		case string:
			params.String(&c, i, x)
		case int64:
			params.Int(&c, i, x)
		case float64:
			params.Float(&c, i, x)
		case bool:
		case []string:
			params.Strings(&c, i, x)
		case []int64:
			params.Ints(&c, i, x)
		case []float64:
			params.Floats(&c, i, x)
		case []bool:
			params.Bools(&c, i, x)
		case *tensor.Tensor:
			params.Tensor(&c, i, x)
		case []*tensor.Tensor:
			params.Tensors(&c, i, x)
		case map[string]any, []any: // a dict's or a tuple's parts (decodeParts)
			params.Parts(&c, i, x)
		}
		put(call, load, f, engineList(v))
	}
	if len(missing) > 0 {
		return nil, nil, bad("task %q: missing required input(s) %s", task.TaskID, strings.Join(missing, ", "))
	}
	if err := c.Err(); err != nil {
		return nil, nil, bad("task %q: %s", task.TaskID, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return call, load, nil
}

func put(call, load map[string]any, f *spec.InferenceFieldSpec, v any) {
	if f.Target == spec.TargetLoadKwargs {
		load[f.FieldID] = v
	} else {
		call[f.FieldID] = v
	}
}

// engineList converts a typed list to the engine's list form.
func engineList(v any) any {
	switch x := v.(type) {
	case []string:
		return params.List(x)
	case []int64:
		return params.List(x)
	case []float64:
		return params.List(x)
	case []bool:
		return params.List(x)
	case []*tensor.Tensor:
		return params.List(x)
	}
	return v
}

// fieldOf finds the field an input names: its index, and for a
// tensor_list item ("FIELD.3") the item's index (else -1).
func fieldOf(task *spec.InferenceTaskProfile, name string) (field, item int, ok bool) {
	for i := range task.Inputs {
		if task.Inputs[i].FieldID == name {
			return i, -1, !perItem(task.Inputs[i].Kind)
		}
	}
	base, n, found := ParseElementName(name)
	if !found {
		return 0, 0, false
	}
	for i := range task.Inputs {
		if task.Inputs[i].FieldID == base && perItem(task.Inputs[i].Kind) {
			return i, n, true
		}
	}
	return 0, 0, false
}

func fieldNames(task *spec.InferenceTaskProfile) string {
	if len(task.Inputs) == 0 {
		return "none"
	}
	names := make([]string, len(task.Inputs))
	for i, f := range task.Inputs {
		names[i] = f.FieldID
		switch {
		case perItem(f.Kind):
			names[i] += ".0, " + f.FieldID + ".1, ..."
		case f.Kind.HasParts():
			parts := make([]string, len(f.Fields))
			for k := range f.Fields {
				parts[k] = PartInputName(&task.Inputs[i], k)
			}
			names[i] = strings.Join(parts, ", ")
		}
	}
	return strings.Join(names, ", ")
}

// perItem reports whether a field of kind k travels as one input per
// item, named FIELD.0, FIELD.1, ...: a list of tensors, whose items may
// differ in shape.
func perItem(k spec.Kind) bool { return k.IsList() && k.TensorLike() }

// baseDatatypes are the datatypes of each base (spec.BaseInfo.Datatypes):
// for a scalar those a field accepts, the first the one an encoder sends.
var baseDatatypes = func() map[spec.Base][]Datatype {
	m := make(map[spec.Base][]Datatype, len(spec.Bases))
	for _, b := range spec.Bases {
		info, _ := b.Info()
		for _, d := range info.Datatypes {
			m[b] = append(m[b], Datatype(d))
		}
	}
	return m
}()

// decodeField decodes one input into the Go form of the field's kind:
// string, int64, float64, bool, []string, []int64, []float64, []bool or
// *tensor.Tensor.
func decodeField(f *spec.InferenceFieldSpec, in *Tensor, lim Limits) (any, error) {
	if f.Kind.TensorLike() {
		return decodeTensor(in, lim.MaxTensorBytes)
	}
	accepted := baseDatatypes[f.Kind.Base()]
	if !slices.Contains(accepted, in.Datatype) {
		return nil, fmt.Errorf("datatype %s, but field kind %s takes %s", in.Datatype, f.Kind, datatypeList(accepted))
	}
	n, err := elements(in.Shape)
	if err != nil {
		return nil, err
	}
	if f.Kind.IsList() {
		if len(in.Shape) != 1 {
			return nil, fmt.Errorf("shape %v, but a %s is a 1-D tensor [n]", in.Shape, f.Kind)
		}
		if lim.MaxTensorBytes > 0 && n*8 > lim.MaxTensorBytes {
			return nil, fmt.Errorf("%d items, above the limit of %d bytes per tensor", n, lim.MaxTensorBytes)
		}
	} else if n != 1 || len(in.Shape) > 1 {
		return nil, fmt.Errorf("shape %v, but a field of kind %s is one value: shape [1]", in.Shape, f.Kind)
	}
	if in.IsBinary() {
		vals, err := rawValues(in, n)
		if err != nil {
			return nil, err
		}
		return fieldValue(f.Kind, vals), nil
	}
	if n > int64(len(in.Data)) {
		return nil, fmt.Errorf("data has fewer elements than shape %v holds (%d)", in.Shape, n)
	}
	var parse func(tok []byte) (any, error)
	switch f.Kind.Base() {
	case spec.BaseString:
		parse = func(tok []byte) (any, error) { return parseString(tok) }
	case spec.BaseInt:
		parse = func(tok []byte) (any, error) { return parseInt(tok, in.Datatype) }
	case spec.BaseFloat:
		parse = func(tok []byte) (any, error) { return parseFloat(tok) }
	default:
		parse = func(tok []byte) (any, error) { return parseBool(tok) }
	}
	vals := make([]any, 0, n)
	if err := walkData(in.Data, in.Shape, func(tok []byte) error {
		v, err := parse(tok)
		vals = append(vals, v)
		return err
	}); err != nil {
		return nil, err
	}
	return fieldValue(f.Kind, vals), nil
}

// fieldValue returns a field's decoded elements in the Go form of its
// kind: the one value, or a typed list.
func fieldValue(k spec.Kind, vals []any) any {
	if !k.IsList() {
		return vals[0]
	}
	switch k.Base() {
	case spec.BaseString:
		return typed[string](vals)
	case spec.BaseInt:
		return typed[int64](vals)
	case spec.BaseFloat:
		return typed[float64](vals)
	}
	return typed[bool](vals)
}

func typed[T any](vals []any) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = v.(T)
	}
	return out
}

// kindValue converts a value (a manifest default, a caller's kwarg) to the
// engine form of kind k: numbers take the kind's type (an integral float
// for an int kind becomes int64), lists become []any.
func kindValue(k spec.Kind, v any) (any, error) {
	ev, err := engine.ValueOf(v)
	if err != nil || ev == nil {
		return ev, err
	}
	if k.HasParts() {
		return ev, nil // a dict or tuple of tensors, checked part by part (encodeParts)
	}
	if k.IsList() {
		items, ok := ev.([]any)
		if !ok {
			return nil, fmt.Errorf("%s is not %s", describe(ev), k.Phrase())
		}
		out := make([]any, len(items))
		for i, it := range items {
			if out[i], err = scalarValue(k.Elem(), it); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
		}
		return out, nil
	}
	return scalarValue(k, ev)
}

func scalarValue(k spec.Kind, v any) (any, error) {
	switch k.Base() {
	case spec.BaseInt:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
				return int64(x), nil
			}
		}
	case spec.BaseFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	case spec.BaseString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case spec.BaseBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case spec.BaseTensor:
		if t, ok := v.(*tensor.Tensor); ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%s is not %s", describe(v), k.Phrase())
}

// EncodeInputs returns the named inputs of a request running task with
// the given call and load kwargs (a generated params' CallKwargs and
// LoadKwargs). Keys that are not fields of the task, and values that do
// not fit their field's kind, are errors naming the field.
func EncodeInputs(task *spec.InferenceTaskProfile, call, load map[string]any) ([]Tensor, error) {
	return encodeInputs(task, call, load, encodeTensor)
}

// encodeInputs is EncodeInputs with enc encoding each tensor.
func encodeInputs(task *spec.InferenceTaskProfile, call, load map[string]any, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, error) {
	for _, kw := range []map[string]any{call, load} {
		for k := range kw {
			if _, ok := task.Field(k); !ok {
				return nil, fmt.Errorf("kwarg %q is not a field of task %q (fields: %s)", k, task.TaskID, fieldNames(task))
			}
		}
	}
	var out []Tensor
	for i := range task.Inputs {
		f := &task.Inputs[i]
		raw, ok := call[f.FieldID]
		if !ok {
			raw, ok = load[f.FieldID]
		}
		if !ok || raw == nil {
			continue
		}
		v, err := kindValue(f.Kind, raw)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.FieldID, err)
		}
		if v == nil {
			continue
		}
		ts, err := encodeField(f, v, enc)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.FieldID, err)
		}
		out = append(out, ts...)
	}
	return out, nil
}

// encodeField encodes one field's value (in kindValue's form).
func encodeField(f *spec.InferenceFieldSpec, v any, enc func(string, *tensor.Tensor) (Tensor, error)) ([]Tensor, error) {
	switch {
	case f.Kind.HasParts():
		return encodeParts(f, v, enc)
	case f.Kind.Stacked():
		t, err := enc(f.FieldID, v.(*tensor.Tensor))
		return []Tensor{t}, err
	case perItem(f.Kind):
		items := v.([]any)
		out := make([]Tensor, len(items))
		for j, it := range items {
			t, err := enc(ElementName(f.FieldID, j), it.(*tensor.Tensor))
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", j, err)
			}
			out[j] = t
		}
		return out, nil
	}
	dt := baseDatatypes[f.Kind.Base()][0]
	if f.Kind.IsList() {
		items := v.([]any)
		data, err := encodeScalars(items, dt)
		return []Tensor{{Name: f.FieldID, Datatype: dt, Shape: []int64{int64(len(items))}, Data: data}}, err
	}
	data, err := encodeScalars([]any{v}, dt)
	return []Tensor{{Name: f.FieldID, Datatype: dt, Shape: []int64{1}, Data: data}}, err
}

// EncodeOutputs returns the response outputs of a task's outputs (keyed by
// artifact id, as runtime/client returns them), in the task's artifact
// order. want, when not empty, restricts them to the named artifacts; a
// name that is not an artifact of the task matches ErrBadRequest. A
// tensor_list artifact's element count travels as a response parameter,
// which only EncodeResponse sets: here such an artifact is an error.
func EncodeOutputs(task *spec.InferenceTaskProfile, out map[string]any, want []RequestOutput) ([]Tensor, error) {
	return EncodeOutputsBinary(task, out, want, nil)
}

// EncodeOutputsBinary is EncodeOutputs with the outputs binary says
// (BinaryOutputs; nil: none) in the binary tensor data extension's form.
func EncodeOutputsBinary(task *spec.InferenceTaskProfile, out map[string]any, want []RequestOutput, binary func(name string) bool) ([]Tensor, error) {
	return encodeOutputs(task, out, want, binary, nil)
}

// EncodeResponse sets r's outputs to the task's outputs, as
// EncodeOutputsBinary encodes them, with each tensor_list artifact as its
// elements ID.0, ID.1, ..., each record as its keys ID.KEY and each
// record_list as the keys of its elements ID.0.KEY, ID.1.KEY, ..., and
// their count in r's parameter ID.count (CountParameter; r.Parameters is
// made when nil): the documented mapping (lists.go, records.go) that
// DecodeResponse reverses.
func EncodeResponse(r *InferenceResponse, task *spec.InferenceTaskProfile, out map[string]any, want []RequestOutput, binary func(name string) bool) error {
	counts := Parameters{}
	outs, err := encodeOutputs(task, out, want, binary, counts)
	if err != nil {
		return err
	}
	if len(counts) > 0 && r.Parameters == nil {
		r.Parameters = make(Parameters, len(counts))
	}
	for k, v := range counts {
		r.Parameters[k] = v
	}
	r.Outputs = outs
	return nil
}

// encodeOutputs is EncodeOutputsBinary; counts, when not nil, gets each
// tensor_list artifact's element count (nil: such an artifact is an
// error).
func encodeOutputs(task *spec.InferenceTaskProfile, out map[string]any, want []RequestOutput, binary func(name string) bool, counts Parameters) ([]Tensor, error) {
	var only map[string]bool
	if len(want) > 0 {
		only = make(map[string]bool, len(want))
		for _, w := range want {
			if _, ok := task.Artifact(w.Name); !ok {
				return nil, bad("output %q is not an artifact of task %q (artifacts: %s)", w.Name, task.TaskID, artifactNames(task))
			}
			only[w.Name] = true
		}
	}
	res := make([]Tensor, 0, len(task.Outputs))
	for i := range task.Outputs {
		a := &task.Outputs[i]
		v, ok := out[a.ArtifactID]
		if !ok || v == nil || (only != nil && !only[a.ArtifactID]) {
			continue
		}
		bin := binary != nil && binary(a.ArtifactID)
		if isList(a) {
			if counts == nil {
				return nil, fmt.Errorf("artifact %q is a tensor_list, whose element count is a response parameter: encode the response with EncodeResponse", a.ArtifactID)
			}
			enc := encodeTensor
			if bin {
				enc = binaryTensor
			}
			elems, err := splitList(a.ArtifactID, v, enc)
			if err != nil {
				return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
			}
			counts[CountParameter(a.ArtifactID)] = int64(len(elems))
			res = append(res, elems...)
			continue
		}
		if isRecord(a) {
			if counts == nil {
				return nil, fmt.Errorf("artifact %q is a %s, whose count is a response parameter: encode the response with EncodeResponse", a.ArtifactID, a.Kind)
			}
			enc := encodeTensor
			if bin {
				enc = binaryTensor
			}
			parts, n, err := splitRecord(a, v, enc)
			if err != nil {
				return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
			}
			counts[CountParameter(a.ArtifactID)] = int64(n)
			res = append(res, parts...)
			continue
		}
		var t Tensor
		var err error
		if bin {
			t, err = rawArtifact(a, v)
		} else {
			t, err = encodeArtifact(a, v)
		}
		if err != nil {
			return nil, fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
		}
		res = append(res, t)
	}
	return res, nil
}

// CheckOutputs checks that the requested outputs name artifacts of task
// (so a request can fail before it runs).
func CheckOutputs(task *spec.InferenceTaskProfile, want []RequestOutput) error {
	_, err := EncodeOutputs(task, nil, want)
	return err
}

func artifactNames(task *spec.InferenceTaskProfile) string {
	names := make([]string, len(task.Outputs))
	for i, a := range task.Outputs {
		names[i] = a.ArtifactID
	}
	return strings.Join(names, ", ")
}

// encodeArtifact encodes one artifact value.
func encodeArtifact(a *spec.InferenceArtifactSpec, v any) (Tensor, error) {
	switch a.Kind.Holds() {
	case spec.HoldsText:
		s, err := tensor.AsText(v)
		if err != nil {
			return Tensor{}, err
		}
		data, err := encodeScalars([]any{s}, Bytes)
		return Tensor{Name: a.ArtifactID, Datatype: Bytes, Shape: []int64{1}, Data: data}, err
	case spec.HoldsJSON:
		raw, err := tensor.AsJSON(v)
		if err != nil {
			return Tensor{}, err
		}
		data, err := encodeScalars([]any{string(raw)}, Bytes)
		return Tensor{Name: a.ArtifactID, Datatype: Bytes, Shape: []int64{1}, Data: data}, err
	}
	t, err := tensor.AsTensor(v)
	if err != nil {
		return Tensor{}, err
	}
	return encodeTensor(a.ArtifactID, t)
}

// DecodeOutputs maps response outputs back onto the task's artifacts, in
// the value form runtime/client returns: tensors as *tensor.Tensor, text
// and json artifacts as string (JSON text for json). Outputs that are not
// artifacts of the task are ignored (a server may return more); a missing
// artifact is left out (the generated decoders report a required one). A
// tensor_list artifact needs the response's parameters (DecodeResponse):
// here its elements are an error.
func DecodeOutputs(task *spec.InferenceTaskProfile, outs []Tensor) (map[string]any, error) {
	return decodeOutputs(task, outs, nil)
}

// DecodeResponse is DecodeOutputs of r's outputs, with each tensor_list
// artifact reassembled from its elements ID.0, ID.1, ... and r's
// parameter ID.count (see EncodeResponse) as a []*tensor.Tensor of
// exactly that many tensors, and each record and record_list from its
// keys' tensors and its count in the in-process client's value form (a
// map[string]any of tensors, a []any of them). Parts without the count, a
// count that does not match them, gaps, duplicates, keys the artifact
// does not declare, a required key missing and an output named by the
// artifact's own id are errors naming the artifact; it never panics.
func DecodeResponse(task *spec.InferenceTaskProfile, r *InferenceResponse) (map[string]any, error) {
	p := r.Parameters
	if p == nil {
		p = Parameters{}
	}
	return decodeOutputs(task, r.Outputs, p)
}

// decodeOutputs is DecodeResponse with the response's parameters p (nil:
// none given, DecodeOutputs).
func decodeOutputs(task *spec.InferenceTaskProfile, outs []Tensor, p Parameters) (map[string]any, error) {
	res := make(map[string]any, len(outs))
	var lists map[string]map[int]*Tensor // tensor_list elements by artifact and index
	var records map[string]recordParts   // record and record_list tensors by artifact
	for i := range outs {
		o := &outs[i]
		a, ok := task.Artifact(o.Name)
		if !ok {
			if ra, rest, isPart := partOf(task, o.Name); isPart && isRecord(ra) {
				if p == nil {
					return nil, fmt.Errorf("output %q: a tensor of %s artifact %q, whose count is a response parameter: decode the response with DecodeResponse", o.Name, ra.Kind, ra.ArtifactID)
				}
				if records == nil {
					records = map[string]recordParts{}
				}
				if records[ra.ArtifactID] == nil {
					records[ra.ArtifactID] = recordParts{}
				}
				if err := records[ra.ArtifactID].add(ra, rest, o); err != nil {
					return nil, err
				}
				continue
			}
			id, j, isElem := ParseElementName(o.Name)
			if la, ok := task.Artifact(id); isElem && ok && isList(la) {
				if p == nil {
					return nil, fmt.Errorf("output %q: an element of tensor_list artifact %q, whose count is a response parameter: decode the response with DecodeResponse", o.Name, id)
				}
				if lists == nil {
					lists = map[string]map[int]*Tensor{}
				}
				if lists[id] == nil {
					lists[id] = map[int]*Tensor{}
				}
				if _, dup := lists[id][j]; dup {
					return nil, fmt.Errorf("output %q: given twice", o.Name)
				}
				lists[id][j] = o
			}
			continue
		}
		if _, dup := res[o.Name]; dup {
			return nil, fmt.Errorf("output %q: given twice", o.Name)
		}
		switch a.Kind.Holds() {
		case spec.HoldsTensorList:
			return nil, fmt.Errorf("output %q: artifact %q is a tensor_list, which travels as its elements %s, %s, ..., never as one tensor", o.Name, a.ArtifactID, ElementName(a.ArtifactID, 0), ElementName(a.ArtifactID, 1))
		case spec.HoldsRecord:
			return nil, fmt.Errorf("output %q: artifact %q is a record, which travels as its keys %s, never as one tensor", o.Name, a.ArtifactID, KeyName(a.ArtifactID, "KEY"))
		case spec.HoldsRecordList:
			return nil, fmt.Errorf("output %q: artifact %q is a record_list, which travels as the keys of its elements %s, %s, ..., never as one tensor", o.Name, a.ArtifactID, ItemKeyName(a.ArtifactID, 0, "KEY"), ItemKeyName(a.ArtifactID, 1, "KEY"))
		case spec.HoldsText, spec.HoldsJSON:
			if o.Datatype != Bytes {
				return nil, fmt.Errorf("output %q: datatype %s, but a %s artifact is BYTES", o.Name, o.Datatype, a.Kind)
			}
			n, err := elements(o.Shape)
			if err != nil || n != 1 {
				return nil, fmt.Errorf("output %q: shape %v, but a %s artifact is one string: shape [1]", o.Name, o.Shape, a.Kind)
			}
			var s string
			if o.IsBinary() {
				if s, err = rawString(o); err != nil {
					return nil, fmt.Errorf("output %q: %w", o.Name, err)
				}
			} else if err := walkData(o.Data, o.Shape, func(tok []byte) (err error) { s, err = parseString(tok); return err }); err != nil {
				return nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
			res[o.Name] = s
		default:
			t, err := decodeTensor(o, 0)
			if err != nil {
				return nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
			res[o.Name] = t
		}
	}
	if p == nil {
		return res, nil
	}
	for i := range task.Outputs {
		a := &task.Outputs[i]
		if isRecord(a) {
			v, err := joinRecord(a, records[a.ArtifactID], p)
			if err != nil {
				return nil, err
			}
			if v != nil {
				res[a.ArtifactID] = v
			}
			continue
		}
		if !isList(a) {
			continue
		}
		ts, err := joinList(a.ArtifactID, lists[a.ArtifactID], p)
		if err != nil {
			return nil, err
		}
		if ts != nil {
			res[a.ArtifactID] = ts
		}
	}
	return res, nil
}
