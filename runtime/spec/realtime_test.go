package spec

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDefaultRealtimeSpec(t *testing.T) {
	want := RealtimeSpec{FPS: 16, FirstChunkFrames: 9, SteadyChunkFrames: 9,
		Controls: []string{"forward", "backward", "left", "right", "turn_left", "turn_right"}, Transport: "in-memory-rgb", Stateful: true}
	d := DefaultRealtimeSpec()
	if !reflect.DeepEqual(d, want) {
		t.Errorf("DefaultRealtimeSpec = %+v, want the seed's %+v", d, want)
	}
	d.Controls[0] = "changed"
	if DefaultRealtimeControls[0] != "forward" {
		t.Error("DefaultRealtimeSpec shares DefaultRealtimeControls")
	}
}

func TestRealtimeUnmarshal(t *testing.T) {
	var r RealtimeSpec
	if err := json.Unmarshal([]byte(`{"fps": 8, "stateful": false}`), &r); err != nil {
		t.Fatal(err)
	}
	want := DefaultRealtimeSpec()
	want.FPS, want.Stateful = 8, false
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if err := json.Unmarshal([]byte(`{"controls": ["jump"]}`), &r); err != nil || !reflect.DeepEqual(r.Controls, []string{"jump"}) {
		t.Errorf("controls = %v, %v", r.Controls, err)
	}
	if err := json.Unmarshal([]byte(`{"controls": []}`), &r); err != nil || r.Controls == nil || len(r.Controls) != 0 {
		t.Errorf("explicit empty controls = %#v, %v", r.Controls, err)
	}
	if err := json.Unmarshal([]byte(`{"fps": "fast"}`), &r); err == nil {
		t.Error("strict decoding accepted a string fps")
	}
}

func TestRealtimePayloadRoundTrip(t *testing.T) {
	r := RealtimeSpec{FPS: 24, FirstChunkFrames: 5, SteadyChunkFrames: 3, Controls: []string{"a", "b"}, Transport: "shm", Stateful: false}
	p := r.ToPayload()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []any{p, b, string(b), r, &r} {
		if got := RealtimeSpecFromPayload(in, nil); !reflect.DeepEqual(got, r) {
			t.Errorf("from %T: %+v, want %+v", in, got, r)
		}
	}
	// The payload does not alias the spec's controls.
	p["controls"].([]string)[0] = "changed"
	if r.Controls[0] != "a" {
		t.Error("ToPayload shares Controls")
	}
}

// TestRealtimeFromPayloadFallsBack checks the seed's promise: malformed
// metadata never breaks play; each malformed part takes the fallback's value.
func TestRealtimeFromPayloadFallsBack(t *testing.T) {
	fb := RealtimeSpec{FPS: 10, FirstChunkFrames: 3, SteadyChunkFrames: 2, Controls: []string{"up"}, Transport: "t", Stateful: true}
	cases := []struct {
		name    string
		payload any
		want    RealtimeSpec
	}{
		{"nil", nil, fb},
		{"not a mapping", []any{1, 2}, fb},
		{"bad json", "{fps: 3", fb},
		{"nil pointer", (*RealtimeSpec)(nil), fb},
		{"number", 42, fb},
		{"zero fps", map[string]any{"fps": 0}, fb},
		{"negative", map[string]any{"first_chunk_frames": -4}, fb},
		{"fractional", map[string]any{"steady_chunk_frames": 2.5}, fb},
		{"huge", map[string]any{"fps": 1e12}, fb},
		{"string fps", map[string]any{"fps": "30"}, fb},
		{"controls with a number", map[string]any{"controls": []any{"a", 1}}, fb},
		{"controls with empty", map[string]any{"controls": []any{"a", ""}}, fb},
		{"controls not a list", map[string]any{"controls": "a"}, fb},
		{"empty transport", map[string]any{"transport": ""}, fb},
		{"stateful string", map[string]any{"stateful": "no"}, fb},
		{"mixed", map[string]any{"fps": 30.0, "first_chunk_frames": "x", "controls": []any{"l", "r"}, "stateful": false},
			RealtimeSpec{FPS: 30, FirstChunkFrames: 3, SteadyChunkFrames: 2, Controls: []string{"l", "r"}, Transport: "t", Stateful: false}},
		{"json numbers", []byte(`{"fps": 12, "steady_chunk_frames": 4, "unknown": true}`),
			RealtimeSpec{FPS: 12, FirstChunkFrames: 3, SteadyChunkFrames: 4, Controls: []string{"up"}, Transport: "t", Stateful: true}},
		{"int types", map[string]any{"fps": int64(7), "first_chunk_frames": int32(6), "steady_chunk_frames": float32(5)},
			RealtimeSpec{FPS: 7, FirstChunkFrames: 6, SteadyChunkFrames: 5, Controls: []string{"up"}, Transport: "t", Stateful: true}},
		{"json.Number", map[string]any{"fps": json.Number("9"), "first_chunk_frames": json.Number("x")},
			RealtimeSpec{FPS: 9, FirstChunkFrames: 3, SteadyChunkFrames: 2, Controls: []string{"up"}, Transport: "t", Stateful: true}},
	}
	for _, c := range cases {
		got := RealtimeSpecFromPayload(c.payload, &fb)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	// Without a fallback the defaults fill in.
	if got := RealtimeSpecFromPayload(map[string]any{"fps": 0, "transport": "x"}, nil); got.FPS != 16 || got.Transport != "x" {
		t.Errorf("defaults fallback: %+v", got)
	}
	// The result never aliases the fallback's controls.
	got := RealtimeSpecFromPayload(nil, &fb)
	got.Controls[0] = "changed"
	if fb.Controls[0] != "up" {
		t.Error("result shares the fallback's controls")
	}
}

// FuzzRealtimeSpecFromPayload: any bytes, never a panic, always a usable
// cadence.
func FuzzRealtimeSpecFromPayload(f *testing.F) {
	f.Add([]byte(`{"fps": 8, "controls": ["a"]}`))
	f.Add([]byte(`{"fps": -1, "first_chunk_frames": 1e400}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range []any{b, string(b)} {
			r := RealtimeSpecFromPayload(in, nil)
			if r.FPS < 1 || r.FirstChunkFrames < 1 || r.SteadyChunkFrames < 1 || r.Transport == "" {
				t.Fatalf("unusable cadence %+v from %q", r, b)
			}
		}
	})
}
