// Package ir is the generator's intermediate representation: one valid
// manifest resolved into everything the outputs need, decided once.
//
// Build checks a decoded manifest against every rule no JSON Schema can
// express (unique ids, defaults that exist and fit their field, constraints
// that apply to the kind, batching and streaming settings, Go names that
// are legal and do not collide with each other or with the names the
// generated package declares itself) and resolves it into a Family: every
// Go identifier, every Go type, each field's presence, its choice type and
// normalised default. The validator runs Build; the Go emitter, the docs
// renderer, the breaking-change checker and the importer only read the
// Family it returns. So whatever "wfgen validate" accepts, "wfgen
// generate" can render — and nothing else is rejected.
package ir

import (
	"path"
	"strings"

	"github.com/worldfoundry/wfgen/gen/manifest"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Diagnostic is a located problem in a manifest.
type Diagnostic = manifest.Diagnostic

// Import paths of the packages generated code refers to.
const (
	SpecPath   = "github.com/worldfoundry/wfgen/runtime/spec"
	TensorPath = "github.com/worldfoundry/wfgen/runtime/tensor"
	ClientPath = "github.com/worldfoundry/wfgen/runtime/client"
	BatchPath  = "github.com/worldfoundry/wfgen/runtime/batch"
	StreamPath = "github.com/worldfoundry/wfgen/runtime/stream"
	ParamsPath = "github.com/worldfoundry/wfgen/runtime/params"
	EnumPath   = "github.com/worldfoundry/wfgen/runtime/enum"
	PixelsPath = "github.com/worldfoundry/wfgen/runtime/pixels"
	JSONPath   = "encoding/json"
)

// Family is one valid manifest resolved for the outputs.
type Family struct {
	// File is the manifest the family comes from.
	File *manifest.File
	// Spec is the family's spec (File.Spec), defaults applied and field
	// defaults normalised to their kind's Go form.
	Spec *spec.ModelInferenceSpec
	// Package is the Go package name, also the output folder and file name.
	Package string
	// Variants are the family's variants in manifest order.
	Variants []*Variant
	// Tasks are the family's tasks in manifest order.
	Tasks []*Task
	// DefaultVariant is the variant used when none is named
	// (default_variant_id, which may be an alias).
	DefaultVariant *Variant
	// DefaultTask is the task used when none is named.
	DefaultTask *Task

	identity Identity
}

// Variant is one resolved variant.
type Variant struct {
	// Spec is the variant's spec.
	Spec *spec.InferenceVariantSpec
	// Const is the name of its Variant constant (VariantDefault).
	Const string
}

// Task is one resolved task.
type Task struct {
	// Spec is the task's spec.
	Spec *spec.InferenceTaskProfile
	// Index is the task's position in the manifest.
	Index int
	// Name is the exported base name (TextToVideo) and the client method.
	Name string
	// Const is the name of its Task constant (TaskTextToVideo).
	Const string
	// Params, Result and Defaults name the params type, the result type
	// and the function returning default params.
	Params, Result, Defaults string
	// Batch names the batch method of a batchable task ("" otherwise).
	Batch string
	// Stream names the stream method of a streaming task ("" otherwise).
	Stream string
	// Var names the package variable holding the task's *client.Task (its
	// compiled rules and the params and result types it binds).
	Var string
	// Fields are the task's inputs, in manifest order.
	Fields []*Field
	// Artifacts are the task's outputs, in manifest order.
	Artifacts []*Artifact
}

// Field is one resolved input field.
type Field struct {
	// Spec is the field's spec.
	Spec *spec.InferenceFieldSpec
	// Index is the field's position in the task's inputs.
	Index int
	// Name is the Go struct field name.
	Name string
	// Kind is the field's kind.
	Kind spec.Kind
	// Presence says whether the caller must give the field. Required and
	// Defaulted fields are plain values; Optional scalars are pointers (nil
	// is unset) and optional lists and tensors are nil when unset.
	Presence spec.Presence
	// Type is the field's Go type.
	Type GoType
	// Choice is the field's own string type when it has choices, else nil.
	Choice *Enum
	// FromPicture names the params method that sets an image field from an
	// image.Image (Set<Name>FromImage) or a video field from frames
	// (Set<Name>FromFrames); "" for other kinds.
	FromPicture string
	// Parts is the struct generated for a field of a kind with parts
	// (tensor_dict, tensor_tuple: one field per part, in manifest order);
	// nil for other kinds. The params field is the struct, or a pointer
	// to it when the field is optional.
	Parts *Record
}

// Artifact is one resolved output artifact.
type Artifact struct {
	// Spec is the artifact's spec.
	Spec *spec.InferenceArtifactSpec
	// Index is the artifact's position in the task's outputs.
	Index int
	// Name is the Go field name in the result struct.
	Name string
	// Kind is the artifact's kind.
	Kind spec.ArtifactKind
	// Type is the result field's Go type.
	Type GoType
	// Record is the struct generated for a record or record_list
	// artifact (one field per key of its dicts); nil for other kinds.
	Record *Record
}

// Record is the struct generated for a record or record_list artifact (a
// record is a pointer to it, a record_list a slice of it), or for an input
// field with parts (Field.Parts).
type Record struct {
	// Type names the struct: the task's Go name then the artifact's
	// (ForwardDetections).
	Type string
	// Fields are its fields, one per key, in manifest order.
	Fields []*RecordField
}

// RecordField is one field of a record's struct: one key of the dict.
type RecordField struct {
	// Spec is the key's spec.
	Spec *spec.ArtifactFieldSpec
	// Name is the Go field name.
	Name string
	// Type is the field's Go type (the record kinds' spec.ArtifactInfo.Go).
	Type GoType
}

// Enum is the string type of a field with choices.
type Enum struct {
	// Type is the type's name (task name + field name: RunStyle).
	Type string
	// Values are the choices, in manifest order.
	Values []EnumValue
	// Consts says whether a constant is declared per value: only for at
	// most MaxChoiceConsts values; larger sets are data only.
	Consts bool
	// Set names the package variable holding the enum table.
	Set string
}

// MaxChoiceConsts is the largest choice list that gets a constant per
// value. A longer list is emitted as data (the spec's choices) with the
// same validation, so a 20,000-value list compiles in a moment.
const MaxChoiceConsts = 256

// EnumValue is one allowed value of a choice field.
type EnumValue struct {
	// Value is the string value.
	Value string
	// Const is the constant's name ("" when the enum has no constants).
	Const string
}

// GoType is a Go type: a named type, possibly behind a pointer and/or in a
// slice ([]*tensor.Tensor).
type GoType struct {
	// Slice says the type is a slice of the rest.
	Slice bool
	// Pointer says the type (or the slice element) is a pointer.
	Pointer bool
	// Pkg is the import path of Name ("" for predeclared and generated types).
	Pkg string
	// Name is the type name.
	Name string
}

// String returns the type as Go source, packages by their last path
// element: "[]*tensor.Tensor", "*int64", "RunStyle".
func (t GoType) String() string {
	var b strings.Builder
	if t.Slice {
		b.WriteString("[]")
	}
	if t.Pointer {
		b.WriteByte('*')
	}
	if t.Pkg != "" {
		b.WriteString(path.Base(t.Pkg))
		b.WriteByte('.')
	}
	b.WriteString(t.Name)
	return b.String()
}
