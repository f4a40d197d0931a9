package stream

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// ErrFinished is matched (errors.Is) by the error of restoring (or
// forking) a snapshot of a session whose step said Done.
var ErrFinished = errors.New("stream: the session has finished")

// ErrForeignModel is matched (errors.Is) by the error of restoring a
// snapshot into a session of another model, variant, checkpoint, task or
// params (see Origin); the error is a *OriginMismatchError.
var ErrForeignModel = errors.New("stream: the snapshot is from another model")

// ErrReplaying is returned by SetControls on a session that replays a
// controls log: its controls come from the log.
var ErrReplaying = errors.New("stream: the session replays a controls log; its controls cannot be set")

// ErrLogOrder is matched (errors.Is) by the error for a controls log whose
// changes are not in strictly increasing chunk order or lie outside the
// chunks it covers.
var ErrLogOrder = errors.New("stream: controls log out of order")

// ErrLogTruncated is matched (errors.Is) by the error for a controls log
// that lacks the chunks a replay needs: it starts after the session's first
// chunk, ends before it, or has no change at its own start.
var ErrLogTruncated = errors.New("stream: controls log truncated")

// MaxLogChanges bounds the changes a session's controls log keeps. A
// session whose controls changed more often keeps the latest MaxLogChanges
// changes: its log's Start moves past chunk 0, and a replay from the
// session's beginning is then refused with ErrLogTruncated (a restore
// from its snapshots still works).
const MaxLogChanges = 1 << 16

// ControlChange says which controls applied from chunk From on.
type ControlChange struct {
	// From is the index of the first chunk the controls applied to.
	From int `json:"from"`
	// Controls are the controls the step got (names the spec in force had).
	Controls Controls `json:"controls"`
}

// ControlsLog records which controls applied to each chunk of a session,
// chunks Start to End-1, as changes: a change holds until the next one.
// The first change is at Start.
//
// Its JSON form (a remote replay's "replay" parameter) is
// {"start": S, "end": E, "changes": [{"from": F, "controls": {...}}, ...]}.
type ControlsLog struct {
	// Start is the first chunk the log covers (0 unless it overflowed
	// MaxLogChanges).
	Start int `json:"start"`
	// End is one past the last chunk it covers.
	End int `json:"end"`
	// Changes are in strictly increasing From order, From in [Start, End).
	Changes []ControlChange `json:"changes"`
}

// Check reports whether the log is well formed: a wrapped ErrLogOrder for
// changes out of order or outside [Start, End), ErrLogTruncated for a log
// without a change at Start, and an error for a non-finite value.
func (l ControlsLog) Check() error {
	if l.Start < 0 || l.End < l.Start {
		return fmt.Errorf("%w: covers chunks %d to %d", ErrLogOrder, l.Start, l.End-1)
	}
	if l.End > l.Start && (len(l.Changes) == 0 || l.Changes[0].From != l.Start) {
		first := -1
		if len(l.Changes) > 0 {
			first = l.Changes[0].From
		}
		return fmt.Errorf("%w: it covers chunks from %d but its first change is at chunk %d", ErrLogTruncated, l.Start, first)
	}
	for i, c := range l.Changes {
		if c.From < l.Start || c.From >= l.End {
			return fmt.Errorf("%w: change %d is at chunk %d, outside chunks %d to %d", ErrLogOrder, i, c.From, l.Start, l.End-1)
		}
		if i > 0 && c.From <= l.Changes[i-1].From {
			return fmt.Errorf("%w: change %d is at chunk %d, after a change at chunk %d", ErrLogOrder, i, c.From, l.Changes[i-1].From)
		}
		for _, name := range slices.Sorted(maps.Keys(c.Controls)) {
			if v := c.Controls[name]; math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("stream: controls log: change %d: control %q is %v, want a finite number", i, name, v)
			}
		}
	}
	return nil
}

// At returns a copy of the controls that applied to chunk i (empty
// controls outside the log).
func (l ControlsLog) At(i int) Controls {
	k, _ := slices.BinarySearchFunc(l.Changes, i, func(c ControlChange, i int) int { return c.From - i })
	if k < len(l.Changes) && l.Changes[k].From == i {
		return cloneControls(l.Changes[k].Controls)
	}
	if k == 0 || i >= l.End {
		return Controls{}
	}
	return cloneControls(l.Changes[k-1].Controls)
}

