// Package spec holds the model inference spec types — the types a manifest
// is decoded into, which generated packages and the runtime share — with
// their kinds, shapes, realtime cadence, batching and warm-up settings, the
// spec registry and the problems a spec can have. It never links cgo: a
// process that only needs specs, params or validation stays cheap.
//
// The seed's defaults hold for a spec written in Go as for a decoded one
// (see DefaultID).
package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Field targets accepted by InferenceFieldSpec.Target.
const (
	TargetCallKwargs = "call_kwargs"
	TargetLoadKwargs = "load_kwargs"
)

// DefaultMethod is the TorchScript method a task runs when it names none.
const DefaultMethod = "forward"

// DefaultRealtimeControls are the controls a RealtimeSpec accepts when a
// manifest or payload names none.
var DefaultRealtimeControls = []string{"forward", "backward", "left", "right", "turn_left", "turn_right"}

// InferenceCheckpointRef is a checkpoint reference used by a concrete
// inference variant.
type InferenceCheckpointRef struct {
	// Role of the checkpoint; the TorchScript module a task runs has role "model".
	Role string `json:"role" jsonschema:"required,minLength=1"`
	// URI of the checkpoint. A relative path is resolved against the manifest's
	// folder, then against the checkpoint root.
	URI string `json:"uri" jsonschema:"required,minLength=1,example=checkpoints/model.pt"`
	// Required says whether the variant cannot run without this checkpoint.
	Required bool `json:"required" jsonschema:"default=true"`
	// Status of the checkpoint, for example "available", "unavailable" or "unknown".
	Status string `json:"status" jsonschema:"default=unknown"`
	// SHA256 is the lower-case hex digest of the file, checked before loading.
	SHA256 string `json:"sha256,omitempty" jsonschema:"pattern=^[0-9a-f]{64}$"`
	// SizeBytes is the file size, checked before loading.
	SizeBytes int64 `json:"size_bytes,omitempty" jsonschema:"minimum=0"`
	// Format is how the file is run: "torchscript" (a TorchScript archive,
	// torch.jit.save) or "aotinductor" (an AOTInductor package, .pt2, which
	// needs an engine built against libtorch 2.6 or later). Without it the
	// format is recognised from the file; when given, a file of the other
	// format fails the load.
	Format CheckpointFormat `json:"format,omitempty" jsonschema:"enum=torchscript,enum=aotinductor"`
}

// UnmarshalJSON decodes a checkpoint reference, applying the seed's defaults
// (required true, status "unknown") to absent keys.
func (c *InferenceCheckpointRef) UnmarshalJSON(b []byte) error {
	type plain InferenceCheckpointRef
	p := plain{Required: true, Status: StatusUnknown}
	if err := json.Unmarshal(b, &p); err != nil {
		return decodeError[InferenceCheckpointRef, plain](err)
	}
	*c = InferenceCheckpointRef(p)
	return nil
}

// decodeError makes a decoding error of plain, the local copy of spec type
// T that T's UnmarshalJSON decodes into, name T. encoding/json names the
// struct it was decoding when the error happened (the copy, or a struct
// nested in it) followed by the path of the field from the decoded value;
// the path starts at T, so T is the name to give.
func decodeError[T, plain any](err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Struct != "" || te.Field != "" {
		te.Struct = reflect.TypeFor[T]().Name()
	}
	if te.Type == reflect.TypeFor[plain]() {
		te.Type = reflect.TypeFor[T]()
	}
	return err
}

