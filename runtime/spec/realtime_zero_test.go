package spec_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// A Go literal RealtimeSpec{} is all zeros, not the seed's RealtimeSpec()
// defaults (docs/differences.md): a stream refuses it, ToPayload writes
// the zeros, and only the video fps reads 0 as the default; decoding an
// empty realtime block, DefaultRealtimeSpec and a nil Realtime give the
// seed's defaults.
func TestRealtimeSpecZeroValue(t *testing.T) {
	var zero spec.RealtimeSpec
	seed := spec.DefaultRealtimeSpec()
	if seed.FPS != 16 || seed.FirstChunkFrames != 9 || seed.SteadyChunkFrames != 9 || seed.Transport != "in-memory-rgb" || !seed.Stateful {
		t.Fatalf("DefaultRealtimeSpec = %+v", seed)
	}
	step := func(context.Context, stream.StepRequest) (stream.StepResult, error) { return stream.StepResult{}, nil }
	_, err := stream.New(&zero, step)
	if err == nil || !strings.Contains(err.Error(), "realtime spec fps 0, want ≥ 1") {
		t.Errorf("stream.New(&RealtimeSpec{}) error = %v, want the fps refused", err)
	}
	if s, err := stream.New(nil, step); err != nil || !reflect.DeepEqual(s.Spec(), seed) {
		t.Errorf("stream.New(nil) spec = %+v, %v; want the defaults", s, err)
	}
	if p := zero.ToPayload(); p["fps"] != 0 || p["first_chunk_frames"] != 0 || p["transport"] != "" || p["stateful"] != false {
		t.Errorf("ToPayload of the zero value = %v", p)
	}
	if got := (&spec.ModelInferenceSpec{Realtime: &zero}).VideoFPS(&spec.InferenceArtifactSpec{Kind: spec.ArtifactVideo}); got != spec.DefaultVideoFPS {
		t.Errorf("VideoFPS with a zero realtime spec = %d", got)
	}
	var decoded spec.RealtimeSpec
	if err := json.Unmarshal([]byte(`{}`), &decoded); err != nil || !reflect.DeepEqual(decoded, seed) {
		t.Errorf("decoded {} = %+v, %v; want the defaults", decoded, err)
	}
}
