package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// worldStep is a small deterministic world: the state is a float32 tensor
// [x, y, t] that the step moves by the controls (and mutates in place, as
// a careless step might, so that shared state would show), and every frame
// encodes the position and the frame's time.
func worldStep(_ context.Context, req StepRequest) (StepResult, error) {
	st, _ := req.State.(*tensor.Tensor)
	if st == nil {
		st = tensor.FromFloat32([]float32{0, 0, 0}, 3)
	}
	v, _ := st.Float32s()
	v[0] += float32(req.Controls["right"] - req.Controls["left"])
	v[1] += float32(req.Controls["forward"]*0.5 - req.Controls["backward"])
	px := make([]byte, req.Frames*2*2*3)
	for f := range req.Frames {
		for i := range 12 {
			px[f*12+i] = byte(int(v[0]*7) + int(v[1]*13) + int(v[2]) + f + i)
		}
	}
	v[2] += float32(req.Frames)
	for i, x := range v { // in place
		binary.LittleEndian.PutUint32(st.Data[4*i:], math.Float32bits(x))
	}
	return StepResult{Frames: tensor.FromUint8(px, int64(req.Frames), 2, 2, 3), State: st}, nil
}

var worldControls = []string{"forward", "backward", "left", "right"}

// script is the controls a test sets before chunk i (nil: leave them).
type script func(i int) Controls

func liveScript(i int) Controls {
	switch i {
	case 0:
		return Controls{"right": 1}
	case 2:
		return Controls{"forward": 1, "left": 0.5}
	case 5:
		return Controls{}
	case 6:
		return Controls{"backward": 1}
	}
	return nil
}

