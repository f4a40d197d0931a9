//go:build cgo

package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
)

// recordedClient returns a client of spec on a fresh copy of the checkpoint
// that build writes (so that no module cached by another test is reused),
// through the fake engine over libtorch, which records every call.
func recordedClient(t *testing.T, spec *wfspec.ModelInferenceSpec, build func(string) error, opts ...client.Option) (*client.Client, *enginetest.Engine) {
	t.Helper()
	path := enginetest.Fresh(t, "model.pt", build)
	eng := enginetest.OverDefault(t)
	c, err := client.New(spec, append([]client.Option{client.WithEngine(eng), client.WithCheckpointPath(path), client.WithDevice("cpu")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, eng
}

type warmed struct {
	path       string
	size, run  int
	chunk      int
	positiveNs bool
}

func reported(r client.WarmupReport, task string) []warmed {
	var out []warmed
	for _, c := range r.Calls {
		if c.Task == task {
			out = append(out, warmed{c.Path, c.Size, c.Run, c.Chunk, c.Duration > 0})
		}
	}
	return out
}

// The tiny encoder's manifest asks for a warm-up: one forward call at each
// pad size (1, 2, 4, 8) on sequences of 16 zero tokens (warmup.dims), with
// the field's default; invariant batching first measures which sizes give
// the max's bits, then warms up those.
func TestWarmupRunsEachPadSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := loadSpec(t, "tiny-encoder")
	c, eng := recordedClient(t, spec, tinymodels.BuildEncoder)
	rep, err := c.Warmup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"forward normalize=true tokens=int64[1 16]",
		"forward normalize=true tokens=int64[2 16]",
		"forward normalize=true tokens=int64[4 16]",
		"forward normalize=true tokens=int64[8 16]",
	}
	if got := eng.TakeCalls(); !slices.Equal(got, want) {
		t.Errorf("engine calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantRep := []warmed{{"batch", 1, 0, 0, true}, {"batch", 2, 0, 0, true}, {"batch", 4, 0, 0, true}, {"batch", 8, 0, 0, true}}
	if got := reported(rep, "embed"); !slices.Equal(got, wantRep) {
		t.Errorf("report %+v, want %+v", got, wantRep)
	}
	if rep.Load <= 0 || rep.Total() <= rep.Load {
		t.Errorf("report: load %v, total %v; want the load and the calls timed", rep.Load, rep.Total())
	}

	// Loaded now: a second warm-up times no load. The batch options are
	// the ones the client's batched calls will get; a warm-up that runs
	// fewer than three calls a round is repeated until it has made three.
	rep, err = c.WarmupTask(ctx, "embed", batch.WithInvariant())
	if err != nil {
		t.Fatal(err)
	}
	// Invariant: first the measurement of the sizes equivalent to 8 (two
	// batches of 8 twice each, then each other pad size twice), then a
	// round of those sizes, ascending, up to 8, repeated to three calls.
	measure := []string{want[3], want[3], want[3], want[3], want[0], want[0], want[1], want[1], want[2], want[2]}
	checkInvariantWarmup(t, "invariant warm-up", eng.TakeCalls(), rep, measure, want, 0)
	if rep.Load != 0 {
		t.Errorf("invariant warm-up of a loaded model: report %+v", rep)
	}
	rep, err = c.WarmupTask(ctx, "embed", batch.WithPadSizes(1, 8))
	if err != nil {
		t.Fatal(err)
	}
	if got := eng.TakeCalls(); !slices.Equal(got, []string{want[0], want[3], want[0], want[3]}) {
		t.Errorf("pad sizes 1, 8: engine calls %q, report %+v", got, rep)
	}

	// A client made invariant warms up the max size; runs sets the rounds.
	spec.Tasks[0].Warmup = &wfspec.WarmupSpec{Runs: 2}
	c2, eng2 := recordedClient(t, spec, tinymodels.BuildEncoder, client.WithBatchInvariant())
	rep, err = c2.Warmup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var w []string
	for _, n := range []int{1, 2, 4, 8} {
		w = append(w, fmt.Sprintf("forward normalize=true tokens=int64[%d 1]", n))
	}
	measure = []string{w[3], w[3], w[3], w[3], w[0], w[0], w[1], w[1], w[2], w[2]}
	checkInvariantWarmup(t, "invariant client, runs 2", eng2.TakeCalls(), rep, measure, w, 2)
}

// checkInvariantWarmup checks the engine calls of an invariant warm-up:
// the measurement's, then rounds of the equivalent sizes (which ones is the
// machine's: each a pad size, ascending, ending with the max), as many
// rounds as warmup.runs says (runs 0: as make at least three calls), and
// the report of those rounds.
func checkInvariantWarmup(t *testing.T, what string, got []string, rep client.WarmupReport, measure, sizes []string, runs int) {
	t.Helper()
	if len(got) < len(measure) || !slices.Equal(got[:len(measure)], measure) {
		t.Fatalf("%s: engine calls %q, want the measurement %q first", what, got, measure)
	}
	rest := got[len(measure):]
	var round []string
	for i, c := range rest {
		if i > 0 && c == rest[0] {
			break
		}
		round = append(round, c)
	}
	if len(round) == 0 || round[len(round)-1] != sizes[len(sizes)-1] {
		t.Fatalf("%s: warm-up calls %q: want rounds ending with the max", what, rest)
	}
	for i, c := range round {
		if k := slices.Index(sizes, c); k < 0 || i > 0 && k <= slices.Index(sizes, round[i-1]) {
			t.Fatalf("%s: warm-up calls %q: want pad sizes, ascending", what, rest)
		}
	}
	rounds := runs
	if runs == 0 {
		rounds = (client.MinWarmupCalls + len(round) - 1) / len(round)
	}
	if len(rest) != rounds*len(round) {
		t.Errorf("%s: warm-up calls %q: want %d rounds of %q", what, rest, rounds, round)
	}
	if n := len(reported(rep, "embed")); n != len(rest) {
		t.Errorf("%s: %d calls reported, %d made", what, n, len(rest))
	}
}

// A plain task warms up with Run on its defaults and warm-up inputs, three
// times by default; a streaming task with unpaced two-chunk sessions (the
// first chunk, then a steady one carrying the state), two by default;
// tasks without a warmup block are left alone by Warmup.
func TestWarmupPlainAndStreamingTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := loadSpec(t, "tiny-world")
	c, eng := recordedClient(t, spec, tinymodels.BuildWorld)
	rep, err := c.Warmup(ctx)
	if err != nil || len(rep.Calls) != 0 || len(eng.TakeCalls()) != 0 || rep.Load <= 0 {
		t.Fatalf("no task asks for a warm-up: report %+v, %v", rep, err)
	}

	spec.Tasks[0].Warmup = &wfspec.WarmupSpec{Inputs: map[string]any{"prompt": "warm", "seed": int64(7)}}
	spec.Tasks[1].Warmup = &wfspec.WarmupSpec{}
	c, eng = recordedClient(t, spec, tinymodels.BuildWorld)
	rep, err = c.Warmup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gen := "forward height=32 num_frames=9 prompt=warm seed=7 width=32"
	first := "step controls=[0 0 0 0] num_frames=4 speed=2"
	steady := "step controls=[0 0 0 0] num_frames=2 speed=2 state=float32[3]"
	want := []string{gen, gen, gen, first, steady, first, steady}
	if got := eng.TakeCalls(); !slices.Equal(got, want) {
		t.Errorf("engine calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := reported(rep, "generate"); !slices.Equal(got, []warmed{{"run", 0, 0, 0, true}, {"run", 0, 1, 0, true}, {"run", 0, 2, 0, true}}) {
		t.Errorf("generate: report %+v", got)
	}
	if got := reported(rep, "step"); !slices.Equal(got, []warmed{{"stream", 0, 0, 0, true}, {"stream", 0, 0, 1, true}, {"stream", 0, 1, 0, true}, {"stream", 0, 1, 1, true}}) {
		t.Errorf("step: report %+v", got)
	}

	// runs: 1 makes one round.
	spec.Tasks[0].Warmup.Runs, spec.Tasks[1].Warmup.Runs = 1, 1
	c, eng = recordedClient(t, spec, tinymodels.BuildWorld)
	if _, err := c.Warmup(ctx); err != nil {
		t.Fatal(err)
	}
	if got := eng.TakeCalls(); !slices.Equal(got, []string{gen, first, steady}) {
		t.Errorf("runs 1: engine calls %q", got)
	}
}

// A warm-up that cannot be built fails before anything runs, naming the
// task and what is missing; so does one whose input breaks its field.
func TestWarmupRefusesWhatCannotBeBuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := loadSpec(t, "tiny-world")
	c, eng := recordedClient(t, spec, tinymodels.BuildWorld)
	_, err := c.WarmupTask(ctx, "generate")
	want := `tiny-world/default generate: warm-up: warmup: cannot build the warm-up inputs: field "prompt" is required and has no default; give it a value under warmup.inputs (or a default)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	spec.Tasks[0].Warmup = &wfspec.WarmupSpec{Inputs: map[string]any{"prompt": "x", "num_frames": int64(1000)}}
	_, err = c.WarmupTask(ctx, "generate")
	if err == nil || !strings.Contains(err.Error(), `warm-up value of field "num_frames"`) {
		t.Errorf("err = %v, want the num_frames value refused", err)
	}
	if got := eng.TakeCalls(); len(got) != 0 {
		t.Errorf("engine calls %q, want none", got)
	}
}