// InferenceFieldSpec is the user-facing input field contract for one
// inference task profile.
type InferenceFieldSpec struct {
	// FieldID is the keyword-argument name and the JSON key of the field.
	FieldID string `json:"field_id" jsonschema:"required,minLength=1,pattern=^[A-Za-z_][A-Za-z0-9_]*$,example=num_frames"`
	// Label is a short human-readable name.
	Label string `json:"label"`
	// Kind is the value type of the field.
	Kind Kind `json:"kind" jsonschema:"default=string"`
	// Target says which keyword arguments receive the field.
	Target string `json:"target" jsonschema:"enum=call_kwargs,enum=load_kwargs,default=call_kwargs"`
	// Required fields must be given by the caller unless they have a default.
	Required bool `json:"required"`
	// Default is the value used when the caller gives none; it must match Kind
	// and every constraint.
	Default any `json:"default"`
	// Choices, when non-empty, are the only values the field accepts (an enum).
	Choices []string `json:"choices"`
	// Description is free text for documentation.
	Description string `json:"description"`

	// Minimum is the smallest accepted number (int and float kinds, and list items).
	Minimum *Number `json:"minimum,omitempty"`
	// Maximum is the largest accepted number (int and float kinds, and list items).
	Maximum *Number `json:"maximum,omitempty"`
	// MultipleOf requires (value - Remainder) to be a multiple of it (int kind).
	MultipleOf *int64 `json:"multiple_of,omitempty" jsonschema:"minimum=1"`
	// Remainder is the offset for MultipleOf: 1 with multiple_of 4 means 4k+1.
	Remainder int64 `json:"remainder,omitempty" jsonschema:"minimum=0"`
	// MinLength is the shortest accepted string or list.
	MinLength *int `json:"min_length,omitempty" jsonschema:"minimum=0"`
	// MaxLength is the longest accepted string or list.
	MaxLength *int `json:"max_length,omitempty" jsonschema:"minimum=0"`
	// Pattern is an RE2 regular expression a string value must match.
	Pattern string `json:"pattern,omitempty"`
	// DType is the element type a tensor-like value must have (tensor,
	// image, video and tensor_list fields).
	DType tensor.DType `json:"dtype,omitempty" jsonschema:"enum=float32,enum=float16,enum=bfloat16,enum=int64,enum=int32,enum=uint8,enum=bool"`
	// Shape is the shape a tensor-like value must have: fixed sizes,
	// named dimensions bound once per call across the task's fields
	// ([N, 3, H, W]) and "*" for any size. In a batchable task whose
	// batching names its dimension, the shape starts with it and each item
	// has the rest.
	Shape Shape `json:"shape,omitempty"`
	// Image says how a picture becomes the tensor of an image or video field.
	Image *ImageSpec `json:"image,omitempty"`
	// Fields are the parts of a tensor_dict field (the dict's keys) or a
	// tensor_tuple field (the tuple's elements, in order), one tensor each:
	// the generated struct has a field per part, in this order. Only these
	// kinds have fields, and they have at least one (see
	// InferenceFieldSpec.PartProblems).
	Fields []ArtifactFieldSpec `json:"fields,omitempty"`
	// Deprecated, when non-empty, marks the field deprecated with this message.
	Deprecated string `json:"deprecated,omitempty"`
	// GoName overrides the Go identifier wfgen derives from FieldID.
	GoName string `json:"go_name,omitempty" jsonschema:"pattern=^[A-Z][A-Za-z0-9]*$"`
}

// UnmarshalJSON decodes a field, applying the seed's defaults (kind "string",
// target "call_kwargs") to absent keys.
func (f *InferenceFieldSpec) UnmarshalJSON(b []byte) error {
	type plain InferenceFieldSpec
	p := plain{Kind: KindString, Target: TargetCallKwargs}
	if err := json.Unmarshal(b, &p); err != nil {
		return decodeError[InferenceFieldSpec, plain](err)
	}
	*f = InferenceFieldSpec(p)
	return nil
}

