package client_test

import (
	"bytes"
	"context"
	"iter"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// stepsSpec is the session-batched world's spec, its checkpoint under dir.
func stepsSpec(max int) *spec.ModelInferenceSpec {
	return &spec.ModelInferenceSpec{
		ModelFamilyID: "steps-world", SupportsStream: true,
		Realtime: &spec.RealtimeSpec{FPS: 10, FirstChunkFrames: 2, SteadyChunkFrames: 1, Controls: []string{"up", "down", "left", "right"}, Stateful: true},
		Variants: []spec.InferenceVariantSpec{{VariantID: "default", Checkpoints: []spec.InferenceCheckpointRef{{Role: "model", URI: "steps.pt"}}}},
		Tasks: []spec.InferenceTaskProfile{{
			TaskID: "play", Method: "steps", Stream: true, SessionBatching: &spec.SessionBatchingSpec{MaxBatchSize: max},
			Inputs:  []spec.InferenceFieldSpec{{FieldID: "start", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, DType: "float32", Shape: spec.Shape{"2"}}},
			Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "frames", Kind: spec.ArtifactVideo, DType: "uint8", Shape: spec.Shape{"T", "2", "2", "3"}, Required: true}},
		}},
	}
}

// Sessions whose steps are due together share forward calls, and each
// session's frames are bit for bit those it gets playing alone: the model
// writes the call's batch size into every frame, so only the invariant
// padding (every call at the one size that gives the max's bits) keeps
// them equal.
func TestSessionBatching(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := tinymodels.BuildSteps(filepath.Join(dir, "steps.pt")); err != nil {
		t.Fatal(err)
	}
	const players, chunks = 6, 12
	newClient := func(hook func(client.SessionBatch)) *client.Client {
		c, err := client.New(stepsSpec(4), client.WithCheckpointRoot(dir), client.WithDevice("cpu"), client.WithSessionBatches(hook))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	alone := make([][]byte, players)
	{
		var mu sync.Mutex
		most := 0
		c := newClient(func(b client.SessionBatch) {
			mu.Lock()
			most = max(most, b.Sessions)
			mu.Unlock()
		})
		for p := range players {
			var err error
			if alone[p], err = tinymodels.PlaySteps(context.Background(), c, p, chunks); err != nil {
				t.Fatal(err)
			}
		}
		if most != 1 {
			t.Fatalf("players one after the other shared a call of %d sessions", most)
		}
	}

	// The first round's hook holds the queue's goroutine until every other
	// player's first step waits, so that the next round has them all: one
	// of the first two rounds has at least half the players.
	var mu sync.Mutex
	rounds, steps, most, padded := 0, 0, 0, 0
	var c *client.Client
	c = newClient(func(b client.SessionBatch) {
		mu.Lock()
		first := rounds == 0
		mu.Unlock()
		if first {
			for client.SessionsWaiting(c, "play") < players-b.Sessions {
				runtime.Gosched()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		rounds++
		steps += b.Sessions
		most = max(most, b.Sessions)
		padded += b.Padded
		if b.Sessions > 4 && b.Calls < 2 {
			t.Errorf("%d sessions in %d call(s), above the max batch size of 4", b.Sessions, b.Calls)
		}
	})
	got := make([][]byte, players)
	errs := make([]error, players)
	var wg sync.WaitGroup
	for p := range players {
		wg.Go(func() { got[p], errs[p] = tinymodels.PlaySteps(context.Background(), c, p, chunks) })
	}
	wg.Wait()
	for p := range players {
		if errs[p] != nil {
			t.Fatal(errs[p])
		}
		if !bytes.Equal(got[p], alone[p]) {
			t.Errorf("player %d: frames played among %d differ from playing alone", p, players)
		}
	}
	t.Logf("%d steps in %d rounds, at most %d sessions in one, %d padding rows", steps, rounds, most, padded)
	if most < players/2 {
		t.Errorf("at most %d sessions shared a call; want the first or second round to have %d or more", most, players/2)
	}
	if steps != players*chunks {
		t.Errorf("%d steps ran, want %d", steps, players*chunks)
	}
	// The frames hold the batch size the call ran at: all at the max.
	if got[0][2] != 4 {
		t.Errorf("the first frame says it ran in a call of %d, want 4 (the max: no smaller size gives its bits)", got[0][2])
	}
}

// A one-chunk call of a session-batched task is the first chunk of a fresh
// session, through the same queue; a method without controls cannot be
// batched by session, and the load says so.
func TestSessionBatchingCallAndContract(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := tinymodels.BuildSteps(filepath.Join(dir, "steps.pt")); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(stepsSpec(4), client.WithCheckpointRoot(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Run(context.Background(), "play", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := tinymodels.PlaySteps(context.Background(), c, 0, 1) // player 0 starts with no control
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := out["frames"].(*tensor.Tensor); !ok || !bytes.Equal(f.Data, first) {
		t.Errorf("one call gave %v, want the first chunk of a session (%d bytes)", out["frames"], len(first))
	}

	bad := filepath.Join(t.TempDir(), "steps.pt")
	if err := tinymodels.BuildSource(bad, torch.ModuleSource{Source: strings.ReplaceAll(tinymodels.StepsSource, "controls", "moves")}); err != nil {
		t.Fatal(err)
	}
	c2, err := client.New(stepsSpec(4), client.WithCheckpointRoot(filepath.Dir(bad)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.Run(context.Background(), "play", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "session_batching") || !strings.Contains(err.Error(), "controls") {
		t.Errorf("a steps method without controls: %v, want an error at session_batching naming controls", err)
	}
}

// One session whose step fails the batched call (a control the model
// refuses) fails alone: the executor halves the call to find it, and the
// other sessions' frames stay those of playing alone. A paused session
// (one not reading its chunks) sends no steps and holds no one up: the
// others finish while it waits, and it then plays on as if alone.
func TestSessionBatchingBadAndPausedSessions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := tinymodels.BuildSteps(filepath.Join(dir, "steps.pt")); err != nil {
		t.Fatal(err)
	}
	// Once armed, the first call's hook waits (holding the queue) until
	// the four sessions' first steps wait, so that they share the next.
	var armed atomic.Bool
	held := make(chan struct{})
	var c *client.Client
	c, err := client.New(stepsSpec(4), client.WithCheckpointRoot(dir), client.WithDevice("cpu"), client.WithSessionBatches(func(b client.SessionBatch) {
		if armed.CompareAndSwap(true, false) {
			close(held)
			for client.SessionsWaiting(c, "play") < 4 {
				runtime.Gosched()
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const chunks = 10
	alone := make([][]byte, 4)
	for p := range alone {
		if alone[p], err = tinymodels.PlaySteps(context.Background(), c, p, chunks); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	// Player 3 plays 2 chunks, then pauses until the others are done.
	paused, err := c.Stream(ctx, "play", nil, stream.WithPacing(false), stream.WithMaxChunks(chunks))
	if err != nil {
		t.Fatal(err)
	}
	var pausedFrames []byte
	next, stop := iter.Pull2(paused.Chunks(ctx))
	defer stop()
	take := func(i int) {
		if err := paused.SetControls(tinymodels.StepsControls(3, i)); err != nil {
			t.Fatal(err)
		}
		ch, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("paused player, chunk %d: %v %v", i, ok, err)
		}
		pausedFrames = append(pausedFrames, ch.Video.Frames.Data...)
	}
	take(0)
	take(1)

	// A blocker's first step holds the queue; then players 0 to 2 and a
	// session whose first control the model refuses start together.
	armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := tinymodels.PlaySteps(context.Background(), c, 0, 1); err != nil {
			t.Error(err)
		}
	})
	<-held
	bad := make(chan error, 1)
	got := make([][]byte, 3)
	errs := make([]error, 3)
	for p := range 3 {
		wg.Go(func() { got[p], errs[p] = tinymodels.PlaySteps(context.Background(), c, p, chunks) })
	}
	wg.Go(func() {
		sess, err := c.Stream(ctx, "play", nil, stream.WithPacing(false), stream.WithMaxChunks(chunks), stream.WithControls(stream.Controls{"up": 1000}))
		if err != nil {
			bad <- err
			return
		}
		for _, err := range sess.Chunks(ctx) {
			bad <- err
			return
		}
	})
	wg.Wait()
	for p := range 3 {
		if errs[p] != nil {
			t.Fatalf("player %d: %v", p, errs[p])
		}
		if !bytes.Equal(got[p], alone[p]) {
			t.Errorf("player %d: frames played beside a failing session differ from playing alone", p)
		}
	}
	if err := <-bad; err == nil || !strings.Contains(err.Error(), "want values within [-100, 100]") {
		t.Errorf("the session with a refused control: %v, want the model's error", err)
	}
	for i := 2; i < chunks; i++ {
		take(i)
	}
	if !bytes.Equal(pausedFrames, alone[3]) {
		t.Error("the paused player's frames differ from playing alone")
	}
}
