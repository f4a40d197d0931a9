package serve_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func remoteClient(t testing.TB, s *started, name string, opts ...remote.Option) *remote.Client {
	t.Helper()
	rc, err := remote.New(loadSpec(t, name), s.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestRemoteResultsEqualInProcess runs the same calls in-process and
// through a server on loopback, with and without cross-request batching,
// through the generated Client over either backend (NewClient): the results
// are identical, tensor for tensor — with tensors sent binary (the remote
// client's default) and as JSON numbers (remote.WithJSONTensors).
func TestRemoteResultsEqualInProcess(t *testing.T) {
	t.Parallel()
	t.Run("binary", func(t *testing.T) { remoteResultsEqualInProcess(t) })
	t.Run("json", func(t *testing.T) { remoteResultsEqualInProcess(t, remote.WithJSONTensors()) })
}

func remoteResultsEqualInProcess(t *testing.T, opts ...remote.Option) {
	ctx := context.Background()
	encIn := inProcess(t, "tiny-encoder")
	worldIn := inProcess(t, "tiny-world")
	for _, batching := range []bool{false, true} {
		s := start(t, serve.Config{Batching: batching, BatchDelay: 2 * time.Millisecond})
		encRe := remoteClient(t, s, "tiny-encoder", append([]remote.Option{remote.WithVariant("default")}, opts...)...)
		worldRe := remoteClient(t, s, "tiny-world", opts...)
		encs := []*tinyencoder.Client{tinyencoder.NewClient(encIn), tinyencoder.NewClient(encRe)}

		// One call.
		for i := range 5 {
			p := tinyencoder.EmbedParams{Tokens: tokens(i, 6+i), Normalize: i%2 == 0}
			var got [2]*tensor.Embedding
			for j, c := range encs {
				r, err := c.Embed(ctx, p)
				if err != nil {
					t.Fatalf("batching %v, backend %d: %v", batching, j, err)
				}
				got[j] = r.Embedding
			}
			if !tensorsEqual(got[0].Vector, got[1].Vector) {
				t.Errorf("batching %v item %d: in-process %v, remote %v", batching, i, got[0].Vector, got[1].Vector)
			}
		}

		// A batch, 37 items (padding, several batches).
		ps := make([]tinyencoder.EmbedParams, 37)
		for i := range ps {
			ps[i] = tinyencoder.EmbedParams{Tokens: tokens(i, 6), Normalize: true}
		}
		var res [2][]*tinyencoder.EmbedResult
		for j, c := range encs {
			var stats []batch.Stats
			r, err := c.EmbedBatch(ctx, ps, batch.WithStats(func(s batch.Stats) { stats = append(stats, s) }))
			if err != nil {
				t.Fatal(err)
			}
			if last := stats[len(stats)-1]; last.Done != 37 {
				t.Errorf("backend %d: stats %+v", j, last)
			}
			res[j] = r
		}
		// Batches of other sizes round differently in the last bits (the
		// in-process run stacks 8 items, the server as many as arrived):
		// equal within float32 rounding.
		for i := range ps {
			if d := maxDiff(t, res[0][i].Embedding.Vector, res[1][i].Embedding.Vector); d > 1e-6 {
				t.Errorf("batching %v batch item %d differs by %g", batching, i, d)
			}
		}

		// A video task with defaults.
		wp := tinyworld.DefaultGenerateParams()
		wp.Prompt, wp.Seed, wp.NumFrames, wp.Height, wp.Width = "a lighthouse", 7, 13, 16, 48
		var vids [2]*tensor.Video
		for j, b := range []client.Backend{worldIn, worldRe} {
			r, err := tinyworld.NewClient(b).Generate(ctx, wp)
			if err != nil {
				t.Fatal(err)
			}
			vids[j] = r.Video
		}
		if !tensorsEqual(vids[0].Frames, vids[1].Frames) || vids[0].FPS != vids[1].FPS || vids[1].Frames.Shape[0] != 13 {
			t.Errorf("video: in-process %v %v, remote %v %v", vids[0].Frames.Shape, vids[0].FPS, vids[1].Frames.Shape, vids[1].FPS)
		}

		// A stream task run once answers its first chunk, as in-process
		// (the untyped entry point, by task id).
		out := [2]map[string]any{}
		for j, o := range []func() (map[string]any, error){
			func() (map[string]any, error) { return worldIn.Run(ctx, "step", map[string]any{"speed": 3.0}, nil) },
			func() (map[string]any, error) { return worldRe.Run(ctx, "step", map[string]any{"speed": 3.0}, nil) },
		} {
			m, err := o()
			if err != nil {
				t.Fatal(err)
			}
			out[j] = m
		}
		if !tensorsEqual(out[0]["frames"].(*tensor.Tensor), out[1]["frames"].(*tensor.Tensor)) {
			t.Error("first chunk of a stream task run once differs")
		}

		// Errors come back named and typed.
		_, err := worldRe.Run(ctx, "generate", map[string]any{"prompt": "x", "num_frames": int64(10)}, nil)
		var se *remote.StatusError
		if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(err.Error(), "num_frames: must be 4k+1") || !strings.Contains(err.Error(), "tiny-world generate (remote)") {
			t.Errorf("invalid remote call: %v", err)
		}
		if _, err := remote.New(loadSpec(t, "tiny-world"), s.url, remote.WithVariant("nope")); !errors.Is(err, spec.ErrUnknownID) {
			t.Errorf("unknown variant: %v", err)
		}
		if err := worldRe.Ready(ctx); err != nil {
			t.Error(err)
		}
		if md, err := encRe.Metadata(ctx); err != nil || md.Name != "tiny-encoder" {
			t.Errorf("metadata %v %v", md, err)
		}
	}
}

// streamFrames collects the frames of n chunks of a session, calling at(i)
// after chunk i.
func streamFrames(t *testing.T, s *stream.Session, ctx context.Context, at func(i int)) []*tensor.Tensor {
	t.Helper()
	var frames []*tensor.Tensor
	for c, err := range s.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, c.Video.Frames)
		if at != nil {
			at(c.Index)
		}
	}
	return frames
}

