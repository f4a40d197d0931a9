package stream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// A gate runs before every step with the chunk's index, its release after
// the step; controls set while the gate holds a step apply to that step;
// a gate error ends the stream.
func TestGate(t *testing.T) {
	rec := &recorder{}
	spec := &spec.RealtimeSpec{FPS: 8, FirstChunkFrames: 2, SteadyChunkFrames: 1, Controls: []string{"right"}}
	var sess *Session
	var order []string
	gate := func(ctx context.Context, i int) (func(), error) {
		order = append(order, "gate")
		if i == 2 {
			// Like a controls POST that arrives while chunk 2 waits.
			if err := sess.SetControls(Controls{"right": 1}); err != nil {
				return nil, err
			}
		}
		if i == 4 {
			return nil, errors.New("no slot")
		}
		return func() { order = append(order, "release") }, nil
	}
	var err error
	sess, err = New(spec, rec.step, WithPacing(false), WithGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	var end error
	for c, err := range sess.Chunks(context.Background()) {
		if err != nil {
			end = err
			break
		}
		got = append(got, c.Index)
	}
	if len(got) != 4 || end == nil || !strings.Contains(end.Error(), "chunk 4: no slot") {
		t.Fatalf("chunks %v, end %v; want 0..3 then the gate's error", got, end)
	}
	if want := "gate release gate release gate release gate release gate"; strings.Join(order, " ") != want {
		t.Errorf("order %v, want %s", order, want)
	}
	for _, r := range rec.reqs {
		want := 0.0
		if r.Index >= 2 {
			want = 1
		}
		if r.Controls["right"] != want {
			t.Errorf("chunk %d ran with controls %v, want right=%v", r.Index, r.Controls, want)
		}
	}
}
