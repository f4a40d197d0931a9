package worldmodel

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// requirePython skips the test, saying why, unless the interpreter has
// torch and numpy.
func requirePython(t testing.TB) {
	t.Helper()
	out, err := exec.Command(Python, "-c", "import torch, numpy").CombinedOutput()
	if err != nil {
		t.Skipf("skipping: %s cannot import torch and numpy (scripts/setup.sh installs python3-torch): %v\n%s", Python, err, out)
	}
}

func TestSpriteStopsAtWalls(t *testing.T) {
	s := State{Sprite: Point{2, 26}, Ball: Point{10, 10}, Velocity: Point{1, 1}}
	for _, c := range []struct {
		a    Action
		want Point
	}{
		{Left, Point{1, 26}}, {Left, Point{1, 26}}, // 2 → 1: the wall stops it a pixel early
		{Down, Point{1, 27}}, {Down, Point{1, 27}},
		{Up, Point{1, 25}}, {None, Point{1, 25}},
		{Right, Point{3, 25}},
	} {
		s = s.Step(c.a)
		if s.Sprite != c.want {
			t.Fatalf("after %v: sprite at %v, want %v", c.a, s.Sprite, c.want)
		}
	}
	s.Sprite = Point{26, 1}
	if s = s.Step(Right); s.Sprite.X != spriteMax {
		t.Errorf("right from 26: x %d, want %d", s.Sprite.X, spriteMax)
	}
}