// TestRemoteStreamAppliesControls streams the tiny world over HTTP: the
// chunks equal an in-process session's, initial controls included, and
// controls sent while the session runs change the chunks from the next
// generated one, exactly as in-process. Two concurrent sessions with
// different controls never see each other's state.
func TestRemoteStreamAppliesControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := start(t, serve.Config{})
	worldIn := inProcess(t, "tiny-world")
	worldRe := remoteClient(t, s, "tiny-world")
	const n = 6
	inproc := func(controls stream.Controls, switchAt int, then stream.Controls) []*tensor.Tensor {
		sess, err := worldIn.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n), stream.WithControls(controls))
		if err != nil {
			t.Fatal(err)
		}
		return streamFrames(t, sess, ctx, func(i int) {
			if i+1 == switchAt {
				sess.SetControls(then)
			}
		})
	}

	// Two sessions at once, each with its own initial controls.
	var wg sync.WaitGroup
	results := make([][]*tensor.Tensor, 2)
	for j, controls := range []stream.Controls{{"right": 1}, {"left": 1, "forward": 0.5}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess, err := worldRe.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n), stream.WithControls(controls))
			if err != nil {
				t.Error(err)
				return
			}
			results[j] = streamFrames(t, sess, ctx, nil)
		}()
	}
	wg.Wait()
	for j, controls := range []stream.Controls{{"right": 1}, {"left": 1, "forward": 0.5}} {
		want := inproc(controls, -1, nil)
		if len(results[j]) != n {
			t.Fatalf("session %d: %d chunks, want %d", j, len(results[j]), n)
		}
		for i := range want {
			if !tensorsEqual(want[i], results[j][i]) {
				t.Errorf("session %d chunk %d differs from in-process", j, i)
			}
		}
	}

	// Controls sent while a paced session plays (the tiny world plays 2
	// frames at 8 fps: 250 ms per chunk), after chunk 1 was taken, apply
	// from chunk 2 — as in-process, where the session makes chunk 2 when
	// its consumer asks for it: the remote session is in lockstep.
	sess, err := worldRe.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithMaxChunks(n))
	if err != nil {
		t.Fatal(err)
	}
	got := streamFrames(t, sess, ctx, func(i int) {
		if i == 1 {
			if err := sess.SetControls(stream.Controls{"forward": 1}); err != nil {
				t.Error(err)
			}
		}
		if i == 2 {
			if err := sess.SetControls(stream.Controls{"jump": 1}); err == nil || !strings.Contains(err.Error(), `unknown control "jump"`) {
				t.Errorf("bad control: %v", err)
			}
		}
	})
	if sess.Controls()["forward"] != 1 {
		t.Errorf("controls after the session: %v", sess.Controls())
	}
	want := inproc(nil, 2, stream.Controls{"forward": 1})
	for i := range want {
		if !tensorsEqual(want[i], got[i]) {
			t.Errorf("chunk %d differs from the in-process stream whose controls switched at chunk 2", i)
		}
	}
	still := inproc(nil, -1, nil)
	if tensorsEqual(still[n-1], got[n-1]) {
		t.Error("the controls changed nothing")
	}
}

