package oip

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Metadata returns the model metadata of the family: its name, versions
// (variant ids), the default task's inputs and outputs, and in parameters
// the default task ("default_task"), the default variant
// ("default_version") and every task's inputs and outputs ("tasks": a
// JSON object as text, keyed by task id, with "stream", "aliases" and,
// for a batchable task, "max_batch_size"). Parameter values are scalars,
// as the protocol requires: structured values are JSON text.
func (m *Model) Metadata() ModelMetadata {
	s := m.Spec
	md := ModelMetadata{Name: s.ModelFamilyID, Platform: Platform}
	for _, v := range s.Variants {
		md.Versions = append(md.Versions, v.VariantID)
	}
	tasks := Parameters{}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		in, out := TaskInputs(t), TaskOutputs(t)
		tp := Parameters{"inputs": in, "outputs": out, "stream": t.Stream}
		if len(t.Aliases) > 0 {
			tp["aliases"] = t.Aliases
		}
		if t.Batching != nil {
			tp["max_batch_size"] = t.Batching.MaxBatchSize
		}
		tasks[t.TaskID] = tp
	}
	md.Parameters = Parameters{"tasks": jsonText(tasks)}
	if dv, err := s.Variant(""); err == nil {
		md.Parameters["default_version"] = dv.VariantID
	}
	if dt, err := s.Task(""); err == nil {
		md.Parameters["default_task"] = dt.TaskID
		md.Inputs, md.Outputs = TaskInputs(dt), TaskOutputs(dt)
	}
	if md.Inputs == nil {
		md.Inputs = []TensorMetadata{}
	}
	if md.Outputs == nil {
		md.Outputs = []TensorMetadata{}
	}
	return md
}

// jsonText returns v as JSON text, for a parameter whose value is
// structured (the protocol's parameters are scalars).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// TaskInputs describes the task's inputs as the protocol names them. Scalar
// kinds have shape [1], lists [-1]; tensor, image and video fields have
// the datatype and shape their contract declares (one request is one item:
// a task's batch dimension is left out, named and "*" dimensions are -1),
// else AnyDatatype and any rank (shape nil); a
// tensor_list field is described once, named FIELD.0. Parameters give the
// field's kind, presence and default, and its target when it is
// load_kwargs.
func TaskInputs(t *spec.InferenceTaskProfile) []TensorMetadata {
	out := make([]TensorMetadata, 0, len(t.Inputs))
	for i := range t.Inputs {
		f := &t.Inputs[i]
		if f.Kind.HasParts() {
			out = append(out, partsMetadata(f)...)
			continue
		}
		md := TensorMetadata{Name: f.FieldID, Parameters: Parameters{"kind": string(f.Kind), "presence": f.Presence().String()}}
		switch {
		case f.Kind.TensorLike():
			md.Datatype, md.Shape = contractMetadata(f.Contract(), t.Batching != nil && t.Batching.Dim != "" && f.IsStacked())
			if perItem(f.Kind) {
				md.Name = f.FieldID + ".0"
			}
		case f.Kind.IsList():
			md.Datatype, md.Shape = baseDatatypes[f.Kind.Base()][0], []int64{-1}
		default:
			md.Datatype, md.Shape = baseDatatypes[f.Kind.Base()][0], []int64{1}
		}
		if f.Default != nil {
			if dv, err := kindValue(f.Kind, f.Default); err == nil {
				if f.Kind.IsList() {
					dv = jsonText(dv)
				}
				md.Parameters["default"] = dv
			}
		}
		if len(f.Choices) > 0 {
			md.Parameters["choices"] = jsonText(f.Choices)
		}
		if f.Target == spec.TargetLoadKwargs {
			md.Parameters["target"] = f.Target
		}
		out = append(out, md)
	}
	return out
}

