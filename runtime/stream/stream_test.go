package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfoundry/wfgen/runtime/kvcache"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func mustNew(t *testing.T, sp *spec.RealtimeSpec, step StepFunc, opts ...Option) *Session {
	t.Helper()
	s, err := New(sp, step, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func TestChunkSizesFollowSpec(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 5, 3), rec.step, WithPacing(false), WithMaxChunks(4))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 4 {
		t.Fatalf("%d chunks, want 4", len(chunks))
	}
	wantFrames := []int{5, 3, 3, 3}
	wantFirst := []int64{0, 5, 8, 11}
	for i, c := range chunks {
		r := rec.requests()[i]
		if r.Index != i || r.Frames != wantFrames[i] || r.FirstFrame != wantFirst[i] {
			t.Errorf("request %d: index %d frames %d first frame %d, want %d %d %d", i, r.Index, r.Frames, r.FirstFrame, i, wantFrames[i], wantFirst[i])
		}
		if c.Index != i || c.Video.Frames.Shape[0] != int64(wantFrames[i]) || c.Video.FPS != 8 || c.FirstFrame != wantFirst[i] {
			t.Errorf("chunk %d: index %d, %v frames at %v fps, first frame %d", i, c.Index, c.Video.Frames.Shape, c.Video.FPS, c.FirstFrame)
		}
		if c.Video.Frames.Data[0] != byte(i) {
			t.Errorf("chunk %d carries the frames of step %d", i, c.Video.Frames.Data[0])
		}
	}
	if st := s.Stats(); st.Chunks != 4 || st.Frames != 14 {
		t.Errorf("stats: %d chunks, %d frames; want 4, 14", st.Chunks, st.Frames)
	}
	if !s.Done() {
		t.Error("session not done after its max chunks")
	}
	// The session is over: another stream ends at once.
	more, err := collect(context.Background(), s)
	if err != nil || len(more) != 0 {
		t.Errorf("after the end: %d chunks, %v", len(more), err)
	}
}

func TestNilSpecUsesDefaults(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, nil, rec.step, WithPacing(false), WithMaxChunks(2))
	if _, err := collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	d := spec.DefaultRealtimeSpec()
	for _, r := range rec.requests() {
		if r.Frames != 9 || r.Spec.FPS != d.FPS || len(r.Spec.Controls) != len(d.Controls) || !r.Spec.Stateful {
			t.Errorf("request %+v, want the default spec", r)
		}
	}
}

func TestNewValidates(t *testing.T) {
	rec := &recorder{}
	_, err := New(rtSpec(0, 1, 1), rec.step)
	wantErr(t, err, "fps 0")
	_, err = New(rtSpec(8, 0, 1), rec.step)
	wantErr(t, err, "chunk frames 0")
	_, err = New(nil, nil)
	wantErr(t, err, "nil step")
	_, err = New(nil, rec.step, WithMaxChunks(-1))
	wantErr(t, err, "max chunks -1")
	_, err = New(nil, rec.step, WithClock(nil))
	wantErr(t, err, "nil clock")
	_, err = New(nil, rec.step, WithControls(Controls{"jump": 1}))
	wantErr(t, err, `unknown control "jump"`)
}

func TestStateCarriesAcrossChunks(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 2, 2), rec.step, WithPacing(false), WithMaxChunks(4))
	if _, err := collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for i, r := range rec.requests() {
		var want any
		if i > 0 {
			want = i // each step returned previous + 1
		}
		if r.State != want {
			t.Errorf("request %d: state %v, want %v", i, r.State, want)
		}
	}
	// Not stateful: every step gets nil, whatever it returned.
	rec = &recorder{}
	sp := rtSpec(8, 2, 2)
	sp.Stateful = false
	s = mustNew(t, sp, rec.step, WithPacing(false), WithMaxChunks(3))
	if _, err := collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	for i, r := range rec.requests() {
		if r.State != nil {
			t.Errorf("stateless request %d: state %v, want nil", i, r.State)
		}
	}
}

