// Package stream runs a realtime session: it calls a model's step function
// chunk after chunk and hands the frames out as a Go iterator or a channel,
// following the model's spec.RealtimeSpec.
//
// The first chunk asks for FirstChunkFrames frames and every later chunk for
// SteadyChunkFrames. When paced (the default) chunk k is released no earlier
// than its playback time at the spec's fps, counted from the release of the
// first chunk, which goes out as soon as it is ready; unpaced chunks go out
// as fast as they are generated. A stateful spec carries the state the step
// returns into the next step; the step also receives the current controls,
// checked against the spec's control list. A step may return realtime
// metadata; it is parsed with spec.RealtimeSpecFromPayload (so malformed
// metadata falls back instead of breaking play) and the resulting spec
// applies to later chunks. Cancelling the context stops the stream within
// one chunk.
//
// A session is a value: Session.Snapshot captures it at a chunk boundary,
// Restore and Fork continue it bit for bit in new sessions, WithReplay
// replays its controls log, and Seal and Open carry a snapshot as a signed,
// bounded token (docs/streaming.md, "Snapshots, forks and replay").
//
// The package is pure Go (no cgo) and starts no goroutine except the one
// behind Session.Channel.
package stream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// ErrBusy means a session was asked to stream while it already streams.
var ErrBusy = errors.New("stream: the session is already streaming")

// ErrBadOption is matched (errors.Is) by the error New returns when an
// option is refused (an unknown control, a negative chunk limit): the
// caller's input, not a failure of the stream.
var ErrBadOption = errors.New("stream: bad option")

// badOption is an option's error; it matches ErrBadOption and reads as
// the option's own message.
type badOption struct{ err error }

func (e badOption) Error() string        { return e.err.Error() }
func (e badOption) Unwrap() error        { return e.err }
func (e badOption) Is(target error) bool { return target == ErrBadOption }

// Controls are the control values of a step, keyed by control name from the
// realtime spec's control list. A value is the control's strength: 0 off,
// 1 fully on (a pressed key); any finite number is accepted.
type Controls map[string]float64

// StepRequest is what a step function is asked to produce.
type StepRequest struct {
	// Index is the chunk's position in the session, from 0.
	Index int
	// Frames is the number of frames wanted: the spec's FirstChunkFrames for
	// chunk 0, SteadyChunkFrames after.
	Frames int
	// FirstFrame is the index of the chunk's first frame in the session.
	FirstFrame int64
	// Controls are the current controls (a copy the step may keep).
	Controls Controls
	// State is what the previous step returned as State; nil for the first
	// chunk and always nil when the spec is not stateful.
	State any
	// Spec is the realtime spec in effect for this chunk.
	Spec wfspec.RealtimeSpec
}

// StepResult is what a step function returns.
type StepResult struct {
	// Frames are the chunk's frames: a tensor.Video, *tensor.Video or
	// *tensor.Tensor, uint8 [T, H, W, C] with T equal to the frames asked
	// for. The chunk keeps this memory: the step must not reuse it.
	Frames any
	// State is the session state to hand to the next step (stateful specs).
	State any
	// Realtime, when not nil, is realtime metadata from the model (a
	// RealtimeSpec, a map, or JSON); it updates the spec for later chunks.
	Realtime any
	// Done ends the session after this chunk.
	Done bool
	// Latency, when positive, is how long generating the chunk took where
	// the step knows better than the time around its call: a remote
	// session's step waits for the server, which paces its chunks, and
	// reports the server's own step time. Zero: the call's duration.
	Latency time.Duration
}

// StepFunc produces one chunk of a session. It should return promptly
// (with ctx.Err()) once ctx is cancelled.
type StepFunc func(ctx context.Context, req StepRequest) (StepResult, error)

// Chunk is one released chunk of frames.
type Chunk struct {
	// Index is the chunk's position in the session, from 0.
	Index int
	// Video holds the frames, uint8 [T, H, W, C], with the spec's fps.
	Video *tensor.Video
	// FirstFrame is the index of the chunk's first frame in the session.
	FirstFrame int64
	// Spec is the realtime spec the chunk was generated under.
	Spec wfspec.RealtimeSpec
	// Latency is how long the step took to generate the chunk: its call's
	// duration (the gate's and pacing's waits excluded), or what the step
	// reported (StepResult.Latency; a remote session: the server's step).
	Latency time.Duration
	// Ready is when generation finished.
	Ready time.Time
	// Due is the chunk's playback time when paced (zero when unpaced).
	Due time.Time
	// Released is when the chunk was handed out.
	Released time.Time
}

