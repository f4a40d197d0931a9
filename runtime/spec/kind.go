package spec

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Kind is the value type of an input field (InferenceFieldSpec.Kind). Its
// methods answer the questions every layer asks about a kind — is it a
// list, what are its items, what is one of them (Base), is it a picture,
// which constraints apply, what Go and TorchScript type holds it — from
// the kind table (KindInfo), so that no package keeps a kind table of its
// own or switches on kinds: adding a kind is adding its row. The artifact
// kinds have a table of their own (ArtifactInfo).
type Kind string

// Field kinds accepted by InferenceFieldSpec.Kind.
const (
	KindString     Kind = "string"
	KindInt        Kind = "int"
	KindFloat      Kind = "float"
	KindBool       Kind = "bool"
	KindTensor     Kind = "tensor"
	KindImage      Kind = "image"
	KindVideo      Kind = "video"
	KindStringList Kind = "string_list"
	KindIntList    Kind = "int_list"
	KindFloatList  Kind = "float_list"
	KindBoolList   Kind = "bool_list"
	KindTensorList Kind = "tensor_list"
	// KindTensorDict is a dict of tensors (TorchScript Dict[str, Tensor])
	// whose keys the field's fields declare: a generated struct with one
	// *tensor.Tensor field per key.
	KindTensorDict Kind = "tensor_dict"
	// KindTensorTuple is a fixed tuple of tensors (TorchScript
	// Tuple[Tensor, ...]), one element per field the field declares: a
	// generated struct with one *tensor.Tensor field per element, in order.
	KindTensorTuple Kind = "tensor_tuple"
)

// Form says how the values of a field kind are built from its Base: one
// value, a list of them, or a struct of tensors whose parts the field
// declares (InferenceFieldSpec.Fields).
type Form int8

// The forms. The zero Form is none: the form of a kind that is not valid.
const (
	// FormOne is one value of the base.
	FormOne Form = iota + 1
	// FormList is a list of values of the base (TorchScript List[...]).
	FormList
	// FormDict is a dict of tensors keyed by the field's declared fields
	// (TorchScript Dict[str, Tensor]); the engine's form is a
	// map[string]any holding the keys that are set.
	FormDict
	// FormTuple is a tuple of tensors, one per declared field, in order
	// (TorchScript Tuple[Tensor, ...]); the engine's form is a []any.
	FormTuple
)

// HasParts reports whether values of the form are made of parts the field
// declares under fields (dict, tuple): their Go type is a struct generated
// per field, one *tensor.Tensor per part.
func (f Form) HasParts() bool { return f == FormDict || f == FormTuple }

// Base is what one value of a field kind is, or one item of a list kind:
// the few value types that code converting values (Go, JSON, YAML,
// TorchScript, the wire) has to tell apart. Such code switches on a
// kind's Base; kinds that share a base differ only by their rows in the
// table (KindInfo), which every other question reads.
type Base int8

// The bases. The zero Base is none: the base of a kind that is not valid.
const (
	BaseString Base = iota + 1
	BaseInt
	BaseFloat
	BaseBool
	BaseTensor
)

// Picture says whether the values of a kind are pictures that an image
// spec describes (layout, channels, range, normalisation), and which.
type Picture int8

// The pictures. The zero Picture is none: the picture of a kind that is
// not valid.
const (
	// NotPicture is the Picture of kinds whose values are no pictures.
	NotPicture Picture = iota + 1
	// PictureImage is one picture: [H, W, C] (layout HWC) or [C, H, W].
	PictureImage
	// PictureVideo is a video's frames: [T, H, W, C] or [T, C, H, W].
	PictureVideo
)

// Rank is the rank of one picture value: 3 for an image, 4 for a video's
// frames; 0 for NotPicture.
func (p Picture) Rank() int {
	switch p {
	case PictureImage:
		return 3
	case PictureVideo:
		return 4
	}
	return 0
}

