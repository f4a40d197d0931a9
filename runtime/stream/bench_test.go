package stream

import (
	"context"
	"iter"
	"testing"
)

// BenchmarkStreamOverhead measures the machinery's cost per chunk (checks,
// state, stats; unpaced) with a step that returns prepared frames
// (9 frames of 64×64 RGB), pulled one chunk at a time with iter.Pull2.
func BenchmarkStreamOverhead(b *testing.B) {
	frames := frameTensor(9, 64, 64, 1)
	step := func(ctx context.Context, req StepRequest) (StepResult, error) {
		n, _ := req.State.(int)
		return StepResult{Frames: frames, State: n + 1}, nil
	}
	s, err := New(rtSpec(16, 9, 9, "forward", "left"), step, WithPacing(false), WithControls(Controls{"forward": 1}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	next, stop := iter.Pull2(s.Chunks(context.Background()))
	defer stop()
	for b.Loop() {
		if _, err, ok := next(); !ok || err != nil {
			b.Fatal(err)
		}
	}
}