// A stateful step keeps a KV cache as its session state: each chunk appends
// one position per layer, so after n chunks the cache holds n positions.
func TestStateHoldsKVCache(t *testing.T) {
	step := func(ctx context.Context, req StepRequest) (StepResult, error) {
		cache, _ := req.State.(*kvcache.InferenceParams)
		if cache == nil {
			var err error
			if cache, err = kvcache.New(1, 16); err != nil {
				return StepResult{}, err
			}
		}
		x := tensor.FromFloat32([]float32{float32(req.Index)}, 1, 1, 1)
		for l := range 2 {
			if err := cache.Append(l, x, x); err != nil {
				return StepResult{}, err
			}
		}
		if err := cache.Advance(1); err != nil {
			return StepResult{}, err
		}
		return StepResult{Frames: frameTensor(req.Frames, 1, 1, 0), State: cache}, nil
	}
	var last *kvcache.InferenceParams
	s := mustNew(t, rtSpec(8, 1, 1), func(ctx context.Context, req StepRequest) (StepResult, error) {
		res, err := step(ctx, req)
		last, _ = res.State.(*kvcache.InferenceParams)
		return res, err
	}, WithPacing(false), WithMaxChunks(5))
	if _, err := collect(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	k, _, _ := last.Layer(1)
	v, _ := k.Float32s()
	if fmt.Sprint(v) != "[0 1 2 3 4]" || last.SequenceOffset() != 5 {
		t.Errorf("cache holds %v at offset %d, want [0 1 2 3 4] at 5", v, last.SequenceOffset())
	}
}

func TestControls(t *testing.T) {
	rec := &recorder{}
	var s *Session
	rec.edit = func(req StepRequest, res *StepResult) {
		if req.Index == 2 { // the model drops "left" from its controls
			res.Realtime = map[string]any{"controls": []any{"forward", "right"}}
		}
	}
	s = mustNew(t, rtSpec(8, 1, 1, "forward", "left", "right"), rec.step,
		WithPacing(false), WithMaxChunks(4), WithControls(Controls{"forward": 1}))
	wantErr(t, s.SetControls(Controls{"forward": 1, "jump": 1}), `unknown control "jump"`, "known: forward, left, right")
	wantErr(t, s.SetControls(Controls{"left": math.NaN()}), `control "left" is NaN`)
	if got := s.Controls(); len(got) != 1 || got["forward"] != 1 {
		t.Fatalf("failed SetControls changed the controls to %v", got)
	}
	for c, err := range s.Chunks(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		switch c.Index {
		case 0:
			if err := s.SetControls(Controls{"left": 0.5, "right": 1}); err != nil {
				t.Fatal(err)
			}
		case 2:
			// After the spec change, "left" is unknown.
			wantErr(t, s.SetControls(Controls{"left": 1}), `unknown control "left"`, "known: forward, right")
		}
	}
	want := []string{"map[forward:1]", "map[left:0.5 right:1]", "map[left:0.5 right:1]", "map[right:1]"}
	for i, r := range rec.requests() {
		if got := fmt.Sprint(r.Controls); got != want[i] {
			t.Errorf("request %d: controls %s, want %s", i, got, want[i])
		}
	}
	// A step changing its copy does not change the session's controls.
	rec.requests()[3].Controls["right"] = 7
	if s.Controls()["right"] != 1 {
		t.Error("a request's controls share memory with the session")
	}
	noControls := rtSpec(8, 1, 1)
	noControls.Controls = []string{}
	_, err := New(noControls, rec.step, WithControls(Controls{"forward": 1}))
	wantErr(t, err, "the realtime spec has no controls")
}

func TestFrameContract(t *testing.T) {
	cases := []struct {
		name   string
		frames func(req StepRequest) any
		want   []string
	}{
		{"too few", func(req StepRequest) any { return frameTensor(req.Frames-1, 2, 3, 0) }, []string{"chunk 0", "returned 3 frames, 4 were asked for"}},
		{"too many", func(req StepRequest) any { return frameTensor(req.Frames+2, 2, 3, 0) }, []string{"returned 6 frames, 4 were asked for"}},
		{"float", func(req StepRequest) any {
			return tensor.FromFloat32(make([]float32, req.Frames*6), int64(req.Frames), 2, 1, 3)
		}, []string{"uint8 [T,H,W,C]"}},
		{"no frames", func(req StepRequest) any { return nil }, []string{"no frames"}},
		{"empty frames", func(req StepRequest) any { return frameTensor(req.Frames, 0, 3, 0) }, []string{"at least 1×1 pixels"}},
		{"nil video", func(req StepRequest) any { return (*tensor.Video)(nil) }, []string{"no frames"}},
		{"wrong type", func(req StepRequest) any { return []byte{1} }, []string{"frames are []uint8"}},
		{"size change", func(req StepRequest) any {
			if req.Index == 1 {
				return frameTensor(req.Frames, 3, 3, 0)
			}
			return frameTensor(req.Frames, 2, 3, 0)
		}, []string{"chunk 1", "3×3×3", "earlier chunks were 2×3×3"}},
	}
	for _, c := range cases {
		rec := &recorder{edit: func(req StepRequest, res *StepResult) { res.Frames = c.frames(req) }}
		s := mustNew(t, rtSpec(8, 4, 4), rec.step, WithPacing(false), WithMaxChunks(3))
		chunks, err := collect(context.Background(), s)
		if err == nil {
			t.Errorf("%s: no error after %d chunks", c.name, len(chunks))
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
	// Video values and pointers are accepted as well as tensors.
	rec := &recorder{edit: func(req StepRequest, res *StepResult) {
		v := tensor.Video{Frames: frameTensor(req.Frames, 2, 3, 0), FPS: 99}
		if req.Index == 0 {
			res.Frames = v
		} else {
			res.Frames = &v
		}
	}}
	s := mustNew(t, rtSpec(8, 4, 4), rec.step, WithPacing(false), WithMaxChunks(2))
	chunks, err := collect(context.Background(), s)
	if err != nil || len(chunks) != 2 || chunks[1].Video.FPS != 8 {
		t.Fatalf("%d chunks, %v; want 2 at the spec's 8 fps", len(chunks), err)
	}
}

func TestStepErrorEndsStream(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	s := mustNew(t, rtSpec(8, 1, 1), func(ctx context.Context, req StepRequest) (StepResult, error) {
		calls++
		if req.Index == 2 {
			return StepResult{}, boom
		}
		return StepResult{Frames: frameTensor(1, 1, 1, 0)}, nil
	}, WithPacing(false))
	chunks, err := collect(context.Background(), s)
	if !errors.Is(err, boom) || len(chunks) != 2 || calls != 3 {
		t.Fatalf("%d chunks, %d calls, error %v; want 2, 3, boom", len(chunks), calls, err)
	}
	wantErr(t, err, "chunk 2")
	// Resuming retries the failed chunk with the same index.
	chunks, err = collect(context.Background(), s)
	if !errors.Is(err, boom) || len(chunks) != 0 || calls != 4 {
		t.Fatalf("resume: %d chunks, %d calls, %v", len(chunks), calls, err)
	}
}

func TestDoneAndResume(t *testing.T) {
	rec := &recorder{edit: func(req StepRequest, res *StepResult) { res.Done = req.Index == 4 }}
	s := mustNew(t, rtSpec(8, 3, 2), rec.step, WithPacing(false))
	n := 0
	for _, err := range s.Chunks(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break // the consumer stops early
		}
	}
	rest, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 3 || rest[0].Index != 2 || rest[2].Index != 4 || rest[0].FirstFrame != 5 {
		t.Fatalf("resumed with %d chunks from index %d", len(rest), rest[0].Index)
	}
	if r := rec.requests()[2]; r.State != 2 || r.Frames != 2 {
		t.Errorf("resumed request: state %v frames %d, want 2 and 2", r.State, r.Frames)
	}
	if !s.Done() || len(rec.requests()) != 5 {
		t.Errorf("done %v after %d steps, want true after 5", s.Done(), len(rec.requests()))
	}
}

func TestBusy(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 1, 1), rec.step, WithPacing(false), WithMaxChunks(3))
	for _, err := range s.Chunks(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		_, err2 := collect(context.Background(), s)
		if !errors.Is(err2, ErrBusy) {
			t.Fatalf("a second stream during the first: %v, want ErrBusy", err2)
		}
	}
}