// InferenceArtifactSpec is an output artifact contract emitted by an inference
// task profile.
type InferenceArtifactSpec struct {
	// ArtifactID names the artifact; a method returning a dict keys it by this id.
	ArtifactID string `json:"artifact_id" jsonschema:"required,minLength=1,example=video"`
	// Kind is the artifact type.
	Kind ArtifactKind `json:"kind" jsonschema:"required"`
	// Required artifacts must be present in every result.
	Required bool `json:"required"`
	// Preview artifacts get a cheap preview (the first frame of a video).
	Preview bool `json:"preview"`
	// Description is free text for documentation.
	Description string `json:"description"`
	// DType is the element type a tensor-like artifact must have.
	DType tensor.DType `json:"dtype,omitempty" jsonschema:"enum=float32,enum=float16,enum=bfloat16,enum=int64,enum=int32,enum=uint8,enum=bool"`
	// Shape is the shape a tensor-like artifact must have (see the field's
	// shape).
	Shape Shape `json:"shape,omitempty"`
	// Image says how an image or video artifact becomes a picture.
	Image *ImageSpec `json:"image,omitempty"`
	// GoName overrides the Go identifier wfgen derives from ArtifactID.
	GoName string `json:"go_name,omitempty" jsonschema:"pattern=^[A-Z][A-Za-z0-9]*$"`
	// FPS is the playback rate of a video artifact, in frames per second
	// (video kind only). Without it the family's realtime fps applies, else
	// 16 (DefaultVideoFPS; the rule is ModelInferenceSpec.VideoFPS).
	FPS int `json:"fps,omitempty" jsonschema:"minimum=1"`
	// Position, for a method that returns a tuple, is the 0-based index of
	// the tuple element that is this artifact. Either every artifact of a
	// task has one or none has; without, artifact i is element i (the rule
	// is InferenceTaskProfile.ArtifactPositions).
	Position *int `json:"position,omitempty" jsonschema:"minimum=0"`
	// Fields are the keys of the dict a record artifact is (or of each
	// dict of a record_list), one tensor each: the generated struct has a
	// field per key, in this order. Keys the model returns beyond them are
	// ignored. Only record and record_list artifacts have fields, and they
	// have at least one.
	Fields []ArtifactFieldSpec `json:"fields,omitempty"`
}

// ArtifactFieldSpec is one key of a record artifact's dict, or one part of
// a tensor_dict or tensor_tuple input field (a dict's key, a tuple's
// element): a tensor, held in a field of the struct generated for the
// artifact or the input field.
type ArtifactFieldSpec struct {
	// Name is the dict's key (a tuple element's name, for its Go field).
	Name string `json:"name" jsonschema:"required,minLength=1,example=boxes"`
	// Required keys must be in every dict the model returns; a missing
	// optional key leaves its struct field nil. Of an input field's parts,
	// required ones must be given; a tuple's elements all are.
	Required bool `json:"required"`
	// Description is free text for documentation.
	Description string `json:"description,omitempty"`
	// DType is the element type the key's tensor must have.
	DType tensor.DType `json:"dtype,omitempty" jsonschema:"enum=float32,enum=float16,enum=bfloat16,enum=int64,enum=int32,enum=uint8,enum=bool"`
	// Shape is the shape the key's tensor must have (see the field's
	// shape). In a record_list, a named dimension first bound inside one
	// dict is bound for that dict only (each image has its own number of
	// detections).
	Shape Shape `json:"shape,omitempty"`
	// GoName overrides the Go identifier wfgen derives from Name.
	GoName string `json:"go_name,omitempty" jsonschema:"pattern=^[A-Z][A-Za-z0-9]*$"`
}

// DefaultVideoFPS is the playback rate of a video artifact when neither the
// artifact (fps) nor the family (realtime.fps) gives one. It is the realtime
// block's default fps.
const DefaultVideoFPS = 16

// VideoFPS returns the playback rate of video artifact a of the family: the
// artifact's fps when set, else the family's realtime fps, else
// DefaultVideoFPS. Generated code passes it to AsVideo, so a written GIF
// plays at the rate the manifest declares.
func (s *ModelInferenceSpec) VideoFPS(a *InferenceArtifactSpec) int {
	switch {
	case a != nil && a.FPS > 0:
		return a.FPS
	case s != nil && s.Realtime != nil && s.Realtime.FPS > 0:
		return s.Realtime.FPS
	}
	return DefaultVideoFPS
}

// FPSProblems checks the artifact's fps: only a video artifact has one, and
// it is at least 1 (the schema says so for manifests; a spec built in Go
// may not). Paths are relative to the artifact.
func (a *InferenceArtifactSpec) FPSProblems() []Problem {
	switch {
	case a.FPS != 0 && a.Kind.Picture() != PictureVideo:
		return []Problem{{Path: "fps", Key: true, Message: fmt.Sprintf("fps is the playback rate of a video artifact, and this artifact's kind is %s: remove fps", a.Kind)}}
	case a.FPS < 0:
		return []Problem{{Path: "fps", Message: fmt.Sprintf("fps %d must be at least 1", a.FPS)}}
	}
	return nil
}