// BaseInfo describes a base: its row of the base table, read through
// Base.Info and Kind's methods.
type BaseInfo struct {
	// Base is the base the row describes.
	Base Base
	// Kind is the field kind of one such value (string, int, float,
	// bool, tensor).
	Kind Kind
	// Go is the Go type of one value in a generated params struct, a
	// decoded request and the engine's value form.
	Go reflect.Type
	// TorchScript is the TorchScript type one value is passed as.
	TorchScript string
	// JSONType is the JSON Schema type of one value in JSON (a manifest
	// default, an OIP request's data): a tensor's elements are an array.
	JSONType string
	// Datatypes are the Open Inference Protocol datatypes one value
	// travels as: for a scalar, those a server accepts, the first the one
	// an encoder sends; for a tensor, those a runtime dtype has (the
	// value's own dtype decides).
	Datatypes []string
}

// baseTable is the table of bases, in Base order.
var baseTable = [...]BaseInfo{
	{Base: BaseString, Kind: KindString, Go: reflect.TypeFor[string](), TorchScript: "str", JSONType: "string",
		Datatypes: []string{"BYTES"}},
	{Base: BaseInt, Kind: KindInt, Go: reflect.TypeFor[int64](), TorchScript: "int", JSONType: "integer",
		Datatypes: []string{"INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32", "UINT16", "UINT8"}},
	{Base: BaseFloat, Kind: KindFloat, Go: reflect.TypeFor[float64](), TorchScript: "float", JSONType: "number",
		Datatypes: []string{"FP64", "FP32", "FP16", "BF16"}},
	{Base: BaseBool, Kind: KindBool, Go: reflect.TypeFor[bool](), TorchScript: "bool", JSONType: "boolean",
		Datatypes: []string{"BOOL"}},
	{Base: BaseTensor, Kind: KindTensor, Go: reflect.TypeFor[*tensor.Tensor](), TorchScript: "Tensor", JSONType: "array",
		Datatypes: []string{"BOOL", "UINT8", "INT32", "INT64", "FP16", "FP32", "BF16"}},
}

// Bases lists every base, in Base order.
var Bases = rowKeys(baseTable[:], func(r *BaseInfo) Base { return r.Base })

// Info returns b's row of the base table; ok is false for a Base that is
// none of the bases.
func (b Base) Info() (info BaseInfo, ok bool) {
	if b < 1 || int(b) > len(baseTable) {
		return BaseInfo{}, false
	}
	return baseTable[b-1], true
}

// String names the base as the field kind of one such value: "string",
// "int", "float", "bool", "tensor"; "" for none.
func (b Base) String() string {
	info, _ := b.Info()
	return string(info.Kind)
}

// KindInfo describes a field kind: its row of the kind table, the one
// place a kind is described. Kind's methods read it; what a row leaves to
// its base (the Go, TorchScript, JSON and wire types of one value) is in
// the base table. A kind that does not apply to some question says so
// with a value of its own (NotPicture), so every row fills every column.
type KindInfo struct {
	// Kind is the kind's name in manifests.
	Kind Kind
	// Const is the name of the kind's constant in this package, which
	// generated spec literals write.
	Const string
	// Phrase names the kind in messages: "an int", "a list of strings".
	Phrase string
	// Elem is the kind of one item of a list kind or one part of a dict or
	// tuple kind, and the kind itself for a kind of single values.
	Elem Kind
	// Base is what one value, or one item, is.
	Base Base
	// Picture says whether the values are pictures, and which.
	Picture Picture
	// Form says whether a value is one value of the base, a list of them
	// or a struct of parts (dict, tuple).
	Form Form
}