// TaskOutputs describes the task's artifacts as the protocol names them:
// videos UINT8 [-1,-1,-1,-1] (T, H, W, C), images UINT8 [-1,-1,-1],
// embeddings and tensors AnyDatatype of any rank, text and json BYTES [1].
// A tensor_list artifact is described once, under its own id (the name a
// request's outputs select it by), with the datatype and shape of each
// element; its parameters "elements" and "count_parameter" name the
// outputs its elements travel as (ID.0, ID.1, ...) and the response
// parameter that gives their count (ID.count). A record or record_list
// artifact is described so too, with its keys in the parameter "fields"
// (recordMetadata).
func TaskOutputs(t *spec.InferenceTaskProfile) []TensorMetadata {
	out := make([]TensorMetadata, 0, len(t.Outputs))
	for i := range t.Outputs {
		a := &t.Outputs[i]
		md := TensorMetadata{Name: a.ArtifactID, Parameters: Parameters{"kind": string(a.Kind), "required": a.Required}}
		switch h := a.Kind.Holds(); {
		case a.Kind.IsPicture():
			md.Datatype, md.Shape = Uint8, slices.Repeat([]int64{-1}, a.Kind.Picture().Rank())
		case h == spec.HoldsText || h == spec.HoldsJSON:
			md.Datatype, md.Shape = Bytes, []int64{1}
		default:
			md.Datatype, md.Shape = contractMetadata(a.Contract(), t.Batching != nil && t.Batching.Dim != "")
		}
		if isList(a) {
			md.Parameters["elements"] = ElementName(a.ArtifactID, 0) + ", " + ElementName(a.ArtifactID, 1) + ", ..."
			md.Parameters["count_parameter"] = CountParameter(a.ArtifactID)
		}
		if isRecord(a) {
			md.Datatype, md.Shape = recordMetadata(a, md.Parameters)
		}
		out = append(out, md)
	}
	return out
}

// recordMetadata describes record or record_list artifact a: its
// datatype is its keys' when they all declare the same one, else
// AnyDatatype, its shape nil; the parameters p get "elements", the names
// its tensors travel as (ID.KEY, ...; ID.0.KEY, ..., ID.1.KEY, ...),
// "count_parameter" (ID.count) and "fields", JSON text listing each key
// with its datatype, shape (as for any output) and whether it is
// required.
func recordMetadata(a *spec.InferenceArtifactSpec, p Parameters) (Datatype, []int64) {
	type key struct {
		Name     string   `json:"name"`
		Datatype Datatype `json:"datatype"`
		Shape    []int64  `json:"shape"`
		Required bool     `json:"required"`
	}
	keys := make([]key, len(a.Fields))
	var names []string
	for k := range a.Fields {
		f := &a.Fields[k]
		d, shape := contractMetadata(spec.TensorContract{DType: f.DType, Shape: f.Shape}, false)
		keys[k] = key{Name: f.Name, Datatype: d, Shape: shape, Required: f.Required}
		if isRecordList(a) {
			names = append(names, ItemKeyName(a.ArtifactID, 0, f.Name))
		} else {
			names = append(names, KeyName(a.ArtifactID, f.Name))
		}
	}
	if isRecordList(a) && len(a.Fields) > 0 {
		names = append(names, ItemKeyName(a.ArtifactID, 1, a.Fields[0].Name), "...")
	}
	p["elements"] = strings.Join(names, ", ")
	p["count_parameter"] = CountParameter(a.ArtifactID)
	p["fields"] = jsonText(keys)
	d := AnyDatatype
	for k := range keys {
		if k == 0 {
			d = keys[k].Datatype
		} else if keys[k].Datatype != d {
			d = AnyDatatype
		}
	}
	return d, nil
}

// contractMetadata is the datatype and shape of a declared tensor contract
// for one item: batched drops the leading batch dimension.
func contractMetadata(c spec.TensorContract, batched bool) (Datatype, []int64) {
	d := AnyDatatype
	if dt, ok := DatatypeOf(c.DType); ok {
		d = dt
	}
	if c.Shape == nil {
		return d, nil
	}
	dims := c.Shape
	if batched && len(dims) > 0 {
		dims = dims[1:]
	}
	shape := make([]int64, len(dims))
	for i, dim := range dims {
		if n, ok := dim.Size(); ok {
			shape[i] = n
		} else {
			shape[i] = -1
		}
	}
	return d, shape
}

// partsMetadata describes the inputs of a field with parts (parts.go): one
// per part, named ID.PART, with the part's dtype and shape, the field's
// kind and id (parameter "field") and the part's presence ("required"
// when the field is required and so is the part, else "optional"), and
// the field's target when it is load_kwargs.
func partsMetadata(f *spec.InferenceFieldSpec) []TensorMetadata {
	out := make([]TensorMetadata, len(f.Fields))
	for k, p := range f.Fields {
		presence := spec.Optional
		if f.Presence() == spec.Required && f.PartRequired(k) {
			presence = spec.Required
		}
		md := TensorMetadata{Name: PartInputName(f, k), Parameters: Parameters{"kind": string(f.Kind), "field": f.FieldID, "presence": presence.String()}}
		md.Datatype, md.Shape = contractMetadata(spec.TensorContract{DType: p.DType, Shape: p.Shape}, false)
		if f.Target == spec.TargetLoadKwargs {
			md.Parameters["target"] = f.Target
		}
		out[k] = md
	}
	return out
}