// BatchingSpec configures batched execution of a task whose inputs are
// independent per item.
type BatchingSpec struct {
	// MaxBatchSize bounds the items sent to one forward call.
	MaxBatchSize int `json:"max_batch_size" jsonschema:"required,minimum=1"`
	// PadToBatchSizes are static batch sizes; a short batch is padded to the
	// next one by repeating its final item, and the padded outputs are dropped.
	PadToBatchSizes []int `json:"pad_to_batch_sizes,omitempty"`
	// Dim names the batch dimension: the first dimension of the declared
	// shapes of the stacked inputs and of the tensor-like outputs. Each
	// item's tensors have the rest of the shape, and a single call of the
	// task runs as a batch of one.
	Dim string `json:"dim,omitempty" jsonschema:"pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Invariant makes every forward call give the bits of the largest
	// batch size (max_batch_size): a short batch is padded up to the
	// smallest size measured to give those bits (the max itself when no
	// other does), so an item's output never depends on how many items it
	// was batched with. libtorch on the CPU gives an item the same bits at
	// one batch size whatever its neighbours, but other sizes may take
	// other kernels (a batch of one often does); see docs/batching.md for
	// the measurement and what it costs.
	Invariant bool `json:"invariant,omitempty"`
	// ScaleToMemory makes max_batch_size the batch size for about 24 GiB of
	// free memory, scaled when the model loads to the device's free memory
	// (a GPU's: a quarter at 8 GiB, three times at 80 GB; the CPU's
	// available memory, never above it) unless WORLDFOUNDRY_BATCH_SIZE_<TASK>
	// or WORLDFOUNDRY_BATCH_SIZE sets it; pad sizes above the result give
	// way to it (docs/batching.md, "Batch size from free memory").
	ScaleToMemory bool `json:"scale_to_memory,omitempty"`
}

// SessionBatchingSpec batches the steps of a streaming task's sessions.
// The task's method is then called with one row per session: controls a
// float32 tensor [B, C] (C controls in the realtime spec's order), state a
// tensor [B, ...] stacked from each session's last state (left out while
// the sessions have none), each tensor, image or video field stacked, and
// returns its video artifact [B, T, H, W, C] and "state" [B, ...]. Batches
// are invariant (BatchingSpec.Invariant): a session's frames never depend
// on how many sessions share its call, so they equal playing alone.
type SessionBatchingSpec struct {
	// MaxBatchSize bounds the sessions whose steps share one call.
	MaxBatchSize int `json:"max_batch_size" jsonschema:"required,minimum=1"`
}

// InferenceTaskProfile is a runnable inference task profile for a model
// family or variant.
type InferenceTaskProfile struct {
	// TaskID names the task.
	TaskID string `json:"task_id" jsonschema:"required,minLength=1,example=text-to-video"`
	// Label is a short human-readable name.
	Label string `json:"label"`
	// Inputs are the task's typed input fields, in call order.
	Inputs []InferenceFieldSpec `json:"inputs"`
	// Outputs are the artifacts the task produces.
	Outputs []InferenceArtifactSpec `json:"outputs" jsonschema:"minItems=1"`
	// Description is free text for documentation.
	Description string `json:"description"`
	// DefaultCallKwargs are merged under the caller's params for every call.
	DefaultCallKwargs map[string]any `json:"default_call_kwargs"`
	// Aliases are other ids that select this task.
	Aliases []string `json:"aliases"`

	// Method is the TorchScript method the task runs (default "forward").
	Method string `json:"method,omitempty" jsonschema:"default=forward,pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Batching, when set, makes the task batchable.
	Batching *BatchingSpec `json:"batching,omitempty"`
	// SessionBatching, on a streaming task, runs the steps of all its
	// sessions that are due at once as one call of the task's method, whose
	// arguments are then stacked: one row per session (docs/streaming.md,
	// "Batching sessions").
	SessionBatching *SessionBatchingSpec `json:"session_batching,omitempty"`
	// OpenAI, when set, serves the task as OpenAI's embeddings API too
	// (wfserve's POST /v1/embeddings and GET /v1/models): its result is
	// its one embedding artifact, its input the field OpenAI.Input names.
	OpenAI *OpenAISpec `json:"openai,omitempty"`
	// Dims constrains the named dimensions of the task's shapes.
	Dims map[string]DimSpec `json:"dims,omitempty"`
	// Stream marks a task that produces a realtime stream of chunks.
	Stream bool `json:"stream,omitempty"`
	// Warmup, when set, asks for the task to be run on made-up inputs as
	// soon as the model is loaded (runtime/client's Warmup), at each batch
	// size the batch executor sends, so that no request pays for a first
	// call. `warmup: {}` takes every default.
	Warmup *WarmupSpec `json:"warmup,omitempty"`
	// Deprecated, when non-empty, marks the task deprecated with this message.
	Deprecated string `json:"deprecated,omitempty"`
	// GoName overrides the Go identifier wfgen derives from TaskID.
	GoName string `json:"go_name,omitempty" jsonschema:"pattern=^[A-Z][A-Za-z0-9]*$"`
}