// kindTable is the table of field kinds, in documentation order.
var kindTable = [...]KindInfo{
	{Kind: KindString, Const: "KindString", Phrase: "a string", Elem: KindString, Base: BaseString, Picture: NotPicture, Form: FormOne},
	{Kind: KindInt, Const: "KindInt", Phrase: "an int", Elem: KindInt, Base: BaseInt, Picture: NotPicture, Form: FormOne},
	{Kind: KindFloat, Const: "KindFloat", Phrase: "a float", Elem: KindFloat, Base: BaseFloat, Picture: NotPicture, Form: FormOne},
	{Kind: KindBool, Const: "KindBool", Phrase: "a bool", Elem: KindBool, Base: BaseBool, Picture: NotPicture, Form: FormOne},
	{Kind: KindTensor, Const: "KindTensor", Phrase: "a tensor", Elem: KindTensor, Base: BaseTensor, Picture: NotPicture, Form: FormOne},
	{Kind: KindImage, Const: "KindImage", Phrase: "an image", Elem: KindImage, Base: BaseTensor, Picture: PictureImage, Form: FormOne},
	{Kind: KindVideo, Const: "KindVideo", Phrase: "a video", Elem: KindVideo, Base: BaseTensor, Picture: PictureVideo, Form: FormOne},
	{Kind: KindStringList, Const: "KindStringList", Phrase: "a list of strings", Elem: KindString, Base: BaseString, Picture: NotPicture, Form: FormList},
	{Kind: KindIntList, Const: "KindIntList", Phrase: "a list of ints", Elem: KindInt, Base: BaseInt, Picture: NotPicture, Form: FormList},
	{Kind: KindFloatList, Const: "KindFloatList", Phrase: "a list of floats", Elem: KindFloat, Base: BaseFloat, Picture: NotPicture, Form: FormList},
	{Kind: KindBoolList, Const: "KindBoolList", Phrase: "a list of bools", Elem: KindBool, Base: BaseBool, Picture: NotPicture, Form: FormList},
	{Kind: KindTensorList, Const: "KindTensorList", Phrase: "a list of tensors", Elem: KindTensor, Base: BaseTensor, Picture: NotPicture, Form: FormList},
	{Kind: KindTensorDict, Const: "KindTensorDict", Phrase: "a dict of tensors", Elem: KindTensor, Base: BaseTensor, Picture: NotPicture, Form: FormDict},
	{Kind: KindTensorTuple, Const: "KindTensorTuple", Phrase: "a tuple of tensors", Elem: KindTensor, Base: BaseTensor, Picture: NotPicture, Form: FormTuple},
}

// kindRows indexes kindTable by kind.
var kindRows = indexRows(kindTable[:], func(r *KindInfo) Kind { return r.Kind })

// FieldKinds lists every field kind in documentation order (the kind
// table's).
var FieldKinds = rowKeys(kindTable[:], func(r *KindInfo) Kind { return r.Kind })

// indexRows maps the key of each row of a table to the row.
func indexRows[K comparable, R any](table []R, key func(*R) K) map[K]*R {
	m := make(map[K]*R, len(table))
	for i := range table {
		m[key(&table[i])] = &table[i]
	}
	return m
}

// rowKeys lists the keys of a table's rows, in order.
func rowKeys[K any, R any](table []R, key func(*R) K) []K {
	out := make([]K, len(table))
	for i := range table {
		out[i] = key(&table[i])
	}
	return out
}

// Info returns k's row of the kind table (the zero Kind's is KindString's,
// see Effective); ok is false for a kind that is not valid.
func (k Kind) Info() (info KindInfo, ok bool) {
	if r := kindRows[k.Effective()]; r != nil {
		return *r, true
	}
	return KindInfo{}, false
}

// Effective returns the kind k stands for: k itself, or KindString for
// the zero Kind. An empty kind is the seed's default, "string", in a Go
// literal as in a decoded manifest: every method of Kind answers for it as
// for KindString, and a field's JSON form (ToDict) says "string".
func (k Kind) Effective() Kind {
	if k == "" {
		return KindString
	}
	return k
}

// Valid reports whether k is one of the field kinds (the zero Kind is
// KindString).
func (k Kind) Valid() bool { return kindRows[k.Effective()] != nil }

// IsList reports whether values of k are lists.
func (k Kind) IsList() bool { return k.Form() == FormList }

// Form says how values of k are built from its base: one value, a list,
// or a struct of declared parts (dict, tuple); none (0) for a kind that is
// not valid.
func (k Kind) Form() Form {
	if r := kindRows[k.Effective()]; r != nil {
		return r.Form
	}
	return 0
}

// HasParts reports whether values of k are made of parts the field
// declares under fields (tensor_dict, tensor_tuple).
func (k Kind) HasParts() bool { return k.Form().HasParts() }

