package worldmodel

import (
	"fmt"
	"math/rand/v2"

	"github.com/worldfoundry/wfgen/runtime/stream"
)

// The simulator's sizes, in pixels: the frame (walls included), the sprite
// and the ball sides, and how far an action moves the sprite. train.py has
// the same numbers; TestSimulatorMatchesPython checks the two simulators
// agree.
const (
	Size       = 32
	SpriteSide = 4
	BallSide   = 2
	Move       = 2
)

// FrameBytes is the size of one uint8 [Size, Size, 3] frame.
const FrameBytes = Size * Size * 3

// The colour classes of a frame, indexes into Palette.
const (
	Background = iota
	Wall
	Sprite
	Ball
	Overlap // the ball over the sprite
)

// Palette holds the colours the simulator draws with, by class.
var Palette = [5][3]uint8{
	Background: {16, 20, 36},
	Wall:       {110, 116, 128},
	Sprite:     {250, 196, 40},
	Ball:       {64, 200, 250},
	Overlap:    {157, 198, 145},
}

// Action is what the player does in one step.
type Action int

// The actions, numbered as train.py numbers them.
const (
	None Action = iota
	Up
	Down
	Left
	Right
)

// Actions are every action, in order.
var Actions = []Action{None, Up, Down, Left, Right}

// String returns the action's name: its control's, or "none".
func (a Action) String() string {
	switch a {
	case None:
		return "none"
	case Up:
		return "up"
	case Down:
		return "down"
	case Left:
		return "left"
	case Right:
		return "right"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Controls returns the stream controls that make the model take the
// action: the action's control at 1 (the manifest's realtime controls are
// up, down, left and right), none for None.
func (a Action) Controls() stream.Controls {
	if a == None {
		return stream.Controls{}
	}
	return stream.Controls{a.String(): 1}
}

// Point is a position (a box's top-left pixel) or a velocity.
type Point struct{ X, Y int }

// State is the simulator's state: where the sprite and the ball are (their
// top-left pixels) and how the ball moves.
type State struct {
	Sprite   Point
	Ball     Point
	Velocity Point
}

// The ranges of the top-left corners, inside the one-pixel walls.
const (
	spriteMax = Size - 1 - SpriteSide
	ballMax   = Size - 1 - BallSide
)

// Step returns the state after action a: the sprite moves Move pixels the
// action's way, stopped by the walls, and the ball moves by its velocity,
// reversing an axis that would take it into a wall.
func (s State) Step(a Action) State {
	switch a {
	case Up:
		s.Sprite.Y -= Move
	case Down:
		s.Sprite.Y += Move
	case Left:
		s.Sprite.X -= Move
	case Right:
		s.Sprite.X += Move
	}
	s.Sprite.X = min(max(s.Sprite.X, 1), spriteMax)
	s.Sprite.Y = min(max(s.Sprite.Y, 1), spriteMax)
	s.Ball.X, s.Velocity.X = bounce(s.Ball.X, s.Velocity.X)
	s.Ball.Y, s.Velocity.Y = bounce(s.Ball.Y, s.Velocity.Y)
	return s
}

func bounce(b, v int) (int, int) {
	if n := b + v; n >= 1 && n <= ballMax {
		return n, v
	}
	return b - v, -v
}

// Classes returns the colour class of each pixel, [Size][Size] by row:
// walls around the edge, the sprite, then the ball over it (Overlap where
// the two meet).
func (s State) Classes() [Size][Size]uint8 {
	var c [Size][Size]uint8
	for i := range Size {
		c[0][i], c[Size-1][i], c[i][0], c[i][Size-1] = Wall, Wall, Wall, Wall
	}
	for y := s.Sprite.Y; y < s.Sprite.Y+SpriteSide; y++ {
		for x := s.Sprite.X; x < s.Sprite.X+SpriteSide; x++ {
			c[y][x] = Sprite
		}
	}
	for y := s.Ball.Y; y < s.Ball.Y+BallSide; y++ {
		for x := s.Ball.X; x < s.Ball.X+BallSide; x++ {
			if c[y][x] == Sprite {
				c[y][x] = Overlap
			} else {
				c[y][x] = Ball
			}
		}
	}
	return c
}

// AppendFrame appends the state's frame, uint8 [Size, Size, 3] RGB, to dst.
func (s State) AppendFrame(dst []byte) []byte {
	c := s.Classes()
	for y := range Size {
		for x := range Size {
			p := Palette[c[y][x]]
			dst = append(dst, p[0], p[1], p[2])
		}
	}
	return dst
}

// Valid reports whether the state is one the simulator can be in: both
// boxes inside the walls and a diagonal velocity of one pixel a step.
func (s State) Valid() bool {
	in := func(v, hi int) bool { return v >= 1 && v <= hi }
	unit := func(v int) bool { return v == 1 || v == -1 }
	return in(s.Sprite.X, spriteMax) && in(s.Sprite.Y, spriteMax) &&
		in(s.Ball.X, ballMax) && in(s.Ball.Y, ballMax) &&
		unit(s.Velocity.X) && unit(s.Velocity.Y)
}

// RandomState returns a state drawn uniformly from r: any sprite and ball
// position, any of the four diagonal velocities.
func RandomState(r *rand.Rand) State {
	sign := func() int { return 2*r.IntN(2) - 1 }
	return State{
		Sprite:   Point{1 + r.IntN(spriteMax), 1 + r.IntN(spriteMax)},
		Ball:     Point{1 + r.IntN(ballMax), 1 + r.IntN(ballMax)},
		Velocity: Point{sign(), sign()},
	}
}

// Episode is a start state and the actions taken from it.
type Episode struct {
	Start   State
	Actions []Action
}

// StartFrames returns the two frames a session starts from, uint8 [2, Size,
// Size, 3]: the start state's and the one after it with no action (the
// model reads the ball's velocity from their difference).
func (e Episode) StartFrames() []byte {
	b := e.Start.AppendFrame(make([]byte, 0, 2*FrameBytes))
	return e.Start.Step(None).AppendFrame(b)
}

// Frames returns what the simulator shows after each action, uint8 [T,
// Size, Size, 3] with T = len(Actions), starting from the second start
// frame.
func (e Episode) Frames() []byte {
	b := make([]byte, 0, len(e.Actions)*FrameBytes)
	s := e.Start.Step(None)
	for _, a := range e.Actions {
		s = s.Step(a)
		b = s.AppendFrame(b)
	}
	return b
}

// States returns the simulator's state after each action, as Frames draws
// them.
func (e Episode) States() []State {
	out := make([]State, len(e.Actions))
	s := e.Start.Step(None)
	for i, a := range e.Actions {
		s = s.Step(a)
		out[i] = s
	}
	return out
}

// RandomEpisodes returns n episodes of steps actions each, from random
// start states, every action drawn uniformly from the five: a fixed set for
// a seed.
func RandomEpisodes(seed uint64, n, steps int) []Episode {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	eps := make([]Episode, n)
	for i := range eps {
		eps[i].Start = RandomState(r)
		eps[i].Actions = make([]Action, steps)
		for j := range eps[i].Actions {
			eps[i].Actions[j] = Actions[r.IntN(len(Actions))]
		}
	}
	return eps
}
