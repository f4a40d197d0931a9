"""Train the world model on a simulator of its own, or replay episodes with it.

The simulator is a walled 32x32 room seen from above, drawn in five colours:
a 4x4 sprite that the player moves 2 pixels a step (up, down, left, right or
not at all; a wall stops it), and a 2x2 ball that moves diagonally by
itself, 1 pixel a step on each axis, and bounces off the walls. The ball is
drawn over the sprite, in a blend of both colours where they overlap, so
both are always whole in a frame. Everything about it is deterministic; the
Go package examples/worldmodel has the same simulator (sim.go) and its tests
check the two agree pixel for pixel.

The model is an action-conditioned next-frame predictor: from the last two
frames and the action it predicts the next frame, pixel by pixel, as one of
the five colours (a small fully convolutional network over the frames'
colour classes). Its TorchScript checkpoint has the streaming method the
manifest (manifests/worldmodel.yaml) runs:

    step(num_frames: int, controls: List[float],
         start: Optional[Tensor] = None,
         state: Optional[Tensor] = None) -> Dict[str, Tensor]

controls are [up, down, left, right] (the realtime spec's control order);
the strongest control at 0.5 or more is the action, none below that. state
is the last two frames, uint8 [2, 32, 32, 3]; without it the session starts
from start (two frames of the same shape), or from the checkpoint's own
start frames. It returns {"frames": uint8 [num_frames, 32, 32, 3], "state":
the last two frames}, each frame predicted from the two before it.

    train: /usr/bin/python3 train.py train --out DIR
           writes DIR/checkpoints/worldmodel.pt and prints a JSON report.
    check: /usr/bin/python3 train.py check --episodes JSON --sim OUT
                                           [--model PT --rollout OUT]
           reads episodes ({"episodes": [{"sprite": [x, y], "ball": [x, y],
           "velocity": [vx, vy], "actions": [a, ...]}, ...]}, actions 0 none,
           1 up, 2 down, 3 left, 4 right), and writes what the simulator
           shows after each action to OUT (uint8 [E, T, 32, 32, 3], raw) and,
           with --model, what the checkpoint's step method makes of the same
           start frames and actions, called one frame at a time as the
           runtime's stream calls it.

Training draws fresh random transitions, most of them where the simulator is
hardest to learn: in each batch of 64, 24 start with the ball at or next to
the sprite (where they blend) and 16 with the ball and the sprite at walls or
in corners (bounces while the sprite is stopped); the other 24 are uniform.
Drawn uniformly, those cases are rare, and the model that learned them least
lost the ball in long rollouts (docs/worldmodel.md, "The ball"). In 12 of the
24 by the sprite, the input frames are drawn as the model's own slips draw
them: one pixel at or next to the ball toggled between with and without the
ball (a wall pixel drawn as the ball), in the earlier frame, the later one or
both, while the frame to predict is the simulator's. A rollout feeds the
model its own frames: a model that never saw a wrong pixel kept the rare one
it drew and lost the ball over hundreds of steps; one trained on them puts
the ball back the next frame or so. In 8 of the 24 uniform ones, a stray
ball pixel is drawn a few pixels from the ball (in the earlier frame, the
later or both, moved diagonally between them): a slip the ball has moved
away from, which a model that never saw one carried along as a second,
ghost ball until the ball's centre was off. And 8 of the 16 at walls have
the sprite against one wall and the ball by or under it at the same wall, 4
of them misdrawn as the 12: there the ball bounces under the sprite, and a
model that had them only by chance drew the ball as the sprite until it
vanished.

Training is deterministic: fixed seeds, one thread and
torch.use_deterministic_algorithms, so the same torch build writes the same
weights every time. It takes two to three minutes on one CPU core. One thread,
not two: on a machine whose cores are busy with other work, OpenMP's
spinning threads made two-thread training ten times slower, not faster.
"""

import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import nn

SIZE = 32      # frame height and width, walls included
SPRITE = 4     # sprite side
BALL = 2       # ball side
MOVE = 2       # pixels the sprite moves per step
# Colours: background, wall, sprite, ball, ball over sprite.
PALETTE = [[16, 20, 36], [110, 116, 128], [250, 196, 40], [64, 200, 250], [157, 198, 145]]
CLASSES = len(PALETTE)
NONE, UP, DOWN, LEFT, RIGHT = range(5)
ACTION_DX = np.array([0, 0, 0, -MOVE, MOVE])
ACTION_DY = np.array([0, -MOVE, MOVE, 0, 0])
# The checkpoint's own start: sprite, ball and ball velocity.
DEFAULT_START = ((6, 20), (20, 8), (1, 1))