// MethodName returns the TorchScript method the task runs.
func (t *InferenceTaskProfile) MethodName() string {
	if t.Method == "" {
		return DefaultMethod
	}
	return t.Method
}

// Field returns the input field with the given id.
func (t *InferenceTaskProfile) Field(id string) (*InferenceFieldSpec, bool) {
	for i := range t.Inputs {
		if t.Inputs[i].FieldID == id {
			return &t.Inputs[i], true
		}
	}
	return nil, false
}

// Artifact returns the output artifact with the given id.
func (t *InferenceTaskProfile) Artifact(id string) (*InferenceArtifactSpec, bool) {
	for i := range t.Outputs {
		if t.Outputs[i].ArtifactID == id {
			return &t.Outputs[i], true
		}
	}
	return nil, false
}

// InferenceVariantSpec is a concrete checkpoint/runtime variant under a model
// family.
type InferenceVariantSpec struct {
	// VariantID names the variant.
	VariantID string `json:"variant_id" jsonschema:"required,minLength=1,example=default"`
	// Label is a short human-readable name.
	Label string `json:"label"`
	// Checkpoints the variant loads; the one with role "model" is the TorchScript file.
	Checkpoints []InferenceCheckpointRef `json:"checkpoints"`
	// Status of the variant, for example "available" or "unknown".
	Status string `json:"status" jsonschema:"default=unknown"`
	// LoadKwargs are passed when the variant's module is loaded.
	LoadKwargs map[string]any `json:"load_kwargs"`
	// CallKwargs are merged under every call's kwargs.
	CallKwargs map[string]any `json:"call_kwargs"`
	// Aliases are other ids that select this variant.
	Aliases []string `json:"aliases"`
	// Notes are free-text remarks.
	Notes []string `json:"notes"`

	// Compile asks for the variant's module to be compiled when loaded
	// (frozen and fused, cached on disk); without it the
	// WORLDFOUNDRY_TORCH_COMPILE* variables decide.
	Compile *CompileSpec `json:"compile,omitempty"`
	// OpLibraries, when set (an empty list included), replace the family's
	// op_libraries for this variant: shared libraries of TorchScript custom
	// ops loaded before its checkpoint.
	OpLibraries []string `json:"op_libraries,omitzero" jsonschema:"example=ops/libmy_ops.so"`
	// Deprecated, when non-empty, marks the variant deprecated with this message.
	Deprecated string `json:"deprecated,omitempty"`
	// GoName overrides the Go identifier wfgen derives from VariantID.
	GoName string `json:"go_name,omitempty" jsonschema:"pattern=^[A-Z][A-Za-z0-9]*$"`
}

// UnmarshalJSON decodes a variant, applying the seed's default status.
func (v *InferenceVariantSpec) UnmarshalJSON(b []byte) error {
	type plain InferenceVariantSpec
	p := plain{Status: StatusUnknown}
	if err := json.Unmarshal(b, &p); err != nil {
		return decodeError[InferenceVariantSpec, plain](err)
	}
	*v = InferenceVariantSpec(p)
	return nil
}