// clone returns a copy of the log that shares no memory with it.
func (l ControlsLog) clone() ControlsLog {
	out := ControlsLog{Start: l.Start, End: l.End, Changes: make([]ControlChange, len(l.Changes))}
	for i, c := range l.Changes {
		out.Changes[i] = ControlChange{From: c.From, Controls: cloneControls(c.Controls)}
	}
	return out
}

// record notes that chunk i was generated with controls c.
func (l *ControlsLog) record(i int, c Controls) {
	if len(l.Changes) == 0 {
		l.Start = i
	}
	if n := len(l.Changes); n == 0 || !maps.Equal(l.Changes[n-1].Controls, c) {
		l.Changes = append(l.Changes, ControlChange{From: i, Controls: cloneControls(c)})
		if len(l.Changes) > MaxLogChanges {
			l.Changes = slices.Delete(l.Changes, 0, 1)
			l.Start = l.Changes[0].From
		}
	}
	l.End = i + 1
}

func cloneControls(c Controls) Controls {
	if c == nil {
		return Controls{}
	}
	return maps.Clone(c)
}

// Origin identifies what a session runs: the model (family, variant and
// checkpoint), the task and its params. A session's origin is set with
// WithOrigin (runtime/client sets it for every stream); snapshots carry it,
// and restoring a snapshot into a session of another origin is refused with
// ErrForeignModel. The zero Origin matches only itself.
type Origin struct {
	// Family and Variant are the model family and variant ids.
	Family, Variant string
	// Checkpoint identifies the checkpoint's bytes: "sha256:<hex>", or
	// "file:<path>:<size>:<mtime>" when no digest is known.
	Checkpoint string
	// Task is the streaming task's id.
	Task string
	// Params are the task's call params in the engine's value form (nil,
	// string, int64, float64, bool, *tensor.Tensor, []any, map[string]any).
	Params map[string]any
}

// OriginMismatchError is the error of restoring a snapshot into a session
// of another origin. It matches ErrForeignModel.
type OriginMismatchError struct {
	// Field is the first field that differs ("family", "variant",
	// "checkpoint", "task", "params").
	Field string
	// Snapshot and Session are that field's values, formatted.
	Snapshot, Session string
}

// Error names the field and both values.
func (e *OriginMismatchError) Error() string {
	return fmt.Sprintf("stream: the snapshot is from another model: its %s is %s, the session's %s", e.Field, e.Snapshot, e.Session)
}

// Is makes the error match ErrForeignModel.
func (e *OriginMismatchError) Is(target error) bool { return target == ErrForeignModel }

// match returns an *OriginMismatchError when o (a snapshot's) and session
// differ.
func (o Origin) match(session Origin) error {
	for _, f := range [...]struct{ name, snap, sess string }{
		{"family", o.Family, session.Family},
		{"variant", o.Variant, session.Variant},
		{"checkpoint", o.Checkpoint, session.Checkpoint},
		{"task", o.Task, session.Task},
	} {
		if f.snap != f.sess {
			return &OriginMismatchError{Field: f.name, Snapshot: fmt.Sprintf("%q", f.snap), Session: fmt.Sprintf("%q", f.sess)}
		}
	}
	a, errA := appendValue(nil, o.Params, 0)
	b, errB := appendValue(nil, session.Params, 0)
	if errA != nil || errB != nil || string(a) != string(b) {
		return &OriginMismatchError{Field: "params", Snapshot: fmt.Sprintf("%v", o.Params), Session: fmt.Sprintf("%v", session.Params)}
	}
	return nil
}

// WithOrigin sets what the session runs (see Origin): it is stamped on the
// session's snapshots and a snapshot restored into it must match it.
func WithOrigin(o Origin) Option {
	return func(s *Session) error {
		p, err := cloneValue(o.Params)
		if err != nil {
			return fmt.Errorf("stream: origin params: %w", err)
		}
		o.Params, _ = p.(map[string]any)
		s.origin = o
		return nil
	}
}