// Elem returns the kind of one value: the item kind of a list kind, the
// kind of each part of a dict or tuple kind, k itself otherwise.
func (k Kind) Elem() Kind {
	if r := kindRows[k.Effective()]; r != nil {
		return r.Elem
	}
	return k.Effective()
}

// ListOf returns the list kind whose items are of kind k; ok is false
// when there is none.
func (k Kind) ListOf() (list Kind, ok bool) {
	for i := range kindTable {
		if r := &kindTable[i]; r.Elem == k.Effective() && r.Form == FormList {
			return r.Kind, true
		}
	}
	return "", false
}

// Base returns what one value (or item) of k is; none (0) for a kind that
// is not valid.
func (k Kind) Base() Base {
	if r := kindRows[k.Effective()]; r != nil {
		return r.Base
	}
	return 0
}

// Picture says whether values of k are pictures, and which; none (0) for
// a kind that is not valid.
func (k Kind) Picture() Picture {
	if r := kindRows[k.Effective()]; r != nil {
		return r.Picture
	}
	return 0
}

// IsPicture reports whether values of k are pictures (image, video).
func (k Kind) IsPicture() bool { return k.Picture() > NotPicture }

// TensorLike reports whether values of k carry tensor data (tensor, image,
// video, tensor_list, tensor_dict, tensor_tuple). Such values exist only
// at call time: they have no default.
func (k Kind) TensorLike() bool { return k.Base() == BaseTensor }

// Stacked reports whether each value of k is one tensor (tensor, image,
// video): what batching stacks (InferenceFieldSpec.IsStacked) and what
// an AOTInductor package's tensor input is.
func (k Kind) Stacked() bool { return k.TensorLike() && k.Form() == FormOne }

// Numeric reports whether k's values (or items) are numbers.
func (k Kind) Numeric() bool { b := k.Base(); return b == BaseInt || b == BaseFloat }

// Integer reports whether k's values (or items) are integers.
func (k Kind) Integer() bool { return k.Base() == BaseInt }

// Textual reports whether k's values (or items) are strings.
func (k Kind) Textual() bool { return k.Base() == BaseString }

// Phrase names the kind for messages: "an int", "a list of strings".
func (k Kind) Phrase() string {
	if r := kindRows[k.Effective()]; r != nil {
		return r.Phrase
	}
	return "a " + string(k)
}

// GoType is the Go type of a value of k in a generated params struct, a
// decoded request and the engine's value form (a list is a slice of its
// items' type); for a kind with parts (dict, tuple), whose struct is
// generated per field, the type of each part; nil for a kind that is not
// valid.
func (k Kind) GoType() reflect.Type {
	b, ok := k.Base().Info()
	if !ok {
		return nil
	}
	if k.IsList() {
		return reflect.SliceOf(b.Go)
	}
	return b.Go
}

// TorchScriptType is the TorchScript type a value of k is passed as
// ("int", "List[str]", "Tensor" for images and videos, "Dict[str,
// Tensor]"), or "" for a kind that is not valid. A tuple's type depends
// on its parts: TupleType, or InferenceFieldSpec.TorchScriptType.
func (k Kind) TorchScriptType() string { return k.TupleType(0) }

// TupleType is TorchScriptType with n parts for a tuple kind
// ("Tuple[Tensor, Tensor]"); other kinds ignore n.
func (k Kind) TupleType(n int) string {
	b, ok := k.Base().Info()
	if !ok {
		return ""
	}
	switch k.Form() {
	case FormList:
		return "List[" + b.TorchScript + "]"
	case FormDict:
		return "Dict[str, " + b.TorchScript + "]"
	case FormTuple:
		if n == 0 {
			return "Tuple[" + b.TorchScript + ", ...]"
		}
		return "Tuple[" + strings.Repeat(b.TorchScript+", ", n-1) + b.TorchScript + "]"
	}
	return b.TorchScript
}