SEED = 7
STEPS = 2500
BATCH = 64
NEAR = 24     # transitions of a batch that start with the ball by the sprite
WALL = 16     # ... and with the ball and the sprite at walls
MISDRAWN = 12  # of the NEAR, those whose input frames have a ball pixel toggled
WALL_BALL = 8  # of the WALL, those with the ball by or under the sprite at one wall
WALL_MISDRAWN = 4  # of those, the ones misdrawn as the NEAR ones are
STRAY = 8      # of the uniform (the last of a batch), those with a stray ball pixel drawn in
THREADS = 1
WIDTH = 32     # channels of the network


# ---------------------------------------------------------------- simulator

def step(s, a):
    """The next states of states s (a tuple of int arrays sx, sy, bx, by, vx, vy) under actions a."""
    sx, sy, bx, by, vx, vy = s
    hi = SIZE - 1 - SPRITE
    sx = np.clip(sx + ACTION_DX[a], 1, hi)
    sy = np.clip(sy + ACTION_DY[a], 1, hi)

    def axis(b, v):
        n = b + v
        out = (n < 1) | (n > SIZE - 1 - BALL)
        v = np.where(out, -v, v)
        return np.where(out, b + v, n), v

    bx, vx = axis(bx, vx)
    by, vy = axis(by, vy)
    return sx, sy, bx, by, vx, vy


def render(s):
    """Colour classes uint8 [N, SIZE, SIZE] of states s."""
    sx, sy, bx, by = s[:4]
    n = len(sx)
    r = np.arange(SIZE)
    c = np.zeros((n, SIZE, SIZE), np.uint8)
    c[:, 0, :] = c[:, -1, :] = c[:, :, 0] = c[:, :, -1] = 1

    def box(x, y, side):
        rows = (r >= y[:, None]) & (r < y[:, None] + side)
        cols = (r >= x[:, None]) & (r < x[:, None] + side)
        return rows[:, :, None] & cols[:, None, :]

    c[box(sx, sy, SPRITE)] = 2
    m = box(bx, by, BALL)
    c[m] = np.where(c[m] == 2, 4, 3)
    return c


def pixels(classes):
    """RGB uint8 [..., SIZE, SIZE, 3] of colour classes."""
    return np.array(PALETTE, np.uint8)[classes]


def random_states(rng, n):
    return (rng.integers(1, SIZE - SPRITE, n), rng.integers(1, SIZE - SPRITE, n),
            rng.integers(1, SIZE - BALL, n), rng.integers(1, SIZE - BALL, n),
            rng.choice([-1, 1], n), rng.choice([-1, 1], n))


def start_states(sprite, ball, velocity):
    """The states of an episode's reset and the one after it, with no action between."""
    s0 = tuple(np.asarray(v, np.int64) for v in (*np.asarray(sprite).T, *np.asarray(ball).T, *np.asarray(velocity).T))
    return s0, step(s0, np.zeros(len(s0[0]), np.int64))


def near_states(rng, n):
    """n random states whose ball is at or next to the sprite: where the
    ball meets the sprite (the blend), the rarest and hardest frames."""
    sx, sy = rng.integers(1, SIZE - SPRITE, n), rng.integers(1, SIZE - SPRITE, n)
    bx = np.clip(sx + rng.integers(-BALL - 2, SPRITE + 3, n), 1, SIZE - 1 - BALL)
    by = np.clip(sy + rng.integers(-BALL - 2, SPRITE + 3, n), 1, SIZE - 1 - BALL)
    return sx, sy, bx, by, rng.choice([-1, 1], n), rng.choice([-1, 1], n)


def wall_states(rng, n):
    """n random states whose ball and sprite are both at a wall or in a
    corner: where the ball bounces while the sprite is stopped."""
    def at_wall(side, k):
        lo, hi = 1, SIZE - 1 - side
        edge = rng.integers(0, 3, k)  # low wall, high wall, anywhere
        v = rng.integers(lo, hi + 1, k)
        v = np.where(edge == 0, lo + rng.integers(0, 3, k), v)
        return np.where(edge == 1, hi - rng.integers(0, 3, k), v)
    return (at_wall(SPRITE, n), at_wall(SPRITE, n), at_wall(BALL, n), at_wall(BALL, n),
            rng.choice([-1, 1], n), rng.choice([-1, 1], n))


