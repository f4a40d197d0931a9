package worldmodel

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gen "github.com/worldfoundry/wfgen/generated/worldmodel"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the libtorch engine
)

// modelRoot returns the demo's model root, out/worldmodel at the top of the
// repository, training the model there first when it holds none for the
// current script (two to three minutes; the demo and these tests share it).
func modelRoot(t testing.TB) string {
	t.Helper()
	requirePython(t)
	root, err := filepath.Abs(filepath.Join("..", "..", "out", "worldmodel"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Ensure(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if rep != nil {
		t.Logf("trained in %.1fs: one-step pixel accuracy %.5f, frames %.4f", rep.Seconds, rep.PixelAccuracy, rep.FrameAccuracy)
	}
	return root
}

func newClient(t *testing.T, root string) *gen.Client {
	t.Helper()
	c, err := gen.New(client.WithCheckpointRoot(root), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGoAndPythonRolloutsAgree plays the same episodes through the
// generated client's stream (libtorch from Go) and through the checkpoint's
// step method in Python (python3-torch), and compares the frames byte for
// byte; Python's simulator must match Go's on them too.
func TestGoAndPythonRolloutsAgree(t *testing.T) {
	root := modelRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	eps := RandomEpisodes(11, 12, 32)
	sim, py, err := PythonEpisodes(ctx, filepath.Join(root, Checkpoint), eps)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, root)
	per := 32 * FrameBytes
	if len(py) != len(eps)*per || len(sim) != len(eps)*per {
		t.Fatalf("Python wrote %d rollout and %d simulator bytes, want %d", len(py), len(sim), len(eps)*per)
	}
	var rollouts, sims [][]byte
	for i, ep := range eps {
		got, err := Rollout(ctx, c, ep)
		if err != nil {
			t.Fatalf("episode %d: %v", i, err)
		}
		if !bytes.Equal(sim[i*per:(i+1)*per], ep.Frames()) {
			t.Errorf("episode %d: Python's simulator differs from Go's", i)
		}
		want := py[i*per : (i+1)*per]
		if !bytes.Equal(got, want) {
			for f := range 32 {
				if !bytes.Equal(got[f*FrameBytes:(f+1)*FrameBytes], want[f*FrameBytes:(f+1)*FrameBytes]) {
					t.Errorf("episode %d: frame %d of the Go rollout differs from Python's", i, f)
					break
				}
			}
		}
		rollouts, sims = append(rollouts, got), append(sims, ep.Frames())
	}
	q, err := Measure(rollouts, sims)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d episodes equal in Go and Python; against the simulator: %v", len(eps), q)
}

// TestRolloutQuality measures the model as the demo does: 100 random
// episodes of 32 actions through the generated client, against the
// simulator; the sprite and the ball must meet the demo's goals
// (Quality.Check).
func TestRolloutQuality(t *testing.T) {
	root := modelRoot(t)
	ctx := context.Background()
	q, _, err := Evaluate(ctx, newClient(t, root), RandomEpisodes(DemoSeed, DemoEpisodes, DemoSteps))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(q)
	if q.Episodes != DemoEpisodes || q.Steps != DemoSteps {
		t.Errorf("measured %d episodes of %d steps", q.Episodes, q.Steps)
	}
	if err := q.Check(); err != nil {
		t.Error(err)
	}
	if q.MeanPixelError > 2 {
		t.Errorf("mean pixel error %.3f, want at most 2 (of 255)", q.MeanPixelError)
	}
}

// TestStreamControls checks the streaming task's contract beyond
// rollouts: the checkpoint's own start without start frames, one frame per
// chunk, the strongest control winning, a weak one ignored, and the start
// field checked before anything runs.
func TestStreamControls(t *testing.T) {
	root := modelRoot(t)
	ctx := context.Background()
	c := newClient(t, root)
	play := func(p gen.PlayParams, controls ...stream.Controls) []*tensor.Video {
		t.Helper()
		s, err := c.PlayStream(ctx, p, stream.WithPacing(false), stream.WithMaxChunks(len(controls)), stream.WithControls(controls[0]))
		if err != nil {
			t.Fatal(err)
		}
		var out []*tensor.Video
		for ch, err := range s.Chunks(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.Video.Frames.Shape; len(got) != 4 || got[0] != 1 || got[1] != Size || got[2] != Size || got[3] != 3 {
				t.Fatalf("chunk %d shape %v, want [1 %d %d 3]", ch.Index, got, Size, Size)
			}
			out = append(out, ch.Video)
			if ch.Index+1 < len(controls) {
				if err := s.SetControls(controls[ch.Index+1]); err != nil {
					t.Fatal(err)
				}
			}
		}
		return out
	}
	x := func(v *tensor.Video) float64 {
		t.Helper()
		x, _, ok := SpritePosition(v.Frames.Data)
		if !ok {
			t.Fatal("no sprite in the frame")
		}
		return x
	}
	// The checkpoint's own start (train.py's DEFAULT_START): sprite at x 6.
	right := stream.Controls{"right": 1}
	v := play(gen.DefaultPlayParams(), right, right, right, stream.Controls{"right": 0.4}, stream.Controls{"left": 0.6, "right": 0.9})
	want := []float64{9.5, 11.5, 13.5, 13.5, 15.5} // centres: x+1.5
	for i, v := range v {
		if got := x(v); got != want[i] {
			t.Errorf("chunk %d: sprite centre x %g, want %g", i, got, want[i])
		}
	}

	p := gen.DefaultPlayParams()
	p.Start = tensor.FromUint8(make([]byte, FrameBytes), 1, Size, Size, 3)
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "start") {
		t.Errorf("one start frame: Validate gave %v, want an error naming start", err)
	}
}

// TestEnsureKeepsCachedModel: a root whose stamp matches is kept without
// running Python; any other stamp is not a match.
func TestEnsureKeepsCachedModel(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(Checkpoint)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, Checkpoint), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, stampFile), []byte(Stamp()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err := Ensure(context.Background(), root); rep != nil || err != nil {
		t.Errorf("Ensure on a current root: %+v, %v; want it kept", rep, err)
	}
	if err := os.WriteFile(filepath.Join(root, stampFile), []byte("0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cached(root) {
		t.Error("a root with another stamp counts as cached")
	}
}

// TestBallSurvivesWallPresses plays what lost the ball in issue 45's
// report: from the checkpoint's own start (sprite 6,20, ball 20,8 moving
// 1,1), holding right for 64 steps (the ball meets the sprite while the
// sprite is at the right wall), and pressing into the right wall and into
// the bottom-right corner; no episode may lose the ball, and it must be
// within one pixel in at least MinBallByStep of the steps. (Measured
// 2026-12-07: 1.0000, every frame exact, trained on misdrawn frames;
// 0.9961 before — one step of 256 a pixel off, none lost; the
// uniform-trained model lost it.)
func TestBallSurvivesWallPresses(t *testing.T) {
	root := modelRoot(t)
	start := State{Sprite: Point{X: 6, Y: 20}, Ball: Point{X: 20, Y: 8}, Velocity: Point{X: 1, Y: 1}}
	hold := func(s State, actions ...Action) Episode {
		e := Episode{Start: s}
		for len(e.Actions) < 64 {
			e.Actions = append(e.Actions, actions...)
		}
		return e
	}
	eps := []Episode{
		hold(start, Right),
		hold(State{Sprite: Point{X: 26, Y: 12}, Ball: Point{X: 10, Y: 20}, Velocity: Point{X: 1, Y: -1}}, Right),
		hold(start, Right, Down),
		hold(State{Sprite: Point{X: 20, Y: 20}, Ball: Point{X: 24, Y: 4}, Velocity: Point{X: 1, Y: 1}}, Down, Right),
	}
	q, _, err := Evaluate(context.Background(), newClient(t, root), eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(q)
	if q.BallAccuracy < MinBallByStep || q.BallLost != 0 {
		t.Errorf("the ball within one pixel in %.4f of the steps, lost in %d of %d episodes; want at least %.2f, none lost", q.BallAccuracy, q.BallLost, len(eps), MinBallByStep)
	}
}
