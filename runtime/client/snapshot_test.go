package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// worldScript is the controls a player sets before chunk i (nil: none).
func worldScript(i int) stream.Controls {
	switch i {
	case 0:
		return stream.Controls{"right": 1}
	case 2:
		return stream.Controls{"forward": 1}
	case 5:
		return stream.Controls{"left": 1, "backward": 0.5}
	case 7:
		return stream.Controls{}
	}
	return nil
}

// playWorld plays s from chunk from to its end, one chunk per Chunks call
// so that sc's controls change between chunks, and returns the frames by
// chunk index.
func playWorld(t *testing.T, s *stream.Session, from int, sc func(int) stream.Controls) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	for next := from; ; next++ {
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
			if c.Index != next {
				t.Fatalf("chunk %d, want %d", c.Index, next)
			}
			out[c.Index] = bytes.Clone(c.Video.Frames.Data)
			got = true
			break
		}
		if !got {
			return out
		}
	}
}

func sameFrames(t *testing.T, what string, want, got map[int][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("%s: %d chunks, want %d (%d to %d)", what, len(got), to-from, from, to-1)
	}
	for i := from; i < to; i++ {
		if want[i] == nil || !bytes.Equal(want[i], got[i]) {
			t.Fatalf("%s: chunk %d differs from the live session's", what, i)
		}
	}
}

func TestStreamSnapshotRestoreForkReplay(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	cc, err := client.New(tinyworld.Spec(), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w := tinyworld.NewClient(cc)
	ctx := context.Background()
	params := tinyworld.StepParams{Speed: 3}
	unpaced := stream.WithPacing(false)

	// The live session: snapshot at chunk 3 (after chunks 0 to 2), 10 chunks.
	live, err := w.StepStream(ctx, params, unpaced, stream.WithMaxChunks(3))
	if err != nil {
		t.Fatal(err)
	}
	want := playWorld(t, live, 0, worldScript)
	snap, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Next != 3 || snap.Origin.Family != "tiny-world" || snap.Origin.Task != "step" || snap.Origin.Params["speed"] != 3.0 {
		t.Fatalf("snapshot at chunk %d of %+v", snap.Next, snap.Origin)
	}
	key := []byte("a replica-shared key, 32 bytes!!")
	tok, err := stream.Seal(snap, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of the tiny world at chunk 3: %d bytes sealed", len(tok))
	// The live run goes on to chunk 9 (a restored session counts its own
	// chunks, so 7 more).
	rest, err := w.StepStream(ctx, params, unpaced, stream.WithMaxChunks(7), stream.FromSnapshot(snap))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := w.StepStream(ctx, params, unpaced, stream.WithMaxChunks(10))
	if err != nil {
		t.Fatal(err)
	}
	full := playWorld(t, ref, 0, worldScript)
	sameFrames(t, "a fresh run's chunks 0-2", want, map[int][]byte{0: full[0], 1: full[1], 2: full[2]}, 0, 3)

	// Restored from the token, untyped and typed: chunks 3.. equal.
	opened, err := stream.Open(tok, key)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := cc.RestoreStream(ctx, opened, unpaced, stream.WithMaxChunks(7))
	if err != nil {
		t.Fatal(err)
	}
	sameFrames(t, "RestoreStream", full, playWorld(t, r1, 3, worldScript), 3, 10)
	sameFrames(t, "StepStream with FromSnapshot", full, playWorld(t, rest, 3, worldScript), 3, 10)

	// Four forks with their own controls from chunk 3: each equals a live
	// run that pressed the same from chunk 3.
	dirs := []stream.Controls{{"left": 1}, {"right": 1}, {"forward": 1}, {"backward": 1}}
	forks, err := cc.ForkStream(ctx, opened, 4, func(i int) []stream.Option {
		return []stream.Option{unpaced, stream.WithMaxChunks(4), stream.WithControls(dirs[i])}
	})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]bool{}
	for i, f := range forks {
		got := playWorld(t, f, 3, nil)
		alone, err := w.StepStream(ctx, params, unpaced, stream.WithMaxChunks(7))
		if err != nil {
			t.Fatal(err)
		}
		wantFork := playWorld(t, alone, 0, func(k int) stream.Controls {
			switch {
			case k < 3:
				return worldScript(k)
			case k == 3:
				return dirs[i]
			}
			return nil
		})
		sameFrames(t, "fork", wantFork, got, 3, 7)
		last[string(got[6])] = true
	}
	if len(last) != 4 {
		t.Fatalf("4 forks with other controls end in %d distinct frames", len(last))
	}

	// Replay: the start and the log of the live run give every frame.
	end, err := ref.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	rp, err := w.StepStream(ctx, params, unpaced, stream.WithReplay(end.Log))
	if err != nil {
		t.Fatal(err)
	}
	sameFrames(t, "replay", full, playWorld(t, rp, 0, nil), 0, 10)
	// From the snapshot at chunk 3 with the full log.
	rp3, err := cc.RestoreStream(ctx, opened, unpaced, stream.WithReplay(end.Log))
	if err != nil {
		t.Fatal(err)
	}
	sameFrames(t, "replay from chunk 3", full, playWorld(t, rp3, 3, nil), 3, 10)
}

func TestStreamSnapshotOfAnotherModelRefused(t *testing.T) {
	t.Parallel()
	dir := tiny.Dir(t)
	ctx := context.Background()
	cc, err := client.New(tinyworld.Spec(), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := cc.Stream(ctx, "step", map[string]any{"speed": 2.0}, stream.WithPacing(false), stream.WithMaxChunks(2))
	if err != nil {
		t.Fatal(err)
	}
	playWorld(t, s, 0, nil)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	// The same family and variant over another checkpoint file (a copy:
	// same bytes, other path), as a fine-tune would be.
	other := filepath.Join(t.TempDir(), "tiny-world.pt")
	data, err := os.ReadFile(filepath.Join(dir, "checkpoints", "tiny-world.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	oc, err := client.New(tinyworld.Spec(), client.WithCheckpointPath(other), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	check := func(what string, err error, field string) {
		t.Helper()
		var me *stream.OriginMismatchError
		if !errors.Is(err, stream.ErrForeignModel) || !errors.As(err, &me) || me.Field != field {
			t.Fatalf("%s: %v, want stream.ErrForeignModel on %s", what, err, field)
		}
	}
	_, err = oc.RestoreStream(ctx, snap)
	check("another checkpoint", err, "checkpoint")

	// Another family or variant, refused before anything loads.
	foreign := snap
	foreign.Origin.Family = "worldmodel"
	_, err = cc.RestoreStream(ctx, foreign)
	check("another family", err, "family")
	foreign = snap
	foreign.Origin.Variant = "large"
	_, err = cc.RestoreStream(ctx, foreign)
	check("another variant", err, "variant")

	// Other params: the restored session would not continue the original.
	_, err = cc.Stream(ctx, "step", map[string]any{"speed": 5.0}, stream.FromSnapshot(snap))
	check("other params", err, "params")

	// The same model restores.
	if _, err := cc.RestoreStream(ctx, snap); err != nil {
		t.Fatal(err)
	}
}