// PrimaryCheckpointURI returns the URI of the "model" checkpoint, or of the
// first checkpoint when none has that role, or "".
func (v *InferenceVariantSpec) PrimaryCheckpointURI() string {
	for _, c := range v.Checkpoints {
		if c.Role == "model" {
			return c.URI
		}
	}
	if len(v.Checkpoints) > 0 {
		return v.Checkpoints[0].URI
	}
	return ""
}

// CheckpointMap maps each checkpoint role to its URI.
func (v *InferenceVariantSpec) CheckpointMap() map[string]string {
	m := make(map[string]string, len(v.Checkpoints))
	for _, c := range v.Checkpoints {
		m[c.Role] = c.URI
	}
	return m
}

// ModelInferenceSpec is the inference contract of one model family, shared by
// manifests, generated packages and the runtime.
type ModelInferenceSpec struct {
	// ModelFamilyID names the family; lower-case words joined by '-' or '_'.
	ModelFamilyID string `json:"model_family_id" jsonschema:"required,minLength=1,pattern=^[a-z0-9]+(?:[-_][a-z0-9]+)*$,example=my-world-model"`
	// DisplayName is the human-readable family name.
	DisplayName string `json:"display_name"`
	// Variants are the family's concrete checkpoints, in order.
	Variants []InferenceVariantSpec `json:"variants" jsonschema:"required,minItems=1"`
	// Tasks are the family's runnable task profiles, in order.
	Tasks []InferenceTaskProfile `json:"tasks" jsonschema:"required,minItems=1"`
	// DefaultVariantID selects the variant used when a caller names none.
	DefaultVariantID string `json:"default_variant_id" jsonschema:"default=default"`
	// DefaultTaskID selects the task used when a caller names none.
	DefaultTaskID string `json:"default_task_id" jsonschema:"default=default"`
	// Aliases are other ids that select this family.
	Aliases []string `json:"aliases"`
	// Notes are free-text remarks.
	Notes []string `json:"notes"`

	// Description is free text for documentation.
	Description string `json:"description,omitempty"`
	// WorkloadType is a free-form workload label such as "video" or "embedding".
	WorkloadType string `json:"workload_type,omitempty"`
	// SupportsStream says whether the family has realtime streaming tasks.
	SupportsStream bool `json:"supports_stream,omitempty"`
	// Realtime is the family's playback and generation cadence.
	Realtime *RealtimeSpec `json:"realtime,omitempty"`
	// Deprecated, when non-empty, marks the family deprecated with this message.
	Deprecated string `json:"deprecated,omitempty"`
	// GoPackage overrides the Go package name wfgen derives from ModelFamilyID.
	GoPackage string `json:"go_package,omitempty" jsonschema:"pattern=^[a-z][a-z0-9]*$,example=myworldmodel"`
	// OpLibraries are shared libraries of TorchScript custom ops (such as
	// torchvision's nms) that the engine loads, once per process, before
	// a variant's checkpoint. A relative path is resolved against the
	// manifest's folder, then against the checkpoint root, as a checkpoint
	// uri is. A variant's op_libraries replace these (the rule is
	// ModelInferenceSpec.OpLibrariesFor).
	OpLibraries []string `json:"op_libraries,omitempty" jsonschema:"example=/usr/lib/python3/dist-packages/torchvision/_C.cpython-311-x86_64-linux-gnu.so"`
	// DefaultPriority is the priority level wfserve gives the family's
	// infer requests that name none (Triton's request parameter
	// "priority": 1 is served first, larger levels later); 0 or absent:
	// the server's -default-priority.
	DefaultPriority int `json:"default_priority,omitempty" jsonschema:"minimum=1,maximum=1048576,example=1"`
	// VersionPolicy is how wfserve treats the family's checkpoints
	// changing while it serves (Triton's version_policy): pinned, or the
	// latest N revisions side by side; absent: a changed checkpoint is
	// reloaded and the old revision freed.
	VersionPolicy *VersionPolicySpec `json:"version_policy,omitempty"`
}

// MaxLatestVersions bounds VersionPolicySpec.Latest: each revision kept
// holds a loaded module.
const MaxLatestVersions = 16

