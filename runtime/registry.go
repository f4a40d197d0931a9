package runtime

import (
	"fmt"
	"sort"
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
	// DefaultCallKwargs become the default task's default call kwargs.
	DefaultCallKwargs map[string]any
	// SupportsStream marks the family as streaming.
	SupportsStream bool
	// WorkloadType labels the workload.
	WorkloadType string
	// SupportedCallParams become the default task's string fields.
	SupportedCallParams []string
}

// GenericModelInferenceSpec builds a conservative fallback spec for a family
// not yet curated: one "default" variant and one "default" task whose
// optional string fields are the supported call params.
func GenericModelInferenceSpec(id string, h GenericHints) *ModelInferenceSpec {
	name := h.DisplayName
	if name == "" {
		name = id
	}
	v := InferenceVariantSpec{
		VariantID:  "default",
		Label:      "Default",
		Status:     "unknown",
		LoadKwargs: cloneMap(h.DefaultLoadKwargs),
		CallKwargs: map[string]any{},
	}
	if h.DefaultModelRef != "" {
		v.Checkpoints = []InferenceCheckpointRef{{Role: "model", URI: h.DefaultModelRef, Required: true, Status: "unknown"}}
	}
	t := InferenceTaskProfile{
		TaskID:            "default",
		Label:             "Default",
		DefaultCallKwargs: cloneMap(h.DefaultCallKwargs),
	}
	for _, p := range h.SupportedCallParams {
		t.Inputs = append(t.Inputs, InferenceFieldSpec{FieldID: p, Label: p, Kind: KindString, Target: TargetCallKwargs})
	}
	return &ModelInferenceSpec{
		ModelFamilyID:    id,
		DisplayName:      name,
		Variants:         []InferenceVariantSpec{v},
		Tasks:            []InferenceTaskProfile{t},
		DefaultVariantID: "default",
		DefaultTaskID:    "default",
		WorkloadType:     h.WorkloadType,
		SupportsStream:   h.SupportsStream,
	}
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

// GetModelInferenceSpec returns the spec registered in DefaultRegistry, or nil.
func GetModelInferenceSpec(id string) *ModelInferenceSpec { return DefaultRegistry.Get(id) }

// ListModelInferenceSpecs returns DefaultRegistry's specs sorted by id.
func ListModelInferenceSpecs() []*ModelInferenceSpec { return DefaultRegistry.List() }

// ModelInferenceSpecFor returns the registered spec or a generic fallback.
func ModelInferenceSpecFor(id string, hints GenericHints) *ModelInferenceSpec {
	return DefaultRegistry.Spec(id, hints)
}