// checkSchedule verifies the pacing rule on released chunks: the first is
// released when ready, chunk k is due at the first release plus the playback
// time of the chunks before it, and released at max(ready, due).
func checkSchedule(t *testing.T, chunks []Chunk) {
	t.Helper()
	anchor := chunks[0].Ready
	var played time.Duration
	for i, c := range chunks {
		due := anchor.Add(played)
		if !c.Due.Equal(due) {
			t.Errorf("chunk %d due at +%v, want +%v", i, c.Due.Sub(anchor), due.Sub(anchor))
		}
		want := due
		if c.Ready.After(due) {
			want = c.Ready
		}
		if !c.Released.Equal(want) {
			t.Errorf("chunk %d released at +%v, want +%v (ready +%v)", i, c.Released.Sub(anchor), want.Sub(anchor), c.Ready.Sub(anchor))
		}
		played += time.Duration(c.Video.Frames.Shape[0]) * time.Second / time.Duration(c.Spec.FPS)
	}
}

func TestPacingWithFakeClock(t *testing.T) {
	clk := newFakeClock()
	start := clk.Now()
	rec := &recorder{clock: clk, gen: func(int) time.Duration { return 100 * time.Millisecond }}
	s := mustNew(t, rtSpec(16, 9, 9), rec.step, WithClock(clk), WithMaxChunks(6))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	checkSchedule(t, chunks)
	if got := chunks[0].Released.Sub(start); got != 100*time.Millisecond {
		t.Errorf("first chunk released after %v, want as soon as ready (100ms)", got)
	}
	for k := 1; k < len(chunks); k++ {
		if gap := chunks[k].Released.Sub(chunks[k-1].Released); gap != 562500*time.Microsecond {
			t.Errorf("chunks %d and %d are %v apart, want 9 frames at 16 fps = 562.5ms", k-1, k, gap)
		}
	}
	if st := s.Stats(); st.Late != 0 {
		t.Errorf("%d late chunks, want 0", st.Late)
	}
	// Each wait is the chunk period minus the generation time.
	for i, d := range clk.Sleeps() {
		if d != 462500*time.Microsecond {
			t.Errorf("sleep %d = %v, want 462.5ms", i, d)
		}
	}
}