// VersionPolicySpec is a family's version policy (ModelInferenceSpec.VersionPolicy).
// Pinned and Latest exclude each other.
type VersionPolicySpec struct {
	// Pinned, when true, keeps the revisions wfserve loaded: in poll mode a
	// changed checkpoint is logged and listed in the repository index, not
	// loaded (an explicit load, or a restart, loads it).
	Pinned bool `json:"pinned,omitempty" jsonschema:"example=true"`
	// Latest, when set, keeps the latest N revisions of each variant
	// loaded side by side: a reload adds the new revision and retires
	// (drains, then frees) those beyond N. A request naming VARIANT@N
	// (the path's version, gRPC's model_version) runs on that revision; a
	// request naming the variant, or none, on the newest. 1 is a reload's
	// default: the old revision is retired at once.
	Latest int `json:"latest,omitempty" jsonschema:"minimum=1,maximum=16,example=2"`
}

// Keep is how many revisions of a variant the policy keeps loaded: its
// Latest, else 1.
func (p *VersionPolicySpec) Keep() int {
	if p == nil || p.Latest < 1 {
		return 1
	}
	return p.Latest
}

// OpLibrariesFor returns the op libraries variant v of the family loads
// before its checkpoint: the variant's op_libraries when it sets the key
// (an empty list turns the family's off), else the family's.
func (s *ModelInferenceSpec) OpLibrariesFor(v *InferenceVariantSpec) []string {
	if v != nil && v.OpLibraries != nil {
		return v.OpLibraries
	}
	if s == nil {
		return nil
	}
	return s.OpLibraries
}

// OpLibraryProblems checks a list of op libraries (a family's or a
// variant's op_libraries): every entry is a non-empty local path (nothing
// is downloaded: a URI scheme other than file:// is refused) and no entry
// repeats another. Paths are the entries' indexes.
func OpLibraryProblems(libs []string) []Problem {
	var ps []Problem
	seen := map[string]int{}
	for i, l := range libs {
		at := strconv.Itoa(i)
		if strings.TrimSpace(l) == "" {
			ps = append(ps, Problem{Path: at, Message: "an op library path is empty; give the path of a shared library of TorchScript custom ops"})
			continue
		}
		if scheme, _, ok := strings.Cut(l, "://"); ok && scheme != "file" {
			ps = append(ps, Problem{Path: at, Message: fmt.Sprintf("op library %q: a %s:// URI is not fetched; download the library and give its path", l, scheme)})
			continue
		}
		if first, dup := seen[l]; dup {
			ps = append(ps, Problem{Path: at, Message: fmt.Sprintf("op library %q is listed twice (first at index %d)", l, first)})
			continue
		}
		seen[l] = i
	}
	return ps
}

// UnmarshalJSON decodes a spec, applying the seed's default variant and task ids.
func (s *ModelInferenceSpec) UnmarshalJSON(b []byte) error {
	type plain ModelInferenceSpec
	p := plain{DefaultVariantID: DefaultID, DefaultTaskID: DefaultID}
	if err := json.Unmarshal(b, &p); err != nil {
		return decodeError[ModelInferenceSpec, plain](err)
	}
	*s = ModelInferenceSpec(p)
	return nil
}

// Variant returns the variant with the given id or alias; "" selects the
// default variant. An unknown id is an error naming the known ones.
func (s *ModelInferenceSpec) Variant(id string) (*InferenceVariantSpec, error) {
	if id == "" {
		id = s.DefaultVariant()
	}
	for i := range s.Variants {
		if s.Variants[i].VariantID == id {
			return &s.Variants[i], nil
		}
	}
	for i := range s.Variants {
		if slices.Contains(s.Variants[i].Aliases, id) {
			return &s.Variants[i], nil
		}
	}
	ids := make([]string, len(s.Variants))
	for i, v := range s.Variants {
		ids[i] = v.VariantID
	}
	return nil, fmt.Errorf("%w: family %q has no variant %q (known: %s)", ErrUnknownID, s.ModelFamilyID, id, strings.Join(ids, ", "))
}

