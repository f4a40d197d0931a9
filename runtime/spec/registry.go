package spec

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Registry holds model inference specs by family id and alias. The zero value
// is ready to use and safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	specs map[string]*ModelInferenceSpec // by family id
	names map[string]string              // id or alias -> family id
}

// DefaultRegistry is the process-wide registry generated packages register
// their families with in init.
var DefaultRegistry = &Registry{}

// Register adds spec. Registering a family id or alias that is already taken
// (by id or alias) is an error; nothing is overwritten.
func (r *Registry) Register(spec *ModelInferenceSpec) error {
	if spec == nil || spec.ModelFamilyID == "" {
		return fmt.Errorf("register: spec without model_family_id")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = map[string]*ModelInferenceSpec{}
		r.names = map[string]string{}
	}
	names := append([]string{spec.ModelFamilyID}, spec.Aliases...)
	seen := map[string]bool{}
	for _, n := range names {
		if owner, ok := r.names[n]; ok {
			return fmt.Errorf("register %q: name %q is already taken by family %q", spec.ModelFamilyID, n, owner)
		}
		if seen[n] {
			return fmt.Errorf("register %q: name %q given twice", spec.ModelFamilyID, n)
		}
		seen[n] = true
	}
	r.specs[spec.ModelFamilyID] = spec
	for _, n := range names {
		r.names[n] = spec.ModelFamilyID
	}
	return nil
}

// MustRegister is Register for init functions: it panics on error.
func (r *Registry) MustRegister(spec *ModelInferenceSpec) {
	if err := r.Register(spec); err != nil {
		panic(err)
	}
}

// Get returns the registered spec for a family id or alias, or nil when none
// is registered (the seed's get_model_inference_spec).
func (r *Registry) Get(id string) *ModelInferenceSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if fam, ok := r.names[id]; ok {
		return r.specs[fam]
	}
	return nil
}

// List returns every registered spec sorted by family id.
func (r *Registry) List() []*ModelInferenceSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*ModelInferenceSpec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ModelFamilyID < out[j].ModelFamilyID })
	return out
}

// Spec returns the registered spec for id, or a generic fallback built from
// hints when none is registered (the seed's model_inference_spec).
//
// A family is registered only when its generated package is linked into
// the program: each generated package registers its spec with
// DefaultRegistry in init, so a program that does not import the package
// of a built-in family gets the generic fallback for it, not the curated
// spec. The fallback says what it is (IsGenericFallback, and
// GenericFallbackNote in its notes); use Get when "not registered" must
// be told apart from the fallback, as the seed's get_model_inference_spec.
func (r *Registry) Spec(id string, hints GenericHints) *ModelInferenceSpec {
	if s := r.Get(id); s != nil {
		return s
	}
	return GenericModelInferenceSpec(id, hints)
}

// GenericHints are the optional hints for a generic fallback spec.
type GenericHints struct {
	// DisplayName defaults to the family id.
	DisplayName string
	// DefaultModelRef becomes the default variant's "model" checkpoint URI.
	DefaultModelRef string
	// DefaultLoadKwargs become the default variant's load kwargs.
	DefaultLoadKwargs map[string]any
	// DefaultCallKwargs become the default task's default call kwargs; a
	// value given for a supported call param also decides its kind.
	DefaultCallKwargs map[string]any
	// SupportsStream marks the family as streaming.
	SupportsStream bool
	// WorkloadType labels the workload and picks the kind of the default
	// task's output artifact (see GenericModelInferenceSpec).
	WorkloadType string
	// SupportedCallParams become the default task's optional input fields,
	// in order (a repeated name is kept once).
	SupportedCallParams []string
}

// GenericFallbackNote is the first note of every spec GenericModelInferenceSpec
// builds, so the spec itself (and its ToDict or JSON form) says that it is a
// fallback and not a curated spec.
const GenericFallbackNote = "generic fallback: no curated spec is registered for this family (its generated package is not imported); fields and output are inferred from the hints"

// UntypedFieldDescription is the description of a generic spec's field
// whose kind could not be inferred: such a field has kind string, and the
// description says the kind is a guess.
const UntypedFieldDescription = "untyped: the generic fallback does not know this parameter's kind, so it is taken as a string"