// Allows reports whether constraint c applies to fields of kind k.
func (k Kind) Allows(c Constraint) bool {
	switch c {
	case ConstraintMinimum, ConstraintMaximum:
		return k.Numeric()
	case ConstraintMultipleOf, ConstraintRemainder:
		return k.Integer()
	case ConstraintMinLength, ConstraintMaxLength:
		return k.Textual() || k.IsList()
	case ConstraintPattern, ConstraintChoices:
		return k.Textual()
	case ConstraintDType, ConstraintShape:
		// A dict or tuple declares them per part, under fields.
		return k.TensorLike() && !k.HasParts()
	case ConstraintImage:
		return k.IsPicture()
	}
	return false
}

// Constraint names a field constraint by its manifest key: the value rules
// (minimum, pattern, ...) and the tensor contract (dtype, shape, image).
type Constraint string

// The field constraints, by manifest key.
const (
	ConstraintMinimum    Constraint = "minimum"
	ConstraintMaximum    Constraint = "maximum"
	ConstraintMultipleOf Constraint = "multiple_of"
	ConstraintRemainder  Constraint = "remainder"
	ConstraintMinLength  Constraint = "min_length"
	ConstraintMaxLength  Constraint = "max_length"
	ConstraintPattern    Constraint = "pattern"
	ConstraintChoices    Constraint = "choices"
	ConstraintDType      Constraint = "dtype"
	ConstraintShape      Constraint = "shape"
	ConstraintImage      Constraint = "image"
)

// Constraints lists every constraint in documentation order.
var Constraints = []Constraint{
	ConstraintMinimum, ConstraintMaximum, ConstraintMultipleOf, ConstraintRemainder,
	ConstraintMinLength, ConstraintMaxLength, ConstraintPattern, ConstraintChoices,
	ConstraintDType, ConstraintShape, ConstraintImage,
}

// KindsAllowing returns the kinds constraint c applies to, in documentation
// order.
func KindsAllowing(c Constraint) []Kind {
	var out []Kind
	for _, k := range FieldKinds {
		if k.Allows(c) {
			out = append(out, k)
		}
	}
	return out
}

// Set reports whether field f sets constraint c.
func (c Constraint) Set(f *InferenceFieldSpec) bool {
	switch c {
	case ConstraintMinimum:
		return f.Minimum != nil
	case ConstraintMaximum:
		return f.Maximum != nil
	case ConstraintMultipleOf:
		return f.MultipleOf != nil
	case ConstraintRemainder:
		return f.Remainder != 0
	case ConstraintMinLength:
		return f.MinLength != nil
	case ConstraintMaxLength:
		return f.MaxLength != nil
	case ConstraintPattern:
		return f.Pattern != ""
	case ConstraintChoices:
		return len(f.Choices) > 0
	case ConstraintDType:
		return f.DType != ""
	case ConstraintShape:
		return f.Shape != nil
	case ConstraintImage:
		return f.Image != nil
	}
	return false
}

// ArtifactKind is the type of an output artifact (InferenceArtifactSpec.Kind).
type ArtifactKind string

// Artifact kinds accepted by InferenceArtifactSpec.Kind.
const (
	ArtifactVideo     ArtifactKind = "video"
	ArtifactImage     ArtifactKind = "image"
	ArtifactEmbedding ArtifactKind = "embedding"
	ArtifactTensor    ArtifactKind = "tensor"
	ArtifactText      ArtifactKind = "text"
	ArtifactJSON      ArtifactKind = "json"
	// ArtifactTensorList is a list of tensors (TorchScript List[Tensor]),
	// a []*tensor.Tensor in Go.
	ArtifactTensorList ArtifactKind = "tensor_list"
	// ArtifactRecord is a dict of tensors (TorchScript Dict[str, Tensor])
	// whose keys the artifact's fields declare: a generated struct with
	// one *tensor.Tensor field per key.
	ArtifactRecord ArtifactKind = "record"
	// ArtifactRecordList is a list of such dicts (TorchScript
	// List[Dict[str, Tensor]], a detector's one dict per image): a slice
	// of the generated struct.
	ArtifactRecordList ArtifactKind = "record_list"
)

// Holds says what the value of an artifact kind is.
type Holds int8