func TestPacingFirstAndSteadyDiffer(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{clock: clk, gen: func(int) time.Duration { return 50 * time.Millisecond }}
	s := mustNew(t, rtSpec(8, 4, 8), rec.step, WithClock(clk), WithMaxChunks(4))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	checkSchedule(t, chunks)
	for k, want := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 2500 * time.Millisecond} {
		if got := chunks[k].Released.Sub(chunks[0].Released); got != want {
			t.Errorf("chunk %d released at +%v, want +%v", k, got, want)
		}
	}
}

func TestPacingWhenGenerationIsSlow(t *testing.T) {
	clk := newFakeClock()
	gen := []time.Duration{100, 100, 900, 100, 100, 100}
	rec := &recorder{clock: clk, gen: func(i int) time.Duration { return gen[i] * time.Millisecond }}
	s := mustNew(t, rtSpec(16, 8, 8), rec.step, WithClock(clk), WithMaxChunks(len(gen)))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	checkSchedule(t, chunks)
	// Chunk 2 takes 900ms > the 500ms period: it goes out when ready, and
	// later chunks catch up with the original schedule.
	if !chunks[2].Late() || chunks[2].Released != chunks[2].Ready {
		t.Errorf("slow chunk 2: late %v, released %v after ready", chunks[2].Late(), chunks[2].Released.Sub(chunks[2].Ready))
	}
	// Chunk 3 starts at 1.5s, is ready at 1.6s: exactly its due time, not late.
	if st := s.Stats(); st.Late != 1 || chunks[3].Late() {
		t.Errorf("%d late chunks (chunk 3 late: %v), want only chunk 2", st.Late, chunks[3].Late())
	}
	if got := chunks[5].Released.Sub(chunks[0].Released); got != 2500*time.Millisecond {
		t.Errorf("chunk 5 at +%v, want back on schedule at +2.5s", got)
	}
}