func TestBallBounces(t *testing.T) {
	// Along x: 2, 1 (touching the wall), then back; along y: 28, 29, back.
	s := State{Sprite: Point{10, 10}, Ball: Point{2, 28}, Velocity: Point{-1, 1}}
	var xs, ys []int
	for range 4 {
		s = s.Step(None)
		xs, ys = append(xs, s.Ball.X), append(ys, s.Ball.Y)
	}
	if want := []int{1, 2, 3, 4}; !equalInts(xs, want) {
		t.Errorf("x: %v, want %v", xs, want)
	}
	if want := []int{29, 28, 27, 26}; !equalInts(ys, want) {
		t.Errorf("y: %v, want %v", ys, want)
	}
	if s.Velocity != (Point{1, -1}) || !s.Valid() {
		t.Errorf("state %+v after the bounces", s)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFrame(t *testing.T) {
	s := State{Sprite: Point{5, 6}, Ball: Point{7, 9}, Velocity: Point{1, 1}}
	f := s.AppendFrame(nil)
	if len(f) != FrameBytes {
		t.Fatalf("%d bytes", len(f))
	}
	at := func(x, y int) [3]uint8 { i := (y*Size + x) * 3; return [3]uint8(f[i : i+3]) }
	for _, c := range []struct {
		x, y int
		want int
	}{
		{0, 0, Wall}, {31, 17, Wall}, {17, 31, Wall}, {1, 1, Background},
		{5, 6, Sprite}, {8, 8, Sprite}, {9, 9, Background},
		{7, 9, Overlap}, {8, 9, Overlap}, {7, 10, Ball}, {8, 10, Ball},
	} {
		if got := at(c.x, c.y); got != Palette[c.want] {
			t.Errorf("pixel (%d,%d) %v, want class %d %v", c.x, c.y, got, c.want, Palette[c.want])
		}
	}
	// The sprite is found whole under the ball: the centre of x 5..8, y 6..9.
	x, y, ok := SpritePosition(f)
	if !ok || x != 6.5 || y != 7.5 {
		t.Errorf("sprite found at (%g, %g) %v, want (6.5, 7.5)", x, y, ok)
	}
	blank := State{Sprite: Point{5, 6}}.AppendFrame(nil)
	for i := range blank {
		blank[i] = 0
	}
	if _, _, ok := SpritePosition(blank); ok {
		t.Error("a sprite found in a black frame")
	}
}

func TestEpisodes(t *testing.T) {
	eps := RandomEpisodes(1, 50, 20)
	if again := RandomEpisodes(1, 50, 20); eps[49].Start != again[49].Start || eps[49].Actions[19] != again[49].Actions[19] {
		t.Error("RandomEpisodes differs for one seed")
	}
	seen := map[Action]int{}
	for _, e := range eps {
		if !e.Start.Valid() {
			t.Fatalf("invalid start %+v", e.Start)
		}
		for _, st := range e.States() {
			if !st.Valid() {
				t.Fatalf("invalid state %+v", st)
			}
		}
		for _, a := range e.Actions {
			seen[a]++
		}
		fr, st := e.Frames(), e.States()
		if !bytes.Equal(fr[len(fr)-FrameBytes:], st[len(st)-1].AppendFrame(nil)) {
			t.Fatal("Frames and States disagree")
		}
		if sf := e.StartFrames(); !bytes.Equal(sf[:FrameBytes], e.Start.AppendFrame(nil)) || len(sf) != 2*FrameBytes {
			t.Fatal("StartFrames does not start with the start state")
		}
	}
	for _, a := range Actions {
		if seen[a] < 150 {
			t.Errorf("action %v drawn %d times of 1000", a, seen[a])
		}
	}
	if got := Right.Controls(); len(got) != 1 || got["right"] != 1 {
		t.Errorf("Right.Controls() = %v", got)
	}
	if got := None.Controls(); len(got) != 0 {
		t.Errorf("None.Controls() = %v", got)
	}
}

// TestSimulatorMatchesPython runs random episodes, and episodes along the
// walls and into the corners, through train.py's simulator and compares
// every frame with Go's.
func TestSimulatorMatchesPython(t *testing.T) {
	requirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eps := RandomEpisodes(3, 40, 48)
	corner := func(s State, a Action) Episode {
		e := Episode{Start: s, Actions: make([]Action, 48)}
		for i := range e.Actions {
			e.Actions[i] = a
			if i%7 == 6 {
				e.Actions[i] = Actions[(int(a)+i)%5]
			}
		}
		return e
	}
	eps = append(eps,
		corner(State{Point{1, 1}, Point{1, 1}, Point{-1, -1}}, Up),
		corner(State{Point{27, 27}, Point{29, 29}, Point{1, 1}}, Right),
		corner(State{Point{14, 14}, Point{15, 15}, Point{1, -1}}, None),
		corner(State{Point{1, 27}, Point{1, 29}, Point{-1, 1}}, Left),
		corner(State{Point{27, 1}, Point{29, 1}, Point{1, -1}}, Down),
	)
	sim, _, err := PythonEpisodes(ctx, "", eps)
	if err != nil {
		t.Fatal(err)
	}
	per := 48 * FrameBytes
	if len(sim) != len(eps)*per {
		t.Fatalf("Python wrote %d bytes, want %d", len(sim), len(eps)*per)
	}
	for i, e := range eps {
		got, want := sim[i*per:(i+1)*per], e.Frames()
		if !bytes.Equal(got, want) {
			for f := 0; f < 48; f++ {
				if !bytes.Equal(got[f*FrameBytes:(f+1)*FrameBytes], want[f*FrameBytes:(f+1)*FrameBytes]) {
					t.Fatalf("episode %d (start %+v): frame %d differs (after actions %v)", i, e.Start, f, e.Actions[:f+1])
				}
			}
		}
	}
}

// Measure finds the ball as it finds the sprite: the simulator's own
// frames are all right; a rollout whose ball is gone from its last frame
// counts as a ball lost for good, and misses that step only.
func TestMeasureBall(t *testing.T) {
	eps := RandomEpisodes(5, 4, 6)
	var sims, rolls [][]byte
	for _, ep := range eps {
		f := ep.Frames()
		sims = append(sims, f)
		rolls = append(rolls, slices.Clone(f))
	}
	q, err := Measure(rolls, sims)
	if err != nil {
		t.Fatal(err)
	}
	if q.BallAccuracy != 1 || q.BallLost != 0 || q.PositionAccuracy != 1 || len(q.BallByStep) != 6 {
		t.Fatalf("the simulator against itself: %+v", q)
	}
	// Paint the ball over with the background in episode 0's last frame.
	last := rolls[0][5*FrameBytes:]
	for i := 0; i+3 <= len(last); i += 3 {
		if k := nearest(last[i : i+3]); k == Ball || k == Overlap {
			copy(last[i:i+3], Palette[Background][:])
		}
	}
	if q, err = Measure(rolls, sims); err != nil {
		t.Fatal(err)
	}
	if q.BallLost != 1 || q.BallByStep[5] != 0.75 || q.BallByStep[4] != 1 {
		t.Errorf("a ball erased from one last frame: lost %d, by step %v", q.BallLost, q.BallByStep)
	}
}

// Check holds the model to its goals: the sprite overall, the ball at
// every step index (one bad step is enough), no ball lost.
func TestQualityCheck(t *testing.T) {
	good := Quality{Episodes: 100, Steps: 4, PositionAccuracy: 0.95, BallByStep: []float64{1, 1, 0.99, 1}}
	if err := good.Check(); err != nil {
		t.Errorf("a model meeting its goals: %v", err)
	}
	for _, c := range []struct {
		name string
		q    func(*Quality)
		want string
	}{
		{"sprite", func(q *Quality) { q.PositionAccuracy = 0.89 }, "sprite within one pixel in 0.8900 of the steps, below 0.90"},
		{"one step's ball", func(q *Quality) { q.BallByStep = []float64{1, 1, 0.98, 1} }, "ball within one pixel in 0.9800 of the episodes at step 3, below 0.99"},
		{"a ball lost", func(q *Quality) { q.BallLost = 1 }, "the ball lost for good in 1 of 100 episodes"},
	} {
		q := good
		c.q(&q)
		if err := q.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