// What artifacts hold. The zero Holds is none: that of an artifact kind
// that is not valid.
const (
	// HoldsTensor is one tensor (*tensor.Tensor).
	HoldsTensor Holds = iota + 1
	// HoldsTensorList is a list of tensors ([]*tensor.Tensor;
	// TorchScript List[Tensor]).
	HoldsTensorList
	// HoldsText is a string.
	HoldsText
	// HoldsJSON is a JSON document (TorchScript: a str holding JSON, or a
	// dict, list or scalar without tensors).
	HoldsJSON
	// HoldsRecord is a dict of tensors keyed by the artifact's fields
	// (TorchScript Dict[str, Tensor]): a pointer to a generated struct.
	HoldsRecord
	// HoldsRecordList is a list of such dicts (TorchScript
	// List[Dict[str, Tensor]]): a slice of the generated struct.
	HoldsRecordList
)

// IsRecord reports whether h is a dict of tensors, or a list of them,
// whose keys an artifact's fields declare (record, record_list): only
// such artifacts declare fields, and their Go type is a struct generated
// per artifact.
func (h Holds) IsRecord() bool { return h == HoldsRecord || h == HoldsRecordList }

// ArtifactInfo describes an artifact kind: its row of the artifact kind
// table, the one place an artifact kind is described. ArtifactKind's
// methods read it; a kind that does not apply to some question says so
// with a value of its own (NotPicture), so every row fills every column.
type ArtifactInfo struct {
	// Kind is the kind's name in manifests.
	Kind ArtifactKind
	// Const is the name of the kind's constant in this package, which
	// generated spec literals write.
	Const string
	// Holds is what the artifact's value is.
	Holds Holds
	// Picture says whether the value is a picture, and which: a picture
	// artifact may declare an image spec, and reaches Go as uint8
	// [H, W, C] (frames [T, H, W, C]).
	Picture Picture
	// Go is the Go type of the artifact in a generated result struct (an
	// optional text artifact is a pointer to it). For a record kind, whose
	// struct is generated per artifact, it is the type of each of that
	// struct's fields; the artifact is a pointer to the struct (record)
	// or a slice of it (record_list).
	Go reflect.Type
	// Returns says, for messages, what the task's method must return for
	// the artifact: "Tensor, uint8 [H,W,C]".
	Returns string
}

// artifactTable is the table of artifact kinds, in documentation order.
var artifactTable = [...]ArtifactInfo{
	{Kind: ArtifactVideo, Const: "ArtifactVideo", Holds: HoldsTensor, Picture: PictureVideo,
		Go: reflect.TypeFor[*tensor.Video](), Returns: "Tensor, uint8 [T,H,W,C]"},
	{Kind: ArtifactImage, Const: "ArtifactImage", Holds: HoldsTensor, Picture: PictureImage,
		Go: reflect.TypeFor[*tensor.Image](), Returns: "Tensor, uint8 [H,W,C]"},
	{Kind: ArtifactEmbedding, Const: "ArtifactEmbedding", Holds: HoldsTensor, Picture: NotPicture,
		Go: reflect.TypeFor[*tensor.Embedding](), Returns: "Tensor, floating [D] or [N,D]"},
	{Kind: ArtifactTensor, Const: "ArtifactTensor", Holds: HoldsTensor, Picture: NotPicture,
		Go: reflect.TypeFor[*tensor.Tensor](), Returns: "Tensor"},
	{Kind: ArtifactText, Const: "ArtifactText", Holds: HoldsText, Picture: NotPicture,
		Go: reflect.TypeFor[string](), Returns: "str"},
	{Kind: ArtifactJSON, Const: "ArtifactJSON", Holds: HoldsJSON, Picture: NotPicture,
		Go: reflect.TypeFor[json.RawMessage](), Returns: "str holding JSON, or a dict, list or scalar without tensors"},
	{Kind: ArtifactTensorList, Const: "ArtifactTensorList", Holds: HoldsTensorList, Picture: NotPicture,
		Go: reflect.TypeFor[[]*tensor.Tensor](), Returns: "List[Tensor]"},
	{Kind: ArtifactRecord, Const: "ArtifactRecord", Holds: HoldsRecord, Picture: NotPicture,
		Go: reflect.TypeFor[*tensor.Tensor](), Returns: "Dict[str, Tensor] with the fields' keys"},
	{Kind: ArtifactRecordList, Const: "ArtifactRecordList", Holds: HoldsRecordList, Picture: NotPicture,
		Go: reflect.TypeFor[*tensor.Tensor](), Returns: "List[Dict[str, Tensor]], each dict with the fields' keys"},
}