func TestUnpacedDoesNotWait(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{clock: clk, gen: func(int) time.Duration { return 10 * time.Millisecond }}
	s := mustNew(t, rtSpec(16, 9, 9), rec.step, WithClock(clk), WithPacing(false), WithMaxChunks(5))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(clk.Sleeps()); n != 0 {
		t.Errorf("unpaced stream slept %d times", n)
	}
	for i, c := range chunks {
		if !c.Due.IsZero() || !c.Released.Equal(c.Ready) {
			t.Errorf("chunk %d: due %v, released %v after ready", i, c.Due, c.Released.Sub(c.Ready))
		}
	}
	if got := chunks[4].Released.Sub(chunks[0].Released); got != 40*time.Millisecond {
		t.Errorf("5 unpaced chunks span %v, want 40ms (generation time only)", got)
	}
}

// With the real clock, chunks are never released before their playback
// time (a lower bound only: the machine may be slower, never faster).
func TestPacingWithSystemClock(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, rtSpec(200, 2, 2), rec.step, WithMaxChunks(5)) // 10ms a chunk
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(chunks); k++ {
		if got, min := chunks[k].Released.Sub(chunks[0].Released), time.Duration(k)*10*time.Millisecond; got < min {
			t.Errorf("chunk %d released at +%v, before its playback time +%v", k, got, min)
		}
	}
}

func TestLatencyStats(t *testing.T) {
	clk := newFakeClock()
	gen := []time.Duration{300, 100, 200, 400, 100}
	rec := &recorder{clock: clk, gen: func(i int) time.Duration { return gen[i] * time.Millisecond }}
	s := mustNew(t, rtSpec(8, 1, 1), rec.step, WithClock(clk), WithPacing(false), WithMaxChunks(5))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chunks {
		if c.Latency != gen[i]*time.Millisecond {
			t.Errorf("chunk %d latency %v, want %v", i, c.Latency, gen[i]*time.Millisecond)
		}
	}
	ms := time.Millisecond
	st := s.Stats()
	want := Stats{Chunks: 5, Frames: 5, FirstChunk: 300 * ms, Steady: Summary{Count: 4, Min: 100 * ms, Max: 400 * ms, Mean: 200 * ms, P50: 100 * ms, P95: 400 * ms}}
	if st != want {
		t.Errorf("stats %+v\nwant  %+v", st, want)
	}
	if got := st.Steady.String(); !strings.Contains(got, "n=4 mean=200ms") {
		t.Errorf("summary string %q", got)
	}
}

// A step that reports its latency (a remote session's: the server's step
// time, while the call itself waited for the server's pacing) gives the
// chunk that latency; one that reports none, its call's duration.
func TestReportedLatency(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{clock: clk, gen: func(int) time.Duration { return 250 * time.Millisecond }}
	rec.edit = func(req StepRequest, res *StepResult) {
		if req.Index%2 == 1 {
			res.Latency = 700 * time.Microsecond
		}
	}
	s := mustNew(t, rtSpec(8, 1, 1), rec.step, WithClock(clk), WithPacing(false), WithMaxChunks(4))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range chunks {
		want := 250 * time.Millisecond
		if i%2 == 1 {
			want = 700 * time.Microsecond
		}
		if c.Latency != want {
			t.Errorf("chunk %d latency %v, want %v", i, c.Latency, want)
		}
	}
}