// GenericOutputID is the artifact id of the generic default task's output.
const GenericOutputID = "output"

// IsGenericFallback reports whether s was built by GenericModelInferenceSpec
// (its notes hold GenericFallbackNote) rather than curated.
func (s *ModelInferenceSpec) IsGenericFallback() bool {
	return s != nil && slices.Contains(s.Notes, GenericFallbackNote)
}

// genericParamKinds are the kinds of well-known call parameters, by name
// (lower case, '-' read as '_').
var genericParamKinds = map[string]Kind{
	"seed": KindInt, "num_frames": KindInt, "frames": KindInt, "frame_num": KindInt, "max_frames": KindInt,
	"height": KindInt, "width": KindInt, "steps": KindInt, "num_steps": KindInt,
	"num_inference_steps": KindInt, "sampling_steps": KindInt, "sample_steps": KindInt,
	"fps": KindInt, "batch_size": KindInt, "num_images": KindInt, "num_videos": KindInt,
	"num_samples": KindInt, "chunk_size": KindInt,
	"guidance": KindFloat, "guidance_scale": KindFloat, "cfg": KindFloat, "cfg_scale": KindFloat,
	"true_cfg_scale": KindFloat, "strength": KindFloat, "temperature": KindFloat, "top_p": KindFloat,
	"eta": KindFloat, "shift": KindFloat, "sample_shift": KindFloat,
	"prompt": KindString, "negative_prompt": KindString, "text": KindString, "caption": KindString,
	"size": KindString, "resolution": KindString, "sampler": KindString, "scheduler": KindString,
	"image_path": KindString, "video_path": KindString, "output_path": KindString, "output_dir": KindString,
	"offload": KindBool, "tiled": KindBool, "enhance_prompt": KindBool,
}

// genericOutputKinds give the generic output artifact's kind by workload
// type; any other workload type gives a tensor.
var genericOutputKinds = map[string]ArtifactKind{
	"video": ArtifactVideo, "world": ArtifactVideo, "image": ArtifactImage,
	"embedding": ArtifactEmbedding, "embeddings": ArtifactEmbedding,
	"text": ArtifactText, "json": ArtifactJSON,
}

// GenericModelInferenceSpec builds a conservative fallback spec for a family
// not yet curated (the seed's generic_model_inference_spec): one "default"
// variant and one "default" task. It passes wfgen validate (given a valid
// family id and identifier-like call params), so it can seed a manifest:
//
//   - Each supported call param becomes an optional call_kwargs field. Its
//     kind is that of its value in DefaultCallKwargs when one is given
//     (bool, string, int, float, or a list of one of these; a number
//     takes the int or float kind of a well-known param), else the kind of a
//     well-known param name (seed, num_frames, height, width, steps → int;
//     guidance, guidance_scale, cfg, strength → float; prompt,
//     negative_prompt → string; ...), else string with
//     UntypedFieldDescription as its description.
//   - The task has one optional output, GenericOutputID, whose kind follows
//     WorkloadType: video (also "world"), image, embedding, text, json, and
//     tensor for anything else.
//   - Notes start with GenericFallbackNote (see IsGenericFallback).
//
// Lists and maps are empty rather than nil, so the JSON form has [] and {}.
func GenericModelInferenceSpec(id string, h GenericHints) *ModelInferenceSpec {
	name := h.DisplayName
	if name == "" {
		name = id
	}
	v := InferenceVariantSpec{
		VariantID:   "default",
		Label:       "Default",
		Status:      "unknown",
		Checkpoints: []InferenceCheckpointRef{},
		LoadKwargs:  cloneMap(h.DefaultLoadKwargs),
		CallKwargs:  map[string]any{},
		Aliases:     []string{},
		Notes:       []string{},
	}
	if h.DefaultModelRef != "" {
		v.Checkpoints = []InferenceCheckpointRef{{Role: "model", URI: h.DefaultModelRef, Required: true, Status: "unknown"}}
	}
	outKind, ok := genericOutputKinds[strings.ToLower(strings.TrimSpace(h.WorkloadType))]
	if !ok {
		outKind = ArtifactTensor
	}
	t := InferenceTaskProfile{
		TaskID:            "default",
		Label:             "Default",
		Inputs:            []InferenceFieldSpec{},
		DefaultCallKwargs: cloneMap(h.DefaultCallKwargs),
		Aliases:           []string{},
		Outputs: []InferenceArtifactSpec{{
			ArtifactID:  GenericOutputID,
			Kind:        outKind,
			Description: "generic fallback: the model's output, its kind taken from workload_type",
		}},
	}
	seen := map[string]bool{}
	for _, p := range h.SupportedCallParams {
		if seen[p] {
			continue
		}
		seen[p] = true
		f := InferenceFieldSpec{FieldID: p, Label: p, Target: TargetCallKwargs, Choices: []string{}}
		val, hasVal := h.DefaultCallKwargs[p]
		f.Kind, ok = genericKind(p, val, hasVal)
		if !ok {
			f.Description = UntypedFieldDescription
		}
		t.Inputs = append(t.Inputs, f)
	}
	return &ModelInferenceSpec{
		ModelFamilyID:    id,
		DisplayName:      name,
		Variants:         []InferenceVariantSpec{v},
		Tasks:            []InferenceTaskProfile{t},
		DefaultVariantID: "default",
		DefaultTaskID:    "default",
		Aliases:          []string{},
		Notes:            []string{GenericFallbackNote},
		WorkloadType:     h.WorkloadType,
		SupportsStream:   h.SupportsStream,
	}
}