// Task returns the task with the given id or alias; "" selects the default
// task. An unknown id is an error naming the known ones.
func (s *ModelInferenceSpec) Task(id string) (*InferenceTaskProfile, error) {
	if id == "" {
		id = s.DefaultTask()
	}
	for i := range s.Tasks {
		if s.Tasks[i].TaskID == id {
			return &s.Tasks[i], nil
		}
	}
	for i := range s.Tasks {
		if slices.Contains(s.Tasks[i].Aliases, id) {
			return &s.Tasks[i], nil
		}
	}
	ids := make([]string, len(s.Tasks))
	for i, t := range s.Tasks {
		ids[i] = t.TaskID
	}
	return nil, fmt.Errorf("%w: family %q has no task %q (known: %s)", ErrUnknownID, s.ModelFamilyID, id, strings.Join(ids, ", "))
}

// ToDict returns the spec's JSON form with the seed's keys (to_dict),
// variants and tasks included.
func (s *ModelInferenceSpec) ToDict() (map[string]any, error) { return toDict(s) }

// ToDict returns the variant's JSON form with the seed's keys (to_dict),
// checkpoints included.
func (v *InferenceVariantSpec) ToDict() (map[string]any, error) { return toDict(v) }

// ToDict returns the task's JSON form with the seed's keys (to_dict),
// input fields and output artifacts included.
func (t *InferenceTaskProfile) ToDict() (map[string]any, error) { return toDict(t) }

// ToDict returns the field's JSON form with the seed's keys (to_dict).
func (f *InferenceFieldSpec) ToDict() (map[string]any, error) { return toDict(f) }

// ToDict returns the artifact's JSON form with the seed's keys (to_dict).
func (a *InferenceArtifactSpec) ToDict() (map[string]any, error) { return toDict(a) }

// ToDict returns the checkpoint reference's JSON form with the seed's keys
// (to_dict).
func (c *InferenceCheckpointRef) ToDict() (map[string]any, error) { return toDict(c) }

// toDict is the one to_dict mechanism of the spec types: v's JSON form,
// decoded into a map, with the seed's empty lists and maps given as [] and
// {} rather than null. A spec's dict therefore holds exactly the dicts its
// parts' ToDict give.
func toDict(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	emptyNotNull(m)
	return m, nil
}

// seedLists and seedMaps are the seed's keys whose empty value to_dict gives
// as [] and {} (Go's JSON gives null for a nil slice or map).
var (
	seedLists = map[string]bool{"variants": true, "tasks": true, "aliases": true, "notes": true,
		"checkpoints": true, "inputs": true, "outputs": true, "choices": true, "controls": true}
	seedMaps = map[string]bool{"load_kwargs": true, "call_kwargs": true, "default_call_kwargs": true}
)

// emptyNotNull replaces null seed lists and maps in a decoded spec with
// empty ones, recursively.
func emptyNotNull(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch {
			case e == nil && seedLists[k]:
				x[k] = []any{}
			case e == nil && seedMaps[k]:
				x[k] = map[string]any{}
			case k != "default" && !seedMaps[k]:
				emptyNotNull(e)
			}
		}
	case []any:
		for _, e := range x {
			emptyNotNull(e)
		}
	}
}

// CompileSpec is how a variant's module is compiled when loaded: the
// seed's compile_module_if_enabled arguments. An unset field falls back to
// its WORLDFOUNDRY_TORCH_COMPILE* variable, then to the engine's default.
type CompileSpec struct {
	// Enabled turns compilation on or off.
	Enabled *bool `json:"enabled,omitempty"`
	// Backend names how the module is compiled (for libtorch: inductor,
	// optimize, freeze, ...; see docs/engine.md).
	Backend string `json:"backend,omitempty"`
	// Mode is a torch.compile mode (default, reduce-overhead, max-autotune,
	// max-autotune-no-cudagraphs).
	Mode string `json:"mode,omitempty" jsonschema:"enum=default,enum=reduce-overhead,enum=max-autotune,enum=max-autotune-no-cudagraphs"`
	// Strict makes a failed or unsupported compile an error instead of a
	// warning and the uncompiled module.
	Strict *bool `json:"strict,omitempty"`
}