// artifactRows indexes artifactTable by kind.
var artifactRows = indexRows(artifactTable[:], func(r *ArtifactInfo) ArtifactKind { return r.Kind })

// ArtifactKinds lists every artifact kind in documentation order (the
// artifact kind table's).
var ArtifactKinds = rowKeys(artifactTable[:], func(r *ArtifactInfo) ArtifactKind { return r.Kind })

// Info returns k's row of the artifact kind table; ok is false for a kind
// that is not valid.
func (k ArtifactKind) Info() (info ArtifactInfo, ok bool) {
	if r := artifactRows[k]; r != nil {
		return *r, true
	}
	return ArtifactInfo{}, false
}

// Valid reports whether k is one of the artifact kinds.
func (k ArtifactKind) Valid() bool { return artifactRows[k] != nil }

// Holds says what an artifact of kind k is; none (0) for a kind that is
// not valid.
func (k ArtifactKind) Holds() Holds {
	if r := artifactRows[k]; r != nil {
		return r.Holds
	}
	return 0
}

// Picture says whether artifacts of kind k are pictures, and which; none
// (0) for a kind that is not valid.
func (k ArtifactKind) Picture() Picture {
	if r := artifactRows[k]; r != nil {
		return r.Picture
	}
	return 0
}

// IsPicture reports whether artifacts of kind k are pictures (image,
// video): only these may declare an image spec.
func (k ArtifactKind) IsPicture() bool { return k.Picture() > NotPicture }

// TensorLike reports whether artifacts of k are tensors (video, image,
// embedding, tensor) or a list of them (tensor_list, each element of
// which a dtype and shape describe); only these may declare a dtype and a
// shape, and only video and image an image spec.
func (k ArtifactKind) TensorLike() bool {
	h := k.Holds()
	return h == HoldsTensor || h == HoldsTensorList
}

// FieldKind returns the field kind whose values are what an artifact of
// kind k holds when that is a picture (image → image, video → video);
// ok is false for other kinds.
func (k ArtifactKind) FieldKind() (kind Kind, ok bool) {
	p := k.Picture()
	if p <= NotPicture {
		return "", false
	}
	for i := range kindTable {
		if kindTable[i].Picture == p {
			return kindTable[i].Kind, true
		}
	}
	return "", false
}

// Presence says whether a caller must give a field's value.
type Presence int

// The presences of a field.
const (
	// Required fields must be given: required and without default.
	Required Presence = iota
	// Defaulted fields have a manifest default the caller may override.
	Defaulted
	// Optional fields may be left unset (not required, no default): the
	// model then decides.
	Optional
)

// String names the presence: "required", "defaulted" or "optional".
func (p Presence) String() string {
	switch p {
	case Required:
		return "required"
	case Defaulted:
		return "defaulted"
	}
	return "optional"
}

// Presence returns whether a caller must give the field: a default makes a
// field Defaulted whatever its required flag says; a required field
// without default is Required; any other is Optional.
func (f *InferenceFieldSpec) Presence() Presence {
	switch {
	case f.Default != nil:
		return Defaulted
	case f.Required:
		return Required
	}
	return Optional
}

// FieldKindList names every field kind, joined with ", ", for messages.
func FieldKindList() string { return joinKinds(FieldKinds) }

// ArtifactKindList names every artifact kind, joined with ", ", for messages.
func ArtifactKindList() string { return joinKinds(ArtifactKinds) }

func joinKinds[K ~string](ks []K) string {
	var b []byte
	for i, k := range ks {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, k...)
	}
	return string(b)
}