// genericKind infers the kind of call param name from its default value
// (when hasVal), then from its name; ok is false when neither tells, and
// the kind is then string.
func genericKind(name string, val any, hasVal bool) (k Kind, ok bool) {
	named, known := genericParamKinds[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")]
	if hasVal {
		if vk, ok := valueKind(val); ok {
			switch {
			case vk == KindFloat && named == KindInt && isIntegral(val):
				return KindInt, true
			case vk == KindInt && named == KindFloat:
				return KindFloat, true
			}
			return vk, true
		}
	}
	if known {
		return named, true
	}
	return KindString, false
}

// valueKind gives the field kind of a default value: a scalar or a list of
// one scalar kind.
func valueKind(v any) (Kind, bool) {
	switch x := v.(type) {
	case bool:
		return KindBool, true
	case string:
		return KindString, true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return KindInt, true
	case float32, float64:
		return KindFloat, true
	case []string:
		return KindStringList, true
	case []bool:
		return KindBoolList, true
	case []int, []int64:
		return KindIntList, true
	case []float64:
		return KindFloatList, true
	case []any:
		if len(x) == 0 {
			return "", false
		}
		var elem Kind
		for _, e := range x {
			k, ok := valueKind(e)
			if !ok || k.IsList() || (elem != "" && k != elem) {
				return "", false
			}
			elem = k
		}
		return elem.ListOf()
	}
	return "", false
}

func isIntegral(v any) bool {
	switch x := v.(type) {
	case float64:
		return x == math.Trunc(x) && !math.IsInf(x, 0)
	case float32:
		return float64(x) == math.Trunc(float64(x)) && !math.IsInf(float64(x), 0)
	}
	return false
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Register adds spec to DefaultRegistry.
func Register(spec *ModelInferenceSpec) error { return DefaultRegistry.Register(spec) }

// GetModelInferenceSpec returns the spec registered in DefaultRegistry, or
// nil (never a generic fallback).
func GetModelInferenceSpec(id string) *ModelInferenceSpec { return DefaultRegistry.Get(id) }

// ListModelInferenceSpecs returns DefaultRegistry's specs sorted by id.
func ListModelInferenceSpecs() []*ModelInferenceSpec { return DefaultRegistry.List() }

// ModelInferenceSpecFor returns the spec registered in DefaultRegistry, or a
// generic fallback when none is (the seed's model_inference_spec). A
// built-in family is registered only when its generated package is
// imported; see Registry.Spec.
func ModelInferenceSpecFor(id string, hints GenericHints) *ModelInferenceSpec {
	return DefaultRegistry.Spec(id, hints)
}