func TestSpecChangeFromMetadata(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{clock: clk, gen: func(int) time.Duration { return 10 * time.Millisecond }}
	rec.edit = func(req StepRequest, res *StepResult) {
		switch req.Index {
		case 1:
			res.Realtime = map[string]any{"steady_chunk_frames": 4, "fps": 8}
		case 2:
			res.Realtime = "not json at all" // malformed: ignored
		case 3:
			res.Realtime = []byte(`{"fps": -3, "steady_chunk_frames": "x", "stateful": "yes"}`)
		case 4:
			res.Realtime = spec.RealtimeSpec{FPS: 0, SteadyChunkFrames: 2, Stateful: false} // fps 0 falls back
		}
	}
	s := mustNew(t, rtSpec(16, 9, 9), rec.step, WithClock(clk), WithMaxChunks(7))
	chunks, err := collect(context.Background(), s)
	if err != nil {
		t.Fatalf("metadata broke play: %v", err)
	}
	checkSchedule(t, chunks)
	reqs := rec.requests()
	wantFrames := []int{9, 9, 4, 4, 4, 2, 2}
	wantFPS := []int{16, 16, 8, 8, 8, 8, 8}
	for i, r := range reqs {
		if r.Frames != wantFrames[i] || r.Spec.FPS != wantFPS[i] {
			t.Errorf("request %d: %d frames at %d fps, want %d at %d", i, r.Frames, r.Spec.FPS, wantFrames[i], wantFPS[i])
		}
		if chunks[i].Video.FPS != float64(wantFPS[i]) {
			t.Errorf("chunk %d video at %v fps, want %d", i, chunks[i].Video.FPS, wantFPS[i])
		}
	}
	// Chunk 4 made the session stateless: from chunk 5 on the state is nil.
	if reqs[4].State != 4 || reqs[5].State != nil || reqs[6].State != nil {
		t.Errorf("states %v %v %v, want 4 nil nil", reqs[4].State, reqs[5].State, reqs[6].State)
	}
	if got := chunks[3].Released.Sub(chunks[2].Released); got != 500*time.Millisecond {
		t.Errorf("chunk 2 (4 frames at 8 fps) lasts %v, want 500ms", got)
	}
}

func TestCancelBetweenChunks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 1, 1), rec.step, WithPacing(false))
	var got int
	var err error
	for c, e := range s.Chunks(ctx) {
		if e != nil {
			err = e
			break
		}
		got++
		if c.Index == 2 {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) || got != 3 || len(rec.requests()) != 3 {
		t.Fatalf("%d chunks, %d steps, error %v; want 3, 3, context.Canceled", got, len(rec.requests()), err)
	}
	wantErr(t, err, "stopped before chunk 3")
}

func TestCancelDuringStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	s := mustNew(t, rtSpec(8, 1, 1), func(ctx context.Context, req StepRequest) (StepResult, error) {
		calls++
		if req.Index == 1 {
			cancel()
			<-ctx.Done() // a long generation that honours ctx
			return StepResult{}, ctx.Err()
		}
		return StepResult{Frames: frameTensor(1, 1, 1, 0)}, nil
	}, WithPacing(false))
	chunks, err := collect(ctx, s)
	if !errors.Is(err, context.Canceled) || len(chunks) != 1 || calls != 2 {
		t.Fatalf("%d chunks, %d calls, %v; want 1, 2, context.Canceled", len(chunks), calls, err)
	}
	// A step that ignores ctx and returns some other error still reports the
	// cancellation.
	ctx2, cancel2 := context.WithCancel(context.Background())
	s = mustNew(t, rtSpec(8, 1, 1), func(ctx context.Context, req StepRequest) (StepResult, error) {
		cancel2()
		return StepResult{}, errors.New("device lost")
	}, WithPacing(false))
	_, err = collect(ctx2, s)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want one wrapping context.Canceled", err)
	}
	wantErr(t, err, "device lost")
}