def transitions(rng, n, near=0, wall=0):
    """n random transitions: two frames, an action, the next frame (colour
    classes); the first near of them start with the ball by the sprite,
    the next wall with both at walls."""
    parts = zip(near_states(rng, near), wall_states(rng, wall), random_states(rng, n - near - wall))
    s0 = tuple(np.concatenate(p) for p in parts)
    s1 = step(s0, rng.integers(0, 5, n))
    a = rng.integers(0, 5, n)
    return render(s0), render(s1), a, render(step(s1, a))


def wall_ball_transitions(rng, n):
    """n random transitions with the sprite against a wall (or a pixel off
    it) and the ball within a few pixels of the same wall, by or under the
    sprite: the ball bouncing off a wall under the sprite, corners
    included, where a model that had them only by chance lost it."""
    hs, hb = SIZE - 1 - SPRITE, SIZE - 1 - BALL
    side = rng.integers(0, 4, n)  # left, right, top, bottom
    low = side % 2 == 0
    perp_s = np.where(low, 1 + rng.integers(0, 2, n), hs - rng.integers(0, 2, n))
    perp_b = np.where(low, 1 + rng.integers(0, 5, n), hb - rng.integers(0, 5, n))
    along_s = rng.integers(1, hs + 1, n)
    along_b = np.clip(along_s + rng.integers(-BALL - 1, SPRITE + 2, n), 1, hb)
    across = side < 2  # a left or right wall: x is across it
    sx, sy = np.where(across, perp_s, along_s), np.where(across, along_s, perp_s)
    bx, by = np.where(across, perp_b, along_b), np.where(across, along_b, perp_b)
    s0 = (sx, sy, bx, by, rng.choice([-1, 1], n), rng.choice([-1, 1], n))
    s1 = step(s0, rng.integers(0, 5, n))
    a = rng.integers(0, 5, n)
    return render(s0), render(s1), a, render(step(s1, a))


def flip_ball_pixel(rng, frames):
    """frames (classes int64 [N, H, W]) with one pixel each, drawn from rng
    among those at or next to the ball, toggled between with and without
    the ball: background and ball, sprite and blend; a wall pixel becomes
    the ball's (the blend's when the sprite is next to it)."""
    n = frames.shape[0]

    def grown(mask):
        return nn.functional.max_pool2d(mask.to(torch.float32).unsqueeze(1), 3, 1, 1).squeeze(1) > 0

    near = grown((frames == 3) | (frames == 4))
    score = torch.from_numpy(rng.random((n, SIZE, SIZE))).to(torch.float32) * near
    idx = score.flatten(1).argmax(1)
    flipped = torch.tensor([3, 1, 4, 0, 2])[frames]
    on_wall = torch.where(grown((frames == 2) | (frames == 4)), 4, 3)
    flipped = torch.where(frames == 1, on_wall, flipped)
    flat = frames.flatten(1).clone()
    rows = torch.arange(n)
    flat[rows, idx] = flipped.flatten(1)[rows, idx]
    return flat.view_as(frames)


def misdraw(rng, prev, cur):
    """The input frames of transitions as a rollout's own mistake may draw
    them: a ball pixel toggled (flip_ball_pixel) in the earlier frame, the
    later one or both, drawn from rng."""
    which = torch.from_numpy(rng.integers(0, 3, len(prev))).view(-1, 1, 1)
    p, c = flip_ball_pixel(rng, prev), flip_ball_pixel(rng, cur)
    return torch.where(which != 1, p, prev), torch.where(which != 0, c, cur)


