package spec

// Kind is the value type of an input field (InferenceFieldSpec.Kind). Its
// methods answer the questions every layer asks about a kind — is it a
// list, what are its items, does it carry tensor data, which constraints
// apply, how is it passed to TorchScript — so that no package keeps a kind
// table of its own.
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
)

// FieldKinds lists every field kind in documentation order.
var FieldKinds = []Kind{
	KindString, KindInt, KindFloat, KindBool, KindTensor, KindImage, KindVideo,
	KindStringList, KindIntList, KindFloatList, KindBoolList, KindTensorList,
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
func (k Kind) Valid() bool {
	switch k.Effective() {
	case KindString, KindInt, KindFloat, KindBool, KindTensor, KindImage, KindVideo,
		KindStringList, KindIntList, KindFloatList, KindBoolList, KindTensorList:
		return true
	}
	return false
}

// IsList reports whether values of k are lists.
func (k Kind) IsList() bool {
	switch k {
	case KindStringList, KindIntList, KindFloatList, KindBoolList, KindTensorList:
		return true
	}
	return false
}

// Elem returns the kind of one value: the item kind of a list kind, k
// itself otherwise.
func (k Kind) Elem() Kind {
	switch k {
	case KindStringList:
		return KindString
	case KindIntList:
		return KindInt
	case KindFloatList:
		return KindFloat
	case KindBoolList:
		return KindBool
	case KindTensorList:
		return KindTensor
	}
	return k.Effective()
}

// TensorLike reports whether values of k carry tensor data (tensor, image,
// video, tensor_list). Such values exist only at call time: they have no
// default.
func (k Kind) TensorLike() bool {
	switch k {
	case KindTensor, KindImage, KindVideo, KindTensorList:
		return true
	}
	return false
}

// Numeric reports whether k's values (or items) are numbers.
func (k Kind) Numeric() bool { e := k.Elem(); return e == KindInt || e == KindFloat }

// Integer reports whether k's values (or items) are integers.
func (k Kind) Integer() bool { return k.Elem() == KindInt }

// Textual reports whether k's values (or items) are strings.
func (k Kind) Textual() bool { return k.Elem() == KindString }

// Phrase names the kind for messages: "an int", "a list of strings".
func (k Kind) Phrase() string {
	switch k {
	case KindInt:
		return "an int"
	case KindImage:
		return "an image"
	case KindStringList:
		return "a list of strings"
	case KindIntList:
		return "a list of ints"
	case KindFloatList:
		return "a list of floats"
	case KindBoolList:
		return "a list of bools"
	case KindTensorList:
		return "a list of tensors"
	}
	return "a " + string(k.Effective())
}

// TorchScriptType is the TorchScript type a value of k is passed as
// ("int", "List[str]", "Tensor" for images and videos), or "" for a kind
// that is not valid.
func (k Kind) TorchScriptType() string {
	var base string
	switch k.Elem() {
	case KindString:
		base = "str"
	case KindInt:
		base = "int"
	case KindFloat:
		base = "float"
	case KindBool:
		base = "bool"
	case KindTensor, KindImage, KindVideo:
		base = "Tensor"
	default:
		return ""
	}
	if k.IsList() {
		return "List[" + base + "]"
	}
	return base
}

// Allows reports whether constraint c applies to fields of kind k.
func (k Kind) Allows(c Constraint) bool {
	switch c {
	case ConstraintMinimum, ConstraintMaximum:
		return k.Numeric()
	case ConstraintMultipleOf, ConstraintRemainder:
		return k.Integer()
	case ConstraintMinLength, ConstraintMaxLength:
		return k.Effective() == KindString || k.IsList()
	case ConstraintPattern, ConstraintChoices:
		return k.Textual()
	case ConstraintDType, ConstraintShape:
		return k.TensorLike()
	case ConstraintImage:
		return k == KindImage || k == KindVideo
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
)

// ArtifactKinds lists every artifact kind in documentation order.
var ArtifactKinds = []ArtifactKind{ArtifactVideo, ArtifactImage, ArtifactEmbedding, ArtifactTensor, ArtifactText, ArtifactJSON, ArtifactTensorList}

// Valid reports whether k is one of the artifact kinds.
func (k ArtifactKind) Valid() bool {
	switch k {
	case ArtifactVideo, ArtifactImage, ArtifactEmbedding, ArtifactTensor, ArtifactText, ArtifactJSON, ArtifactTensorList:
		return true
	}
	return false
}

// TensorLike reports whether artifacts of k are tensors (video, image,
// embedding, tensor) or a list of them (tensor_list, each element of
// which a dtype and shape describe); only these may declare a dtype and a
// shape, and only video and image an image spec.
func (k ArtifactKind) TensorLike() bool {
	switch k {
	case ArtifactVideo, ArtifactImage, ArtifactEmbedding, ArtifactTensor, ArtifactTensorList:
		return true
	}
	return false
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