// Late reports whether a paced chunk was ready only after its playback time
// (an underrun: generation is slower than playback).
func (c Chunk) Late() bool { return !c.Due.IsZero() && c.Ready.After(c.Due) }

// Clock tells time and waits; tests inject a fake one with WithClock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d or until ctx is done.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Option configures New.
type Option func(*Session) error

// WithPacing turns pacing on (the default) or off.
func WithPacing(paced bool) Option {
	return func(s *Session) error { s.paced = paced; return nil }
}

// WithClock sets the clock used for pacing and latencies (default
// SystemClock).
func WithClock(c Clock) Option {
	return func(s *Session) error {
		if c == nil {
			return errors.New("stream: nil clock")
		}
		s.clock = c
		return nil
	}
}

// WithMaxChunks ends the session after n chunks (0, the default, means no
// limit: the stream runs until the step says Done, the context is
// cancelled or the consumer stops). A session restored from a snapshot
// counts its own chunks: n more after the snapshot's.
func WithMaxChunks(n int) Option {
	return func(s *Session) error {
		if n < 0 {
			return fmt.Errorf("stream: max chunks %d, want ≥ 0", n)
		}
		s.maxChunks = n
		return nil
	}
}

// WithControls sets the initial controls (checked like SetControls).
func WithControls(c Controls) Option {
	return func(s *Session) error {
		if err := s.SetControls(c); err != nil {
			return err
		}
		s.optControls, s.hasOptControls = maps.Clone(c), true
		return nil
	}
}

// WithControlsHook makes SetControls (and WithControls after it) call fn
// with the new controls once they are checked and before they are
// adopted: an error from fn leaves the controls as they were and is
// returned. Calls of fn are serialised in the order of the SetControls
// calls. A session whose steps run elsewhere (a remote stream) uses it to
// send controls to the running session at once.
func WithControlsHook(fn func(Controls) error) Option {
	return func(s *Session) error { s.controlsHook = fn; return nil }
}

// WithSnapshotHook makes Session.Snapshot return fn's snapshot: a
// session whose steps and state live elsewhere (a remote stream) asks
// for it there.
func WithSnapshotHook(fn func() (Snapshot, error)) Option {
	return func(s *Session) error { s.snapshotHook = fn; return nil }
}

// Pending returns the snapshot FromSnapshot and the log WithReplay among
// opts would start a session from (nil when none), without starting one:
// a backend whose steps run elsewhere (a remote stream) sends them to
// where the steps run. The options are applied to a scratch session; their
// errors are New's to report.
func Pending(opts ...Option) (snap *Snapshot, replay *ControlsLog) {
	s := &Session{spec: wfspec.DefaultRealtimeSpec(), controls: Controls{}, scratch: true}
	for _, o := range opts {
		if o != nil {
			o(s) // errors: New reports them
		}
	}
	return s.restore, s.replay
}

// Gate is called before each step of a session with the index of the chunk
// about to be generated; the step runs once it returns, and release (when
// not nil) is called when the step has returned. An error ends the stream
// as a step error would. A server uses it to bound how many steps run on
// its engine at once, and to hold chunk i until the remote consumer has
// taken chunk i-1 (so controls it sets in between apply to chunk i, as
// they do in-process).
type Gate func(ctx context.Context, index int) (release func(), err error)

// WithGate makes every step wait for g first (see Gate).
func WithGate(g Gate) Option {
	return func(s *Session) error { s.gate = g; return nil }
}

// latencyWindow is how many recent steady chunks the percentiles cover.
const latencyWindow = 1024

// Session is one resident realtime session. Its methods are safe for
// concurrent use; one stream at a time runs on it.
type Session struct {
	step      StepFunc
	paced     bool
	clock     Clock
	maxChunks int

	controlsMu   sync.Mutex // serialises SetControls with a hook
	controlsHook func(Controls) error
	snapshotHook func() (Snapshot, error)
	gate         Gate
	scratch      bool // Pending's: options only, SetControls does nothing

	mu        sync.Mutex
	spec      wfspec.RealtimeSpec
	controls  Controls
	state     any
	next      int   // index of the next chunk
	nextFrame int64 // index of the next chunk's first frame
	frameDims [3]int64
	done      bool
	ended     bool // the step said Done
	streaming bool
	stats     statsAcc

	origin         Origin
	start          int          // index of this session's first chunk (a restored session's: the snapshot's Next)
	log            ControlsLog  // the controls applied so far
	replay         *ControlsLog // when set, the controls come from it and the session ends at its End
	restore        *Snapshot    // pending FromSnapshot, applied by New after the options
	optControls    Controls     // WithControls' controls, applied again over a restored snapshot's
	hasOptControls bool
}