// play runs s to the end, setting sc's controls before each chunk, and
// returns the chunks' frames by index.
func play(t *testing.T, s *Session, sc script) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	for {
		s.mu.Lock()
		next := s.next
		s.mu.Unlock()
		if sc != nil {
			if c := sc(next); c != nil {
				if err := s.SetControls(c); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := false
		for c, err := range s.Chunks(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			out[c.Index] = bytes.Clone(c.Video.Frames.Data)
			got = true
			break // one chunk per call, so controls change between chunks
		}
		if !got {
			return out
		}
	}
}

func newWorld(t *testing.T, n int, opts ...Option) *Session {
	t.Helper()
	s, err := New(rtSpec(8, 4, 2, worldControls...), worldStep, append([]Option{WithPacing(false), WithClock(newFakeClock()), WithMaxChunks(n)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sameChunks(t *testing.T, what string, want, got map[int][]byte, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if want[i] == nil || got[i] == nil {
			t.Fatalf("%s: chunk %d missing (want %v, got %v)", what, i, want[i] != nil, got[i] != nil)
		}
		if !bytes.Equal(want[i], got[i]) {
			t.Fatalf("%s: chunk %d differs", what, i)
		}
	}
}

func TestSnapshotRestoreContinuesBitForBit(t *testing.T) {
	orig := newWorld(t, 0)
	first := play(t, withLimit(orig, 3), liveScript)
	snap, err := orig.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Next != 3 || snap.NextFrame != 4+2+2 || snap.FrameSize != [3]int64{2, 2, 3} {
		t.Fatalf("snapshot at chunk %d frame %d size %v, want 3, 8, [2 2 3]", snap.Next, snap.NextFrame, snap.FrameSize)
	}
	if want := (Controls{"forward": 1, "left": 0.5}); !equalControls(snap.Controls, want) {
		t.Fatalf("snapshot controls %v, want %v", snap.Controls, want)
	}
	if len(snap.Log.Changes) != 2 || snap.Log.Changes[1].From != 2 || snap.Log.End != 3 {
		t.Fatalf("snapshot log %+v, want changes at 0 and 2, end 3", snap.Log)
	}
	rest := play(t, withLimit(orig, 10), liveScript)

	// In process, through the encoding and through a sealed token.
	data, err := snap.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var decoded Snapshot
	if err := decoded.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	tok, err := Seal(snap, key)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := Open(tok, key)
	if err != nil {
		t.Fatal(err)
	}
	for name, sn := range map[string]Snapshot{"in process": snap, "binary": decoded, "token": opened} {
		r, err := Restore(sn, worldStep, WithPacing(false), WithMaxChunks(7))
		if err != nil {
			t.Fatal(name, err)
		}
		got := play(t, r, liveScript)
		if len(got) != 7 || got[2] != nil {
			t.Fatalf("%s: restored session gave chunks %v, want 3 to 9", name, keys(got))
		}
		sameChunks(t, name, rest, got, 3, 10)
	}
	_ = first
}

// withLimit sets the session's chunk limit (in chunks of the session).
func withLimit(s *Session, n int) *Session {
	s.mu.Lock()
	s.maxChunks, s.done = n, false
	s.mu.Unlock()
	return s
}

func keys(m map[int][]byte) []int {
	var out []int
	for k := range 64 {
		if m[k] != nil {
			out = append(out, k)
		}
	}
	return out
}

func equalControls(a, b Controls) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestForkSessionsAreIndependent(t *testing.T) {
	orig := newWorld(t, 3)
	play(t, orig, liveScript)
	snap, err := orig.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dirs := []Controls{{"left": 1}, {"right": 1}, {"forward": 1}, {"left": 1}}
	forks, err := Fork(snap, worldStep, 4, func(i int) []Option {
		return []Option{WithPacing(false), WithMaxChunks(5), WithControls(dirs[i])}
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := make([]map[int][]byte, 4)
	for i, f := range forks { // one after the other: each mutates its state in place
		runs[i] = play(t, f, nil)
	}
	sameChunks(t, "forks 0 and 3 (same controls)", runs[0], runs[3], 3, 8)
	if bytes.Equal(runs[0][7], runs[1][7]) || bytes.Equal(runs[1][7], runs[2][7]) {
		t.Fatal("forks with other controls gave the same frames")
	}
	// The snapshot is untouched by the forks: a fifth restore equals fork 0.
	again, err := Restore(snap, worldStep, WithPacing(false), WithMaxChunks(5), WithControls(Controls{"left": 1}))
	if err != nil {
		t.Fatal(err)
	}
	sameChunks(t, "restore after forks", runs[0], play(t, again, nil), 3, 8)
	// The original goes on as if nothing was forked: equal to an unforked run.
	ref := newWorld(t, 6)
	want := play(t, ref, liveScript)
	sameChunks(t, "original", want, play(t, withLimit(orig, 6), liveScript), 3, 6)
}

func TestReplayEqualsLive(t *testing.T) {
	live := newWorld(t, 9)
	want := play(t, live, liveScript)
	end, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if end.Log.Start != 0 || end.Log.End != 9 {
		t.Fatalf("log covers %d to %d, want 0 to 9", end.Log.Start, end.Log.End)
	}
	r, err := Replay(rtSpec(8, 4, 2, worldControls...), worldStep, end.Log)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetControls(Controls{"left": 1}); !errors.Is(err, ErrReplaying) {
		t.Fatalf("SetControls on a replay: %v, want ErrReplaying", err)
	}
	got := play(t, r, nil)
	if len(got) != 9 {
		t.Fatalf("replay gave %d chunks, want 9", len(got))
	}
	sameChunks(t, "replay", want, got, 0, 9)

	// From a snapshot in the middle, the rest of a later log.
	mid := newWorld(t, 4)
	play(t, mid, liveScript)
	ms, err := mid.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Restore(ms, worldStep, WithPacing(false), WithReplay(end.Log))
	if err != nil {
		t.Fatal(err)
	}
	got2 := play(t, r2, nil)
	if len(got2) != 5 {
		t.Fatalf("replay from chunk 4 gave chunks %v, want 4 to 8", keys(got2))
	}
	sameChunks(t, "replay from a snapshot", want, got2, 4, 9)
}

func TestReplayRefusesBadLogs(t *testing.T) {
	good := ControlsLog{Start: 0, End: 5, Changes: []ControlChange{{0, Controls{"left": 1}}, {2, Controls{}}}}
	sp := rtSpec(8, 4, 2, worldControls...)
	if _, err := Replay(sp, worldStep, good); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		log  ControlsLog
		want error
	}{
		"out of order":         {ControlsLog{End: 5, Changes: []ControlChange{{0, nil}, {3, nil}, {2, nil}}}, ErrLogOrder},
		"repeated chunk":       {ControlsLog{End: 5, Changes: []ControlChange{{0, nil}, {2, nil}, {2, nil}}}, ErrLogOrder},
		"change past the end":  {ControlsLog{End: 3, Changes: []ControlChange{{0, nil}, {3, nil}}}, ErrLogOrder},
		"end before start":     {ControlsLog{Start: 4, End: 2}, ErrLogOrder},
		"starts later":         {ControlsLog{Start: 2, End: 5, Changes: []ControlChange{{2, nil}}}, ErrLogTruncated},
		"first change missing": {ControlsLog{End: 5, Changes: []ControlChange{{2, nil}}}, ErrLogTruncated},
		"no changes":           {ControlsLog{End: 5}, ErrLogTruncated},
	} {
		_, err := Replay(sp, worldStep, tc.log)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// A log that ends before a restored snapshot's chunk.
	s := newWorld(t, 4)
	play(t, s, nil)
	snap, _ := s.Snapshot()
	if _, err := Restore(snap, worldStep, WithReplay(ControlsLog{End: 2, Changes: []ControlChange{{0, nil}}})); !errors.Is(err, ErrLogTruncated) {
		t.Errorf("short log from chunk 4: %v, want ErrLogTruncated", err)
	}
}

func TestRestoreRefusesFinishedAndForeign(t *testing.T) {
	s, err := New(rtSpec(8, 4, 2), func(ctx context.Context, req StepRequest) (StepResult, error) {
		res, err := worldStep(ctx, req)
		res.Done = req.Index == 1
		return res, err
	}, WithPacing(false), WithOrigin(Origin{Family: "tiny-world", Variant: "v1", Checkpoint: "sha256:aa", Task: "step"}))
	if err != nil {
		t.Fatal(err)
	}
	play(t, s, nil)
	done, err := s.Snapshot()
	if err != nil || !done.Done || done.Next != 2 {
		t.Fatalf("snapshot of a finished session: %+v, %v", done, err)
	}
	if _, err := Restore(done, worldStep, WithOrigin(done.Origin)); !errors.Is(err, ErrFinished) {
		t.Fatalf("restore a finished session: %v, want ErrFinished", err)
	}
	if _, err := Fork(done, worldStep, 2, nil); !errors.Is(err, ErrFinished) {
		t.Fatalf("fork a finished session: %v, want ErrFinished", err)
	}
	live := done
	live.Done = false
	for field, o := range map[string]Origin{
		"family":     {Family: "other", Variant: "v1", Checkpoint: "sha256:aa", Task: "step"},
		"variant":    {Family: "tiny-world", Variant: "v2", Checkpoint: "sha256:aa", Task: "step"},
		"checkpoint": {Family: "tiny-world", Variant: "v1", Checkpoint: "sha256:bb", Task: "step"},
		"task":       {Family: "tiny-world", Variant: "v1", Checkpoint: "sha256:aa", Task: "other"},
		"params":     {Family: "tiny-world", Variant: "v1", Checkpoint: "sha256:aa", Task: "step", Params: map[string]any{"speed": 3.0}},
	} {
		_, err := Restore(live, worldStep, WithOrigin(o))
		var me *OriginMismatchError
		if !errors.Is(err, ErrForeignModel) || !errors.As(err, &me) || me.Field != field {
			t.Errorf("%s differs: %v, want ErrForeignModel on %s", field, err, field)
		}
	}
	if _, err := Restore(live, worldStep); !errors.Is(err, ErrForeignModel) {
		t.Errorf("restore into a session without origin: %v, want ErrForeignModel", err)
	}
	if _, err := Restore(live, worldStep, WithOrigin(live.Origin)); err != nil {
		t.Errorf("restore into the same origin: %v", err)
	}
}

func TestRestoredSessionCountsItsOwnChunks(t *testing.T) {
	s := newWorld(t, 3)
	play(t, s, nil)
	snap, _ := s.Snapshot()
	r, err := Restore(snap, worldStep, WithPacing(false), WithMaxChunks(2))
	if err != nil {
		t.Fatal(err)
	}
	got := play(t, r, nil)
	if k := keys(got); len(k) != 2 || k[0] != 3 || k[1] != 4 {
		t.Fatalf("restored with 2 more chunks gave %v, want [3 4]", k)
	}
	again, _ := r.Snapshot()
	if again.Log.Start != 0 || again.Log.End != 5 {
		t.Fatalf("a restored session's log covers %d to %d, want 0 to 5 (the original's and its own)", again.Log.Start, again.Log.End)
	}
}

func TestControlsLogIsBounded(t *testing.T) {
	var l ControlsLog
	for i := range MaxLogChanges + 10 {
		l.record(i, Controls{"left": float64(i % 2)})
	}
	if len(l.Changes) != MaxLogChanges || l.Start != 10 || l.End != MaxLogChanges+10 {
		t.Fatalf("log of %d changes from %d to %d, want %d from 10", len(l.Changes), l.Start, l.End, MaxLogChanges)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(rtSpec(8, 4, 2, worldControls...), worldStep, l); !errors.Is(err, ErrLogTruncated) {
		t.Fatalf("replay from 0 of a log from 10: %v, want ErrLogTruncated", err)
	}
}

func TestSnapshotWhileStreaming(t *testing.T) {
	s := newWorld(t, 12, WithControls(Controls{"right": 1}))
	ch := s.Channel(context.Background(), 0)
	var snaps []Snapshot
	got := map[int][]byte{}
	for r := range ch {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		got[r.Chunk.Index] = bytes.Clone(r.Chunk.Video.Frames.Data)
		snap, err := s.Snapshot() // the producer may be generating the next chunk
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
	}
	for _, snap := range snaps {
		if snap.Next == 12 {
			continue // nothing left to compare
		}
		if snap.Next < 1 || snap.Log.End != snap.Next {
			t.Fatalf("snapshot at chunk %d with a log to %d", snap.Next, snap.Log.End)
		}
		r, err := Restore(snap, worldStep, WithPacing(false))
		if err != nil {
			t.Fatal(err)
		}
		rest := play(t, withLimit(r, 12-snap.Next), nil)
		sameChunks(t, "restored from a snapshot taken while streaming", got, rest, snap.Next, 12)
		if st := r.Stats(); st.Chunks != 12-snap.Next || st.Steady.Count != 12-snap.Next-1 {
			t.Fatalf("restored session stats %+v: want %d chunks, the first not steady", st, 12-snap.Next)
		}
	}
}