// Snapshot is a session at a chunk boundary: everything the next chunk
// depends on besides the step function. Restore (or FromSnapshot) starts a
// session from it whose chunks equal, bit for bit, those the original
// session produces with the same controls. Its State and Params are
// engine values (see Origin) for MarshalBinary; in process any value
// restores, and values of other types are shared, not copied.
type Snapshot struct {
	// Origin is the session's origin (WithOrigin).
	Origin Origin
	// Next is the index of the next chunk.
	Next int
	// NextFrame is the index of the next chunk's first frame.
	NextFrame int64
	// FrameSize is the H, W and C of the chunks so far (zero before the
	// first).
	FrameSize [3]int64
	// Spec is the realtime spec in force for the next chunk.
	Spec wfspec.RealtimeSpec
	// Controls are the controls in force (they apply to the next chunk).
	Controls Controls
	// State is the state the next step would get (nil when not stateful).
	State any
	// Log records the controls of the chunks so far (End == Next).
	Log ControlsLog
	// Done says the step ended the session: such a snapshot does not
	// restore (ErrFinished), though its log replays.
	Done bool
	// Token, when set, is the sealed token (Seal) the snapshot was read
	// from by Peek: a remote session's snapshot (its server sealed it)
	// has one, and a remote backend restores a snapshot by sending it —
	// the server trusts the token, not the fields beside it. In process
	// it is ignored; MarshalBinary does not encode it.
	Token []byte
}