// New returns a session that produces chunks with step under spec (nil
// means spec.DefaultRealtimeSpec()).
func New(spec *wfspec.RealtimeSpec, step StepFunc, opts ...Option) (*Session, error) {
	if step == nil {
		return nil, errors.New("stream: nil step function")
	}
	sp := wfspec.DefaultRealtimeSpec()
	if spec != nil {
		sp = *spec
		sp.Controls = slices.Clone(spec.Controls)
	}
	if err := checkSpec(sp); err != nil {
		return nil, err
	}
	s := &Session{step: step, paced: true, clock: SystemClock{}, spec: sp, controls: Controls{}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, badOption{err}
		}
	}
	if s.restore != nil {
		if err := s.applySnapshot(s.restore); err != nil {
			return nil, err
		}
		s.restore = nil
	}
	if s.replay != nil {
		if err := s.startReplay(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkSpec rejects a spec no stream can follow.
func checkSpec(s wfspec.RealtimeSpec) error {
	if s.FPS < 1 {
		return fmt.Errorf("stream: realtime spec fps %d, want ≥ 1", s.FPS)
	}
	if s.FirstChunkFrames < 1 || s.SteadyChunkFrames < 1 {
		return fmt.Errorf("stream: realtime spec chunk frames %d (first) and %d (steady), want ≥ 1", s.FirstChunkFrames, s.SteadyChunkFrames)
	}
	return nil
}

// Spec returns the realtime spec in effect for the next chunk.
func (s *Session) Spec() wfspec.RealtimeSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spec
	sp.Controls = slices.Clone(s.spec.Controls)
	return sp
}

// SetControls replaces the controls; they apply from the next chunk. Every
// name must be in the spec's control list and every value finite; on error
// the controls stay as they were.
func (s *Session) SetControls(c Controls) error {
	if s.scratch {
		return nil
	}
	if s.replay != nil {
		return ErrReplaying
	}
	s.controlsMu.Lock()
	defer s.controlsMu.Unlock()
	if err := s.checkControls(c); err != nil {
		return err
	}
	if s.controlsHook != nil {
		if err := s.controlsHook(maps.Clone(c)); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.controls = maps.Clone(c)
	if s.controls == nil {
		s.controls = Controls{}
	}
	return nil
}

// checkControls checks controls against the current spec.
func (s *Session) checkControls(c Controls) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(c)) {
		if !slices.Contains(s.spec.Controls, name) {
			if len(s.spec.Controls) == 0 {
				return fmt.Errorf("stream: unknown control %q: the realtime spec has no controls", name)
			}
			return fmt.Errorf("stream: unknown control %q (known: %s)", name, strings.Join(s.spec.Controls, ", "))
		}
		if v := c[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("stream: control %q is %v, want a finite number", name, v)
		}
	}
	return nil
}

// Paced reports whether chunks are released at their playback time.
func (s *Session) Paced() bool { return s.paced }

// MaxChunks returns the chunk limit (0: none).
func (s *Session) MaxChunks() int { return s.maxChunks }

// Controls returns a copy of the current controls.
func (s *Session) Controls() Controls {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.controls)
}

// Done reports whether the session has ended (the step said Done, the
// max chunk count was reached or a replay's log ran out).
func (s *Session) Done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Result is one item of Session.Channel: a chunk, or the error that ended
// the stream.
type Result struct {
	// Chunk is the released chunk (zero when Err is set).
	Chunk Chunk
	// Err, when set, is the error that ended the stream.
	Err error
}