// Cancelling while a paced chunk waits for its playback time stops the wait
// (the real clock; the chunk period is 9 s, so a test that does not stop
// promptly hangs visibly). It runs in a synctest bubble: the system clock
// is the bubble's, so the cancellation 20 ms in always falls in chunk 1's
// wait, and the wait costs no real time.
func TestCancelDuringPacingWait(t *testing.T) { synctest.Test(t, testCancelDuringPacingWait) }

func testCancelDuringPacingWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	s := mustNew(t, rtSpec(1, 9, 9), rec.step)
	var err error
	n := 0
	for _, e := range s.Chunks(ctx) {
		if e != nil {
			err = e
			break
		}
		n++
		time.AfterFunc(20*time.Millisecond, cancel) // chunk 1 waits ~9 s for its playback time
	}
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("%d chunks, error %v; want 1 and context.Canceled", n, err)
	}
	wantErr(t, err, "before releasing chunk 1")
	if st := s.Stats(); st.Chunks != 1 {
		t.Errorf("stats count %d released chunks, want 1", st.Chunks)
	}
	// Chunk 1 was generated but never released: resuming generates it again
	// (and, as the first chunk of the new stream, releases it at once).
	for c, err := range s.Chunks(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Index != 1 || c.Video.Frames.Data[0] != 1 {
			t.Errorf("resumed with chunk %d, want chunk 1 again", c.Index)
		}
		break
	}
	if n := len(rec.requests()); n != 3 {
		t.Errorf("%d steps, want 3 (chunk 1 generated twice)", n)
	}
}

func TestChannel(t *testing.T) {
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 2, 1), rec.step, WithPacing(false), WithMaxChunks(5))
	var got []Chunk
	for r := range s.Channel(context.Background(), 2) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		got = append(got, r.Chunk)
	}
	if len(got) != 5 || got[0].Video.Frames.Shape[0] != 2 || got[4].Index != 4 {
		t.Fatalf("%d chunks from the channel", len(got))
	}
	// Errors arrive on the channel too.
	s = mustNew(t, rtSpec(8, 2, 1), func(ctx context.Context, req StepRequest) (StepResult, error) {
		return StepResult{Frames: frameTensor(1, 1, 1, 0)}, nil
	}, WithPacing(false))
	var errs []error
	for r := range s.Channel(context.Background(), 0) {
		errs = append(errs, r.Err)
	}
	if len(errs) != 1 || errs[0] == nil || !strings.Contains(errs[0].Error(), "returned 1 frames, 2 were asked for") {
		t.Fatalf("channel items %v, want one frame-count error", errs)
	}
}

func TestChannelCancelStopsWithinOneChunk(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	s := mustNew(t, rtSpec(8, 1, 1), rec.step, WithPacing(false))
	const buffer = 1
	received := 0
	for r := range s.Channel(ctx, buffer) {
		if r.Err != nil {
			break
		}
		if received++; received == 3 {
			cancel()
		}
	}
	// The channel is closed: the producer has exited. At most the buffered
	// chunk and one chunk in flight were generated beyond what was received.
	if steps := len(rec.requests()); steps > received+buffer+1 {
		t.Errorf("%d steps ran for %d received chunks (buffer %d): generation did not stop within one chunk", steps, received, buffer)
	}
}

func TestSystemClockSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (SystemClock{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep on a cancelled context: %v", err)
	}
	if err := (SystemClock{}).Sleep(context.Background(), time.Millisecond); err != nil {
		t.Error(err)
	}
	if err := (SystemClock{}).Sleep(context.Background(), -time.Second); err != nil {
		t.Error(err)
	}
}