// Snapshot returns the session at its chunk boundary: after the last
// released chunk (a chunk in flight is not in it). The snapshot shares no
// memory with the session. It can be taken while the session streams.
//
// A session whose steps run elsewhere (WithSnapshotHook: a remote
// stream) returns its hook's snapshot instead.
func (s *Session) Snapshot() (Snapshot, error) {
	if s.snapshotHook != nil {
		return s.snapshotHook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	state, err := cloneValue(s.state)
	if err != nil {
		return Snapshot{}, fmt.Errorf("stream: snapshot: state: %w", err)
	}
	params, _ := cloneValue(s.origin.Params) // checked by WithOrigin
	snap := Snapshot{
		Origin:    s.origin,
		Next:      s.next,
		NextFrame: s.nextFrame,
		FrameSize: s.frameDims,
		Spec:      s.spec,
		Controls:  cloneControls(s.controls),
		State:     state,
		Log:       s.log.clone(),
		Done:      s.ended,
	}
	snap.Origin.Params, _ = params.(map[string]any)
	snap.Spec.Controls = slices.Clone(s.spec.Controls)
	return snap, nil
}

// Check reports whether the snapshot can start a session: a valid spec,
// chunk and frame indexes, finite controls, a well-formed log ending at
// Next.
func (snap *Snapshot) Check() error {
	if err := checkSpec(snap.Spec); err != nil {
		return err
	}
	if snap.Next < 0 || snap.NextFrame < 0 {
		return fmt.Errorf("stream: snapshot at chunk %d, frame %d: want ≥ 0", snap.Next, snap.NextFrame)
	}
	for _, d := range snap.FrameSize {
		if d < 0 {
			return fmt.Errorf("stream: snapshot frame size %v: want ≥ 0", snap.FrameSize)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(snap.Controls)) {
		if v := snap.Controls[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("stream: snapshot control %q is %v, want a finite number", name, v)
		}
	}
	if err := snap.Log.Check(); err != nil {
		return err
	}
	if snap.Log.End != snap.Next {
		return fmt.Errorf("%w: the snapshot's log ends at chunk %d, the snapshot is at chunk %d", ErrLogTruncated, snap.Log.End, snap.Next)
	}
	return nil
}

// FromSnapshot makes New start the session from snap instead of chunk 0:
// snap's spec (replacing New's), state, chunk and frame indexes, controls
// (WithControls, given too, replaces them) and log. The session's origin
// (WithOrigin) must equal snap's (ErrForeignModel), and a snapshot of a
// finished session is refused (ErrFinished). The option's order among the
// others does not matter.
func FromSnapshot(snap Snapshot) Option {
	return func(s *Session) error {
		s.restore = &snap
		return nil
	}
}

// Restore returns a new session that continues snap with step (the step
// function of the session it was taken from, or one that computes the
// same): New with FromSnapshot(snap) and opts. A snapshot with an origin
// (every runtime/client stream's) restores only with WithOrigin of the same
// among opts; runtime/client's RestoreStream builds the step and adds it.
func Restore(snap Snapshot, step StepFunc, opts ...Option) (*Session, error) {
	return New(&snap.Spec, step, append(opts, FromSnapshot(snap))...)
}

// Fork restores snap into n independent sessions (each with its own copy
// of the state); opts(i), when not nil, gives session i's options (its
// controls, say).
func Fork(snap Snapshot, step StepFunc, n int, opts func(i int) []Option) ([]*Session, error) {
	if n < 0 {
		return nil, fmt.Errorf("stream: fork into %d sessions, want ≥ 0", n)
	}
	out := make([]*Session, n)
	for i := range out {
		var o []Option
		if opts != nil {
			o = opts(i)
		}
		s, err := Restore(snap, step, o...)
		if err != nil {
			return nil, fmt.Errorf("stream: fork %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// applySnapshot sets the session from snap (New, after the options).
func (s *Session) applySnapshot(snap *Snapshot) error {
	if snap.Done {
		return fmt.Errorf("stream: restore a snapshot at chunk %d: %w", snap.Next, ErrFinished)
	}
	if err := snap.Check(); err != nil {
		return fmt.Errorf("stream: restore: %w", err)
	}
	if err := snap.Origin.match(s.origin); err != nil {
		return err
	}
	state, err := cloneValue(snap.State)
	if err != nil {
		return fmt.Errorf("stream: restore: state: %w", err)
	}
	s.mu.Lock()
	s.spec = snap.Spec
	s.spec.Controls = slices.Clone(snap.Spec.Controls)
	s.state = state
	s.next, s.start = snap.Next, snap.Next
	s.nextFrame = snap.NextFrame
	s.frameDims = snap.FrameSize
	s.controls = cloneControls(snap.Controls)
	s.log = snap.Log.clone()
	s.mu.Unlock()
	if s.hasOptControls {
		if err := s.checkControls(s.optControls); err != nil {
			return badOption{err}
		}
		s.mu.Lock()
		s.controls = cloneControls(s.optControls)
		s.mu.Unlock()
	}
	return nil
}

// WithReplay makes the session replay log: the controls of chunk i are
// the log's (At(i)), SetControls is refused (ErrReplaying), and the session
// ends after the log's last chunk. The log must be well formed (Check) and
// cover the session's first chunk — chunk 0, or a restored snapshot's
// Next — (else ErrLogTruncated). With the step and the start (chunk 0 or
// the snapshot) of the logged session, every chunk equals the logged
// session's bit for bit.
func WithReplay(log ControlsLog) Option {
	return func(s *Session) error {
		l := log.clone()
		s.replay = &l
		return nil
	}
}

// Replay returns a session that replays log from chunk 0 with step under
// spec, unpaced (opts may turn pacing on): New with WithReplay(log).
func Replay(spec *wfspec.RealtimeSpec, step StepFunc, log ControlsLog, opts ...Option) (*Session, error) {
	return New(spec, step, append([]Option{WithPacing(false)}, append(opts, WithReplay(log))...)...)
}

// startReplay checks the replay log against the session's first chunk.
func (s *Session) startReplay() error {
	if err := s.replay.Check(); err != nil {
		return fmt.Errorf("stream: replay: %w", err)
	}
	if s.replay.Start > s.next || s.replay.End < s.next {
		return fmt.Errorf("stream: replay: %w: the log covers chunks %d to %d, the session starts at chunk %d", ErrLogTruncated, s.replay.Start, s.replay.End-1, s.next)
	}
	s.controls = s.replay.At(s.next)
	return nil
}

// cloneValue returns a deep copy of an engine value (see Origin); values of
// other types are returned as they are.
func cloneValue(v any) (any, error) { return cloneDepth(v, 0) }

func cloneDepth(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case *tensor.Tensor:
		return x.Clone(), nil
	case []any:
		if x == nil {
			return x, nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			c, err := cloneDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		if x == nil {
			return x, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := cloneDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return v, nil
}