// Channel runs the stream in a goroutine and delivers it on a channel with
// the given buffer, which is closed when the stream ends. Cancel ctx to stop
// early: the goroutine then exits within one chunk (the final cancellation
// error may not be delivered). A consumer that stops reading must cancel
// ctx, or the goroutine waits for it forever.
func (s *Session) Channel(ctx context.Context, buffer int) <-chan Result {
	ch := make(chan Result, max(buffer, 0))
	go func() {
		defer close(ch)
		for c, err := range s.Chunks(ctx) {
			select {
			case ch <- Result{Chunk: c, Err: err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// Chunks returns the stream as an iterator. Each item is a chunk, or an
// error that ends the stream: a step error, a chunk that breaks the
// contract (wrong frame count, dtype or size), cancellation of ctx, or
// ErrBusy when the session already streams. Stopping the loop early ends
// the stream at once. A later call resumes the session where it stopped
// (same state and chunk numbering; pacing starts afresh); a chunk that was
// generated but not released is generated again.
func (s *Session) Chunks(ctx context.Context) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		s.mu.Lock()
		if s.streaming {
			s.mu.Unlock()
			yield(Chunk{}, ErrBusy)
			return
		}
		s.streaming = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.streaming = false
			s.mu.Unlock()
		}()
		s.run(ctx, yield)
	}
}

// run is one stream: generate, check, wait for the playback time, release.
func (s *Session) run(ctx context.Context, yield func(Chunk, error) bool) {
	start := s.clock.Now()
	var anchor time.Time     // release time of this run's first chunk
	var played time.Duration // playback length of the chunks released since
	for first := true; ; first = false {
		req, ok := s.request()
		if !ok {
			return
		}
		if err := ctx.Err(); err != nil {
			yield(Chunk{}, fmt.Errorf("stream: stopped before chunk %d: %w", req.Index, err))
			return
		}
		var release func()
		if s.gate != nil {
			var err error
			if release, err = s.gate(ctx, req.Index); err != nil {
				yield(Chunk{}, fmt.Errorf("stream: chunk %d: %w", req.Index, err))
				return
			}
			// The controls may have changed while the gate held the step.
			if req, ok = s.request(); !ok {
				if release != nil {
					release()
				}
				return
			}
		}
		t0 := s.clock.Now()
		res, err := s.step(ctx, req)
		ready := s.clock.Now()
		if release != nil {
			release()
		}
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
			yield(Chunk{}, fmt.Errorf("stream: chunk %d: step: %w", req.Index, err))
			return
		}
		video, err := s.frames(res.Frames, req)
		if err != nil {
			yield(Chunk{}, fmt.Errorf("stream: chunk %d: %w", req.Index, err))
			return
		}
		c := Chunk{
			Index:      req.Index,
			Video:      video,
			FirstFrame: req.FirstFrame,
			Spec:       req.Spec,
			Latency:    ready.Sub(t0),
			Ready:      ready,
		}
		if res.Latency > 0 {
			c.Latency = res.Latency
		}
		if s.paced {
			if first {
				anchor = ready
			}
			c.Due = anchor.Add(played)
			if wait := c.Due.Sub(s.clock.Now()); wait > 0 {
				if err := s.clock.Sleep(ctx, wait); err != nil {
					yield(Chunk{}, fmt.Errorf("stream: stopped before releasing chunk %d: %w", req.Index, err))
					return
				}
			}
			played += playback(req.Frames, req.Spec.FPS)
		}
		c.Released = s.clock.Now()
		s.commit(req, res, c, ready.Sub(start))
		if !yield(c, nil) {
			return
		}
	}
}

// playback is how long n frames play at fps.
func playback(n, fps int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / int64(fps))
}

// request builds the next step request, or reports that the session is over.
func (s *Session) request() (StepRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || (s.maxChunks > 0 && s.next-s.start >= s.maxChunks) {
		s.done = true
		return StepRequest{}, false
	}
	if s.replay != nil {
		if s.next >= s.replay.End {
			s.done = true
			return StepRequest{}, false
		}
		s.controls = s.replay.At(s.next)
	}
	req := StepRequest{
		Index:      s.next,
		Frames:     s.spec.SteadyChunkFrames,
		FirstFrame: s.nextFrame,
		Controls:   Controls{},
		Spec:       s.spec,
	}
	req.Spec.Controls = slices.Clone(s.spec.Controls)
	if s.next == 0 {
		req.Frames = s.spec.FirstChunkFrames
	}
	for name, v := range s.controls { // controls the spec dropped are left out
		if slices.Contains(s.spec.Controls, name) {
			req.Controls[name] = v
		}
	}
	if s.spec.Stateful {
		// The step gets a copy: a step that changes its state in place
		// (or an engine that writes into its input) must not change the
		// session's, which a Snapshot taken meanwhile reads.
		st, err := cloneValue(s.state)
		if err != nil { // nested too deep to copy (Snapshot refuses it too)
			st = s.state
		}
		req.State = st
	}
	return req, true
}

