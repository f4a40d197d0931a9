package stream

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// Every way a stream can end leaves no goroutine behind: counted by hand
// (goleak is not available).
func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	okStep := (&recorder{}).step
	boom := func(ctx context.Context, req StepRequest) (StepResult, error) {
		return StepResult{}, errors.New("boom")
	}
	for range 20 {
		// Channel, cancelled mid-stream, paced on the real clock.
		ctx, cancel := context.WithCancel(context.Background())
		s := mustNew(t, rtSpec(1000, 2, 2), okStep)
		n := 0
		for range s.Channel(ctx, 1) {
			if n++; n == 3 {
				cancel()
			}
		}
		cancel()
		// Channel, cancelled while the producer waits out a long pacing delay.
		ctx, cancel = context.WithCancel(context.Background())
		s = mustNew(t, rtSpec(1, 9, 9), okStep)
		ch := s.Channel(ctx, 0)
		<-ch // chunk 0; chunk 1 now waits 9 s for its playback time
		cancel()
		for range ch {
		}
		// Channel abandoned after a cancel without draining it.
		ctx, cancel = context.WithCancel(context.Background())
		ch = mustNew(t, rtSpec(8, 1, 1), okStep, WithPacing(false)).Channel(ctx, 0)
		<-ch
		cancel()
		// Channel ending with a step error, and running to its end.
		for range mustNew(t, rtSpec(8, 1, 1), boom, WithPacing(false)).Channel(context.Background(), 4) {
		}
		for range mustNew(t, rtSpec(8, 1, 1), okStep, WithPacing(false), WithMaxChunks(3)).Channel(context.Background(), 0) {
		}
		// Iterator left early by the consumer.
		for range mustNew(t, rtSpec(8, 1, 1), okStep).Chunks(context.Background()) {
			break
		}
	}
	// The streams' goroutines end a little after their streams: a leak
	// waits out enginetest.Patience and fails, with every stack.
	if !enginetest.Await(func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines before, %d after %v:\n%s", before, runtime.NumGoroutine(), enginetest.Patience, buf)
	}
}

// FuzzRealtimeMetadata: whatever metadata a model returns, play goes on with
// a usable spec — every later chunk asks for at least one frame at a
// positive fps and gets exactly what it asked for.
func FuzzRealtimeMetadata(f *testing.F) {
	f.Add([]byte(`{"fps": 8, "steady_chunk_frames": 4}`))
	f.Add([]byte(`{"fps": -1, "first_chunk_frames": 0, "controls": [1, 2]}`))
	f.Add([]byte(`{"steady_chunk_frames": 1e9, "stateful": false, "transport": ""}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		clk := newFakeClock()
		rec := &recorder{clock: clk, gen: func(int) time.Duration { return time.Millisecond }}
		rec.edit = func(req StepRequest, res *StepResult) {
			if req.Spec.FPS < 1 || req.Frames < 1 || req.Frames > 64 {
				// Keep the fuzz run cheap: huge (but valid) chunk sizes are
				// answered with an error the test accepts below.
				res.Frames = nil
			}
			res.Realtime = meta
		}
		s, err := New(rtSpec(16, 2, 2), rec.step, WithClock(clk), WithMaxChunks(3))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := collect(context.Background(), s)
		if err != nil && !strings.Contains(err.Error(), "no frames") {
			t.Fatalf("metadata %q broke play: %v", meta, err)
		}
		for _, r := range rec.requests() {
			if r.Frames < 1 || r.Spec.FPS < 1 {
				t.Fatalf("metadata %q led to request %+v", meta, r)
			}
		}
		for _, c := range chunks {
			if c.Video == nil || c.Video.FPS < 1 {
				t.Fatalf("chunk %d without a valid video", c.Index)
			}
		}
	})
}
