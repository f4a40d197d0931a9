package spec

import "encoding/json"

// The seed's dataclasses give some keys defaults: a field's kind "string"
// and target "call_kwargs", a variant's and a checkpoint's status
// "unknown", a checkpoint's required true, a spec's default variant and
// task ids "default". Decoding a manifest or JSON applies them to absent
// keys (UnmarshalJSON). In a Go literal the string ones are the zero
// values — an empty Kind, Target, Status, DefaultVariantID or
// DefaultTaskID stands for the seed's default — so a spec written in Go
// means what the same spec decoded means:
//
//   - Kind: the zero Kind is KindString (Kind.Effective); every Kind
//     method answers for it as for KindString.
//   - Target: an empty target is call_kwargs (InferenceFieldSpec.CallKwarg).
//   - Status: an empty status is StatusUnknown.
//   - DefaultVariantID, DefaultTaskID: empty is DefaultID
//     (ModelInferenceSpec.DefaultVariant, DefaultTask; Variant("") and
//     Task("") select it).
//
// The JSON form of every spec type (and so ToDict) writes the default for
// an empty value, as the seed's to_dict writes the dataclass's default.
//
// A checkpoint's Required is a bool, whose zero value is false: a Go
// literal that leaves it out says the checkpoint is optional, where the
// seed's default is required (docs/differences.md). Decoding applies the
// seed's true.
const (
	// DefaultID is the seed's default variant and task id, what an empty
	// DefaultVariantID or DefaultTaskID stands for.
	DefaultID = "default"
	// StatusUnknown is the seed's default status of a variant and of a
	// checkpoint, what an empty Status stands for.
	StatusUnknown = "unknown"
)

// CallKwarg reports whether the field is passed as a call keyword argument:
// its target is call_kwargs, or empty (the seed's default). Otherwise it
// is a load keyword argument.
func (f *InferenceFieldSpec) CallKwarg() bool {
	return f.Target == "" || f.Target == TargetCallKwargs
}

// DefaultVariant returns the id of the variant a caller gets when it names
// none: DefaultVariantID, or DefaultID when that is empty.
func (s *ModelInferenceSpec) DefaultVariant() string {
	return orDefault(s.DefaultVariantID, DefaultID)
}

// DefaultTask returns the id of the task a caller gets when it names none:
// DefaultTaskID, or DefaultID when that is empty.
func (s *ModelInferenceSpec) DefaultTask() string {
	return orDefault(s.DefaultTaskID, DefaultID)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// MarshalJSON writes the field with the seed's defaults for an empty kind
// and target.
func (f InferenceFieldSpec) MarshalJSON() ([]byte, error) {
	type plain InferenceFieldSpec
	p := plain(f)
	p.Kind = p.Kind.Effective()
	p.Target = orDefault(p.Target, TargetCallKwargs)
	return json.Marshal(p)
}

// MarshalJSON writes the checkpoint reference with the seed's default for
// an empty status.
func (c InferenceCheckpointRef) MarshalJSON() ([]byte, error) {
	type plain InferenceCheckpointRef
	p := plain(c)
	p.Status = orDefault(p.Status, StatusUnknown)
	return json.Marshal(p)
}

// MarshalJSON writes the variant with the seed's default for an empty
// status.
func (v InferenceVariantSpec) MarshalJSON() ([]byte, error) {
	type plain InferenceVariantSpec
	p := plain(v)
	p.Status = orDefault(p.Status, StatusUnknown)
	return json.Marshal(p)
}

// MarshalJSON writes the spec with the seed's defaults for empty default
// variant and task ids.
func (s ModelInferenceSpec) MarshalJSON() ([]byte, error) {
	type plain ModelInferenceSpec
	p := plain(s)
	p.DefaultVariantID = s.DefaultVariant()
	p.DefaultTaskID = s.DefaultTask()
	return json.Marshal(p)
}