// frames checks a step's frames against the request and earlier chunks.
func (s *Session) frames(v any, req StepRequest) (*tensor.Video, error) {
	var t *tensor.Tensor
	switch x := v.(type) {
	case tensor.Video:
		t = x.Frames
	case *tensor.Video:
		if x != nil {
			t = x.Frames
		}
	case *tensor.Tensor:
		t = x
	case nil:
	default:
		return nil, fmt.Errorf("frames are %T, want tensor.Video, *tensor.Video or *tensor.Tensor", v)
	}
	if t == nil {
		return nil, errors.New("the step returned no frames")
	}
	video, err := tensor.AsVideo(t, float64(req.Spec.FPS))
	if err != nil {
		return nil, err
	}
	if t.Shape[1] < 1 || t.Shape[2] < 1 {
		return nil, fmt.Errorf("frames are %v, want at least 1×1 pixels", t.Shape)
	}
	if n := t.Shape[0]; n != int64(req.Frames) {
		return nil, fmt.Errorf("the step returned %d frames, %d were asked for", n, req.Frames)
	}
	dims := [3]int64{t.Shape[1], t.Shape[2], t.Shape[3]}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frameDims != ([3]int64{}) && dims != s.frameDims {
		return nil, fmt.Errorf("frames are %d×%d×%d (H×W×C), earlier chunks were %d×%d×%d", dims[0], dims[1], dims[2], s.frameDims[0], s.frameDims[1], s.frameDims[2])
	}
	return video, nil
}

// commit records a released chunk: state, spec update, counters, stats.
func (s *Session) commit(req StepRequest, res StepResult, c Chunk, sinceStart time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = req.Index + 1
	s.nextFrame = req.FirstFrame + int64(req.Frames)
	s.frameDims = [3]int64{c.Video.Frames.Shape[1], c.Video.Frames.Shape[2], c.Video.Frames.Shape[3]}
	if s.spec.Stateful {
		s.state = res.State
	}
	if res.Realtime != nil {
		cur := s.spec
		next := wfspec.RealtimeSpecFromPayload(res.Realtime, &cur)
		if checkSpec(next) == nil {
			s.spec = next
		}
		if !s.spec.Stateful {
			s.state = nil
		}
	}
	if res.Done {
		s.done = true
		s.ended = true
	}
	s.log.record(req.Index, req.Controls)
	s.stats.add(c, sinceStart, req.Index == s.start)
}

// Stats are the latency figures of a session.
type Stats struct {
	// Chunks and Frames count what was released.
	Chunks int
	Frames int64
	// FirstChunk is the time from the start of the first stream to the first
	// chunk being ready: the latency a viewer waits before play starts (a
	// restored session's first chunk is the snapshot's next).
	FirstChunk time.Duration
	// Steady summarises the generation latency of the chunks after the first.
	Steady Summary
	// Late counts paced chunks that were ready only after their playback
	// time (underruns).
	Late int
}

// Summary summarises durations. Count, Min, Max and Mean cover every chunk;
// P50 and P95 the most recent 1024.
type Summary struct {
	// Count is the number of chunks summarised.
	Count int
	// Min, Max and Mean are over every chunk.
	Min, Max, Mean time.Duration
	// P50 and P95 are nearest-rank percentiles over the most recent chunks.
	P50, P95 time.Duration
}

// String formats a summary for logs.
func (s Summary) String() string {
	if s.Count == 0 {
		return "no chunks"
	}
	return fmt.Sprintf("n=%d mean=%v p50=%v p95=%v min=%v max=%v", s.Count, s.Mean, s.P50, s.P95, s.Min, s.Max)
}

// statsAcc accumulates Stats.
type statsAcc struct {
	chunks     int
	frames     int64
	first      time.Duration
	late       int
	count      int
	min, max   time.Duration
	sum        time.Duration
	recent     []time.Duration // ring of the latest latencies
	recentNext int
}

func (a *statsAcc) add(c Chunk, sinceStart time.Duration, first bool) {
	a.chunks++
	a.frames += c.Video.Frames.Shape[0]
	if c.Late() {
		a.late++
	}
	if first {
		a.first = sinceStart
		return
	}
	d := c.Latency
	if a.count == 0 || d < a.min {
		a.min = d
	}
	if d > a.max {
		a.max = d
	}
	a.count++
	a.sum += d
	if len(a.recent) < latencyWindow {
		a.recent = append(a.recent, d)
	} else {
		a.recent[a.recentNext] = d
		a.recentNext = (a.recentNext + 1) % latencyWindow
	}
}

// Stats returns the session's latency figures so far.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.stats
	st := Stats{Chunks: a.chunks, Frames: a.frames, FirstChunk: a.first, Late: a.late}
	if a.count > 0 {
		r := slices.Clone(a.recent)
		slices.Sort(r)
		st.Steady = Summary{
			Count: a.count,
			Min:   a.min,
			Max:   a.max,
			Mean:  a.sum / time.Duration(a.count),
			P50:   percentile(r, 50),
			P95:   percentile(r, 95),
		}
	}
	return st
}

// percentile returns the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