// streamRecords counts the access log records of session WebSockets: one
// per connection, written when it closes.
func (l *logSink) streamRecords() int {
	n := 0
	for _, r := range l.all() {
		if p, _ := r["path"].(string); strings.HasSuffix(p, "/stream") {
			n++
		}
	}
	return n
}

// A remote client keeps the WebSocket of a session that ended by itself
// for its next session: three sessions in a row, each with controls of
// its own, run on one connection and stream what in-process sessions
// stream. A kept connection the server has closed meanwhile (its idle
// timeout) costs a new connection, not the session; Close closes a kept
// one.
func TestRemoteStreamKeepsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	worldIn := inProcess(t, "tiny-world")
	const n = 3
	controls := []stream.Controls{{"right": 1}, {"left": 1}, {"forward": 1, "right": 0.5}}
	run := func(c interface {
		Stream(context.Context, string, map[string]any, ...stream.Option) (*stream.Session, error)
	}, controls stream.Controls) []*tensor.Tensor {
		t.Helper()
		sess, err := c.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(n), stream.WithControls(controls))
		if err != nil {
			t.Fatal(err)
		}
		return streamFrames(t, sess, ctx, nil)
	}
	for _, idle := range []time.Duration{time.Hour, time.Millisecond} {
		s := start(t, serve.Config{IdleTimeout: idle})
		re := remoteClient(t, s, "tiny-world")
		for i, c := range controls {
			if idle == time.Millisecond {
				enginetest.WaitFor(t, "the server to close the kept connection", func() bool { return s.logs.streamRecords() == i })
			}
			got, want := run(re, c), run(worldIn, c)
			if len(got) != n {
				t.Fatalf("idle %v, session %d: %d chunks, want %d", idle, i, len(got), n)
			}
			for j := range want {
				if !tensorsEqual(want[j], got[j]) {
					t.Errorf("idle %v, session %d: chunk %d differs from in-process", idle, i, j)
				}
			}
		}
		conns := 1
		if idle == time.Millisecond {
			conns = len(controls)
		} else if got := s.logs.streamRecords(); got != 0 {
			t.Errorf("%d session connections closed while the client keeps its one", got)
		}
		re.Close()
		enginetest.WaitFor(t, "the kept connection to close", func() bool { return s.logs.streamRecords() == conns })
	}
}

// A session that ends after its client was closed keeps nothing: its
// WebSocket closes with it.
func TestRemoteStreamAfterCloseKeepsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := start(t, serve.Config{IdleTimeout: time.Hour})
	re := remoteClient(t, s, "tiny-world")
	sess, err := re.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false), stream.WithMaxChunks(3))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range sess.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 1 {
			re.Close()
		}
	}
	if n != 3 {
		t.Fatalf("%d chunks, want 3", n)
	}
	enginetest.WaitFor(t, "the session's connection to close", func() bool { return s.logs.streamRecords() == 1 })
}
