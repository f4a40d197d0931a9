package stream

import (
	"context"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// fakeClock is simulated time: Sleep moves it on at once, and steps move it
// on by their pretend generation time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// frameTensor returns n frames of h×w×3 pixels, every byte val.
func frameTensor(n, h, w int, val byte) *tensor.Tensor {
	px := make([]byte, n*h*w*3)
	for i := range px {
		px[i] = val
	}
	return tensor.FromUint8(px, int64(n), int64(h), int64(w), 3)
}

// recorder is a step function that records its requests, pretends to take
// gen(i) on the clock (if any) and returns the frames asked for, with the
// chunk index as pixel value and state = previous state + 1.
type recorder struct {
	mu    sync.Mutex
	reqs  []StepRequest
	clock *fakeClock
	gen   func(i int) time.Duration
	// edit, when set, may change the result (metadata, done, bad frames).
	edit func(req StepRequest, res *StepResult)
}

func (r *recorder) step(ctx context.Context, req StepRequest) (StepResult, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.clock != nil && r.gen != nil {
		r.clock.Advance(r.gen(req.Index))
	}
	n, _ := req.State.(int)
	res := StepResult{Frames: frameTensor(req.Frames, 2, 3, byte(req.Index)), State: n + 1}
	if r.edit != nil {
		r.edit(req, &res)
	}
	return res, nil
}

func (r *recorder) requests() []StepRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]StepRequest(nil), r.reqs...)
}

func rtSpec(fps, first, steady int, controls ...string) *spec.RealtimeSpec {
	s := spec.DefaultRealtimeSpec()
	s.FPS, s.FirstChunkFrames, s.SteadyChunkFrames = fps, first, steady
	if controls != nil {
		s.Controls = controls
	}
	return &s
}

// collect runs a stream to its end and returns the chunks and the error
// that ended it (nil when it just ended).
func collect(ctx context.Context, s *Session) ([]Chunk, error) {
	var out []Chunk
	for c, err := range s.Chunks(ctx) {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}
