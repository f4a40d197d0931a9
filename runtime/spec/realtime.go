package spec

import (
	"encoding/json"
	"math"
	"slices"
)

// RealtimeSpec is the model-owned playback and generation cadence for one
// resident session.
type RealtimeSpec struct {
	// FPS is the playback rate of generated frames.
	FPS int `json:"fps" jsonschema:"minimum=1,default=16"`
	// FirstChunkFrames is the frame count of the first chunk of a session.
	FirstChunkFrames int `json:"first_chunk_frames" jsonschema:"minimum=1,default=9"`
	// SteadyChunkFrames is the frame count of every later chunk.
	SteadyChunkFrames int `json:"steady_chunk_frames" jsonschema:"minimum=1,default=9"`
	// Controls are the control names a session step accepts.
	Controls []string `json:"controls"`
	// Transport names how frames are handed over, e.g. "in-memory-rgb".
	Transport string `json:"transport" jsonschema:"default=in-memory-rgb"`
	// Stateful says the session keeps model state between chunks.
	Stateful bool `json:"stateful" jsonschema:"default=true"`
}

// DefaultRealtimeSpec returns the seed's defaults: 16 fps, 9-frame chunks,
// the default controls, in-memory RGB transport, stateful.
func DefaultRealtimeSpec() RealtimeSpec {
	return RealtimeSpec{
		FPS:               16,
		FirstChunkFrames:  9,
		SteadyChunkFrames: 9,
		Controls:          slices.Clone(DefaultRealtimeControls),
		Transport:         "in-memory-rgb",
		Stateful:          true,
	}
}

// UnmarshalJSON decodes a realtime spec strictly, applying defaults to
// absent keys. Use RealtimeSpecFromPayload for untrusted model output.
func (r *RealtimeSpec) UnmarshalJSON(b []byte) error {
	type plain RealtimeSpec
	p := plain(DefaultRealtimeSpec())
	p.Controls = nil
	if err := json.Unmarshal(b, &p); err != nil {
		return decodeError[RealtimeSpec, plain](err)
	}
	if p.Controls == nil {
		p.Controls = slices.Clone(DefaultRealtimeControls)
	}
	*r = RealtimeSpec(p)
	return nil
}

// ToPayload returns the spec as a JSON-compatible map.
func (r RealtimeSpec) ToPayload() map[string]any {
	return map[string]any{
		"fps":                 r.FPS,
		"first_chunk_frames":  r.FirstChunkFrames,
		"steady_chunk_frames": r.SteadyChunkFrames,
		"controls":            slices.Clone(r.Controls),
		"transport":           r.Transport,
		"stateful":            r.Stateful,
	}
}

// RealtimeSpecFromPayload parses a model result without letting malformed
// metadata break play: value may be a RealtimeSpec, a *RealtimeSpec, a
// map[string]any, JSON bytes or a JSON string. Every part that is missing or
// malformed takes its value from fallback (or the defaults when fallback is
// nil); it never fails.
func RealtimeSpecFromPayload(value any, fallback *RealtimeSpec) RealtimeSpec {
	out := DefaultRealtimeSpec()
	if fallback != nil {
		out = *fallback
		out.Controls = slices.Clone(fallback.Controls)
	}
	var m map[string]any
	switch v := value.(type) {
	case RealtimeSpec:
		return v.over(out)
	case *RealtimeSpec:
		if v != nil {
			return v.over(out)
		}
	case map[string]any:
		m = v
	case []byte:
		_ = json.Unmarshal(v, &m)
	case string:
		_ = json.Unmarshal([]byte(v), &m)
	}
	if m == nil {
		return out
	}
	if n, ok := positiveInt(m["fps"]); ok {
		out.FPS = n
	}
	if n, ok := positiveInt(m["first_chunk_frames"]); ok {
		out.FirstChunkFrames = n
	}
	if n, ok := positiveInt(m["steady_chunk_frames"]); ok {
		out.SteadyChunkFrames = n
	}
	if cs, ok := stringList(m["controls"]); ok {
		out.Controls = cs
	}
	if s, ok := m["transport"].(string); ok && s != "" {
		out.Transport = s
	}
	if b, ok := m["stateful"].(bool); ok {
		out.Stateful = b
	}
	return out
}

// over returns r over out, field by field as a payload would set it: the
// counts only when positive and at most 1<<20, the transport only when
// not empty.
func (r RealtimeSpec) over(out RealtimeSpec) RealtimeSpec {
	if n, ok := positiveInt(r.FPS); ok {
		out.FPS = n
	}
	if n, ok := positiveInt(r.FirstChunkFrames); ok {
		out.FirstChunkFrames = n
	}
	if n, ok := positiveInt(r.SteadyChunkFrames); ok {
		out.SteadyChunkFrames = n
	}
	out.Controls = slices.Clone(r.Controls)
	if r.Transport != "" {
		out.Transport = r.Transport
	}
	out.Stateful = r.Stateful
	return out
}

func positiveInt(v any) (int, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case int32:
		f = float64(n)
	case float64:
		f = n
	case float32:
		f = float64(n)
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			return 0, false
		}
		f = x
	default:
		return 0, false
	}
	if f < 1 || f > 1<<20 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

func stringList(v any) ([]string, bool) {
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), true
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			s, ok := x.(string)
			if !ok || s == "" {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}
