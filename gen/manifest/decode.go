package manifest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime"
)

// Decode decodes Value into SchemaVersion and Spec, applying the spec
// types' defaults (kind "string", target "call_kwargs", status "unknown",
// default ids "default", ...). It is meant for a Value that passed schema
// validation: a value of the wrong type is left at its default and the
// first such problem is returned.
//
// Free-form values (field defaults and the kwargs maps) keep the integer /
// float distinction of the file: integer literals become int64, other
// numbers float64, lists []any and mappings map[string]any.
func (f *File) Decode() error {
	m, ok := f.Value.(map[string]any)
	if !ok {
		return fmt.Errorf("manifest is not a mapping")
	}
	if n, ok := m["schema_version"].(json.Number); ok {
		if v, err := strconv.Atoi(string(n)); err == nil {
			f.SchemaVersion = v
		}
	}
	body := make(map[string]any, len(m))
	for k, v := range m {
		if k != "$schema" && k != "schema_version" {
			body[k] = v
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	spec := new(runtime.ModelInferenceSpec)
	uerr := json.Unmarshal(b, spec)
	restoreNative(spec, m)
	f.Spec = spec
	if uerr != nil {
		return fmt.Errorf("decode manifest: %w", uerr)
	}
	return nil
}

// restoreNative replaces the free-form values encoding/json decoded as
// float64 with Native values taken from the document.
func restoreNative(spec *runtime.ModelInferenceSpec, doc map[string]any) {
	vs, _ := doc["variants"].([]any)
	for i := range spec.Variants {
		if i >= len(vs) {
			break
		}
		v, _ := vs[i].(map[string]any)
		if kw, ok := Native(v["load_kwargs"]).(map[string]any); ok {
			spec.Variants[i].LoadKwargs = kw
		}
		if kw, ok := Native(v["call_kwargs"]).(map[string]any); ok {
			spec.Variants[i].CallKwargs = kw
		}
	}
	ts, _ := doc["tasks"].([]any)
	for i := range spec.Tasks {
		if i >= len(ts) {
			break
		}
		t, _ := ts[i].(map[string]any)
		if kw, ok := Native(t["default_call_kwargs"]).(map[string]any); ok {
			spec.Tasks[i].DefaultCallKwargs = kw
		}
		ins, _ := t["inputs"].([]any)
		for j := range spec.Tasks[i].Inputs {
			if j >= len(ins) {
				break
			}
			if in, ok := ins[j].(map[string]any); ok {
				spec.Tasks[i].Inputs[j].Default = Native(in["default"])
			}
		}
	}
}

// Native converts a document value into plain Go values: an integer
// json.Number becomes int64, any other number float64 (a number that does
// not fit stays json.Number), and lists and mappings are converted
// recursively. Other values are returned as they are.
func Native(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Native(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Native(e)
		}
		return out
	}
	return v
}