def stray(rng, prev, cur):
    """The input frames of transitions with a stray ball pixel as a rollout's
    own slip may leave one: drawn from rng a few pixels from the ball (-4 to
    +5 rows and columns from its top left), in the earlier frame, the later
    one or both, moved diagonally by one pixel between them as the ball moves;
    on the sprite it is the blend."""
    n = len(prev)
    first = ((cur == 3) | (cur == 4)).flatten(1).to(torch.int64).argmax(1)
    by, bx = (first // SIZE).numpy(), (first % SIZE).numpy()
    y = np.clip(by + rng.integers(-4, 6, n), 1, SIZE - 2)
    x = np.clip(bx + rng.integers(-4, 6, n), 1, SIZE - 2)
    dy, dx = rng.choice([-1, 1], n), rng.choice([-1, 1], n)
    which = rng.integers(0, 3, n)  # the earlier frame, the later, both
    on = torch.tensor([3, 1, 4, 3, 4])
    prev, cur = prev.clone(), cur.clone()
    rows = torch.arange(n)
    py, px = torch.from_numpy(np.clip(y - dy, 1, SIZE - 2)), torch.from_numpy(np.clip(x - dx, 1, SIZE - 2))
    cy, cx = torch.from_numpy(y), torch.from_numpy(x)
    mp, mc = torch.from_numpy(which != 1), torch.from_numpy(which != 0)
    prev[rows[mp], py[mp], px[mp]] = on[prev[rows[mp], py[mp], px[mp]]]
    cur[rows[mc], cy[mc], cx[mc]] = on[cur[rows[mc], cy[mc], cx[mc]]]
    return prev, cur


# -------------------------------------------------------------------- model

def first_best(scores: torch.Tensor, most: bool) -> torch.Tensor:
    """The index along dim 0 of each element's largest (most) or smallest score, the first of
    equals: argmax(0) or argmin(0) for a handful of classes, as a few elementwise passes,
    which libtorch's strided reductions over a short dimension are many times slower than."""
    best = scores[0]
    index = torch.zeros(best.shape, dtype=torch.int64, device=scores.device)
    for i in range(1, scores.size(0)):
        s = scores[i]
        take = s > best if most else s < best
        best = torch.where(take, s, best)
        index = torch.where(take, torch.full_like(index, i), index)
    return index


class WorldModel(nn.Module):
    """Next frame from the last two and an action, as one colour per pixel.

    The frames' colour classes (one-hot) and the action (four planes, none
    all zero) go through a space-to-depth (2x2), four 3x3 convolutions (one
    dilated) and back to full size as per-pixel class scores, added to a
    learned bias towards each pixel's current colour.
    """

    def __init__(self, start: torch.Tensor):
        super().__init__()
        c = WIDTH
        self.net = nn.Sequential(
            nn.PixelUnshuffle(2),
            nn.Conv2d(4 * (2 * CLASSES + 4), c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, 4 * CLASSES, 1),
            nn.PixelShuffle(2),
        )
        # A learned bias towards each pixel's current colour: most pixels
        # keep theirs, so the network learns the changes.
        self.keep = nn.Parameter(torch.tensor(3.0))
        self.register_buffer("palette", torch.tensor(PALETTE, dtype=torch.uint8))
        self.register_buffer("start_frames", start)

    def logits(self, prev: torch.Tensor, cur: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Class scores float32 [N, CLASSES, H, W] from classes int64 [N, H, W] and actions int64 [N]."""
        n, h, w = cur.shape
        planes = nn.functional.one_hot(action, 5)[:, 1:].to(torch.float32).view(n, 4, 1, 1).expand(n, 4, h, w)
        now = self.one_hot(cur)
        x = torch.cat([self.one_hot(prev), now, planes], 1)
        return self.net(x) + self.keep * now

    def one_hot(self, c: torch.Tensor) -> torch.Tensor:
        """Classes int64 [N, H, W] as one plane per class, float32 [N, CLASSES, H, W] laid out
        channels last. The same values and layout as one_hot(c).permute(0, 3, 1, 2), without
        its int64 planes: the layout decides the convolutions' last bits."""
        k = torch.arange(self.palette.size(0), device=c.device)
        return (c.unsqueeze(-1) == k).to(torch.float32).permute(0, 3, 1, 2)

    @torch.jit.export
    def classes(self, frames: torch.Tensor) -> torch.Tensor:
        """The nearest palette colour of each pixel of uint8 [..., H, W, 3] frames, int64 [..., H, W]."""
        # |x - p|^2 less |x|^2, which every colour shares: integers below 2^24, so
        # exact in float32 whatever order a matrix product sums in.
        p = self.palette.to(torch.float32)
        d = (p * p).sum(1) - 2 * torch.matmul(frames.to(torch.float32), p.t())
        return first_best(d.movedim(-1, 0), False)

    def forward(self, frames: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The next frame of each pair: frames uint8 [N, 2, H, W, 3], actions int64 [N] -> uint8 [N, H, W, 3]."""
        c = self.classes(frames)
        return self.palette[first_best(self.logits(c[:, 0], c[:, 1], actions).movedim(1, 0), True)]

    @torch.jit.export
    def step(self, num_frames: int, controls: List[float], start: Optional[torch.Tensor] = None,
             state: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        if len(controls) != 4:
            raise ValueError("controls: want 4 values [up, down, left, right], got " + str(len(controls)))
        if num_frames < 1:
            raise ValueError("num_frames: want at least 1, got " + str(num_frames))
        if state is not None:
            s = state
        elif start is not None:
            s = start
        else:
            s = self.start_frames
        if s.dtype != torch.uint8 or s.shape != self.start_frames.shape:
            raise ValueError("state and start: want uint8 [2, 32, 32, 3] (two frames)")
        action = 0
        best = 0.5
        for i in range(4):
            if controls[i] > best or (controls[i] == best and action == 0):
                action = i + 1
                best = controls[i]
        a = torch.full([1], action, dtype=torch.int64)
        c = self.classes(s)
        prev, cur = c[0:1], c[1:2]
        out: List[torch.Tensor] = []
        with torch.no_grad():
            for _ in range(num_frames):
                nxt = first_best(self.logits(prev, cur, a).movedim(1, 0), True)
                out.append(nxt)
                prev, cur = cur, nxt
        return {"frames": self.palette[torch.cat(out)], "state": self.palette[torch.cat([prev, cur])]}


    @torch.jit.export
    def steps(self, num_frames: int, controls: torch.Tensor, start: Optional[torch.Tensor] = None,
              state: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """step for a batch of sessions, one row each: controls float32 [B, 4], start and state
        uint8 [B, 2, 32, 32, 3]; returns frames uint8 [B, num_frames, 32, 32, 3], state, and
        scores: the last frame's class scores, float32 [B, CLASSES, 32, 32], which the frames
        were chosen from. The runtime compares them when it measures which batch sizes give a
        row the same bits: frames alone would hide the last bits a batch size changes."""
        if controls.dim() != 2 or controls.size(1) != 4:
            raise ValueError("controls: want [B, 4] [up, down, left, right] per session, got " + str(controls.shape))
        if num_frames < 1:
            raise ValueError("num_frames: want at least 1, got " + str(num_frames))
        n = controls.size(0)
        if state is not None:
            s = state
        elif start is not None:
            s = start
        else:
            s = self.start_frames.unsqueeze(0).expand(n, 2, 32, 32, 3)
        if s.dtype != torch.uint8 or s.shape != (n,) + self.start_frames.shape:
            raise ValueError("state and start: want uint8 [B, 2, 32, 32, 3] (two frames per session)")
        # The action of each row as step chooses it: the strongest control
        # at 0.5 or more, the first of equals; none below.
        action = torch.zeros([n], dtype=torch.int64)
        best = torch.full([n], 0.5, dtype=controls.dtype)
        for i in range(4):
            c = controls[:, i]
            take = (c > best) | ((c == best) & (action == 0))
            action = torch.where(take, torch.full_like(action, i + 1), action)
            best = torch.where(take, c, best)
        c = self.classes(s)
        prev, cur = c[:, 0], c[:, 1]
        out: List[torch.Tensor] = []
        scores = torch.empty(0)
        with torch.no_grad():
            for _ in range(num_frames):
                scores = self.logits(prev, cur, action)
                nxt = first_best(scores.movedim(1, 0), True)
                out.append(nxt)
                prev, cur = cur, nxt
        return {"frames": self.palette[torch.stack(out, 1)], "state": self.palette[torch.stack([prev, cur], 1)],
                "scores": scores}


def default_start():
    (sx, sy), (bx, by), (vx, vy) = DEFAULT_START
    s0, s1 = start_states([[sx, sy]], [[bx, by]], [[vx, vy]])
    return torch.from_numpy(pixels(np.concatenate([render(s0), render(s1)])))


def train(args):
    start = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(SEED)
    model = WorldModel(default_start())
    torch.jit.script(model)  # fail before training, not after
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=STEPS, pct_start=0.1)
    model.train()
    loss = torch.zeros(())
    noise = np.random.default_rng(SEED + 4)
    walls = np.random.default_rng(SEED + 5)
    for _ in range(STEPS):
        prev, cur, a, nxt = (torch.from_numpy(v).long() for v in transitions(rng, BATCH, NEAR, WALL))
        # The first transitions are NEAR ones: some of them misdrawn.
        prev[:MISDRAWN], cur[:MISDRAWN] = misdraw(noise, prev[:MISDRAWN], cur[:MISDRAWN])
        # Then the WALL ones, the first with the ball by the sprite at a wall, some misdrawn.
        w = slice(NEAR, NEAR + WALL_BALL)
        prev[w], cur[w], a[w], nxt[w] = (torch.from_numpy(v).long() for v in wall_ball_transitions(walls, WALL_BALL))
        w = slice(NEAR, NEAR + WALL_MISDRAWN)
        prev[w], cur[w] = misdraw(noise, prev[w], cur[w])
        # The last are uniform ones: some of them with a stray ball pixel.
        prev[-STRAY:], cur[-STRAY:] = stray(noise, prev[-STRAY:], cur[-STRAY:])
        loss = nn.functional.cross_entropy(model.logits(prev, cur, a), nxt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    trained = time.time() - start

    # One-step accuracy on transitions never trained on.
    held = np.random.default_rng(SEED + 1)
    prev, cur, a, nxt = (torch.from_numpy(v).long() for v in transitions(held, 4000))
    with torch.no_grad():
        pred = torch.cat([model.logits(prev[i:i + 500], cur[i:i + 500], a[i:i + 500]).argmax(1) for i in range(0, 4000, 500)])
    right = pred == nxt

    ckpt = os.path.join(args.out, "checkpoints", "worldmodel.pt")
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    tmp = ckpt + ".tmp"
    torch.jit.script(model).save(tmp)
    os.replace(tmp, ckpt)
    json.dump({"seconds": round(trained, 2), "steps": STEPS, "batch": BATCH, "threads": THREADS,
               "parameters": sum(p.numel() for p in model.parameters()),
               "loss": round(float(loss), 6),
               "pixel_accuracy": float(right.to(torch.float64).mean()),
               "frame_accuracy": float(right.all(2).all(1).to(torch.float64).mean())}, sys.stdout)
    print()


def check(args):
    with open(args.episodes) as f:
        eps = json.load(f)["episodes"]
    actions = np.array([e["actions"] for e in eps], np.int64)  # [E, T]
    s, s1 = start_states([e["sprite"] for e in eps], [e["ball"] for e in eps], [e["velocity"] for e in eps])
    starts = np.stack([render(s), render(s1)], 1)  # [E, 2, H, W]
    s = s1
    frames = []
    for t in range(actions.shape[1]):
        s = step(s, actions[:, t])
        frames.append(render(s))
    with open(args.sim, "wb") as f:
        f.write(pixels(np.stack(frames, 1)).tobytes())
    if not args.model:
        return
    torch.set_num_threads(1)
    model = torch.jit.load(args.model)
    model.eval()
    # The manifest's play task batches sessions (session_batching): each
    # rollout runs through steps in a batch of the max size, the size whose
    # bits the runtime gives every session whatever its company, the last
    # batch padded with copies of its final episode.
    size = args.batch
    with open(args.rollout, "wb") as f:
        for lo in range(0, len(eps), size):
            rows = list(range(lo, min(lo + size, len(eps))))
            rows += [rows[-1]] * (size - len(rows))
            start = torch.from_numpy(pixels(starts[rows]))
            state: Optional[torch.Tensor] = None
            out: List[torch.Tensor] = []
            for t in range(actions.shape[1]):
                controls = torch.zeros([size, 4], dtype=torch.float32)
                for r, e in enumerate(rows):
                    if actions[e, t] != NONE:
                        controls[r, actions[e, t] - 1] = 1.0
                res = model.steps(num_frames=1, controls=controls, start=start, state=state)
                state = res["state"]
                out.append(res["frames"])
            frames = torch.cat(out, 1)  # [size, T, H, W, 3]
            for r in range(min(size, len(eps) - lo)):
                f.write(frames[r].numpy().tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--episodes", required=True)
    c.add_argument("--sim", required=True)
    c.add_argument("--model")
    c.add_argument("--rollout")
    c.add_argument("--batch", type=int, default=8, help="the play task's session_batching max_batch_size")
    args = p.parse_args()
    {"train": train, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
