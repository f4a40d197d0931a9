package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/params"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// How a warm-up call ran (WarmupCall.Path).
const (
	// WarmupRun is one Client.Call of a task that is not batched.
	WarmupRun = "run"
	// WarmupBatch is one Client.CallBatch of WarmupCall.Size items: one
	// forward call at that batch size.
	WarmupBatch = "batch"
	// WarmupStream is one chunk of a Client.CallStream session.
	WarmupStream = "stream"
)

// MinWarmupCalls is how many calls a warm-up makes at least when the
// task's warmup block does not set runs: its round of calls is repeated
// until it has made that many. TorchScript's profiling executor profiles a
// module's first call (tens of ms for a small model) and optimises its
// graph on the second (about 20 times a steady call); the third is within
// about twice a steady call.
const MinWarmupCalls = 3

// WarmupStreamChunks is how many chunks the warm-up of a streaming task
// makes: the first chunk (first_chunk_frames frames, no state) and one
// steady chunk (chunk_frames frames, with the first chunk's state), the
// two shapes a session's calls have.
const WarmupStreamChunks = 2

// WarmupCall is one call a warm-up made.
type WarmupCall struct {
	// Task is the task's id.
	Task string
	// Path is how the call ran: WarmupRun, WarmupBatch or WarmupStream.
	Path string
	// Size is the batch size of the forward call (WarmupBatch), 0 otherwise.
	Size int
	// Chunk is the chunk's index in its session (WarmupStream), 0 otherwise.
	Chunk int
	// Run is the round the call belongs to (see WarmupTask), from 0.
	Run int
	// Duration is how long the call took, as a caller would see it.
	Duration time.Duration
}

// WarmupReport is what a warm-up did.
type WarmupReport struct {
	// Load is how long loading the model took, when the warm-up loaded it
	// (0 when it was loaded before).
	Load time.Duration
	// Calls are the warm-up calls in the order they ran.
	Calls []WarmupCall
}

// Total returns the time of the load and the calls.
func (r WarmupReport) Total() time.Duration {
	d := r.Load
	for _, c := range r.Calls {
		d += c.Duration
	}
	return d
}

// Warmup loads the model, when it is not loaded yet, and runs the warm-up
// calls of every task whose manifest asks for one (warmup:), in the order
// of the tasks; see WarmupTask for the calls. opts are the batch options
// the batched calls of the client will be given (batch.WithInvariant, pad
// sizes), so that the warm-up runs the batch sizes they will. A server
// calls it before it reports ready. The first failure stops it: the error
// names the task and the call, and the report lists the calls that ran.
func (c *Client) Warmup(ctx context.Context, opts ...batch.Option) (WarmupReport, error) {
	var rep WarmupReport
	if err := c.warmLoad(&rep); err != nil {
		return rep, err
	}
	for i := range c.spec.Tasks {
		if c.spec.Tasks[i].Warmup == nil {
			continue
		}
		if err := c.warmTask(ctx, &c.spec.Tasks[i], &rep, opts); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// WarmupTask loads the model, when it is not loaded yet, and warms up one
// task with its manifest's warmup block, or with the defaults (warmup: {})
// when it has none. Each call runs through the path requests take, on the
// inputs spec.InferenceTaskProfile.WarmupValues makes (an error when
// they cannot be made), in rounds of one call each — warmup.runs rounds,
// by default as many as make MinWarmupCalls calls:
//
//   - a batchable task: CallBatch of n copies of the item at each size n of
//     batch.Config.WarmupSizes — each pad size, or, when batching is
//     invariant, each size measured to give the max batch size's bits (the
//     measurement runs first, see equivalentSizes) — so each is one forward
//     call at that size; a batchable task without a batch dimension (batching.dim) also
//     gets one Call, which calls its method unbatched;
//   - a streaming task: one unpaced CallStream session of
//     WarmupStreamChunks chunks with every control off;
//   - any other task: one Call.
func (c *Client) WarmupTask(ctx context.Context, taskID string, opts ...batch.Option) (WarmupReport, error) {
	var rep WarmupReport
	task, err := c.spec.Task(taskID)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", c.where(""), err)
	}
	if err := c.warmLoad(&rep); err != nil {
		return rep, err
	}
	return rep, c.warmTask(ctx, task, &rep, opts)
}

// warmLoad loads the model and records the time when it was not loaded.
func (c *Client) warmLoad(rep *WarmupReport) error {
	c.mu.Lock()
	loaded := c.loaded != nil
	c.mu.Unlock()
	t0 := time.Now()
	if _, err := c.load(); err != nil {
		return fmt.Errorf("%s: warm-up: %w", c.where(""), err)
	}
	if !loaded {
		rep.Load = time.Since(t0)
	}
	return nil
}

// warmTask runs the warm-up calls of task (see WarmupTask).
func (c *Client) warmTask(ctx context.Context, task *spec.InferenceTaskProfile, rep *WarmupReport, opts []batch.Option) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("%s: warm-up%s: %w", c.where(task.TaskID), what, err)
	}
	ti, err := c.taskIndex(task)
	if err != nil {
		return fail("", err)
	}
	item, err := warmupKwargs(task)
	if err != nil {
		return fail("", err)
	}
	record := func(wc WarmupCall, run func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		err := run()
		wc.Task, wc.Duration = task.TaskID, time.Since(t0)
		if err == nil {
			rep.Calls = append(rep.Calls, wc)
		}
		return err
	}
	var sizes []int
	if task.Batching != nil {
		l, err := c.load()
		if err != nil {
			return fail("", err)
		}
		all, cfg, err := c.batchConfig(task, l, opts)
		if err != nil {
			return fail("", err)
		}
		if _, cfg, err = c.withEquivalence(ctx, ti, task, l, all, cfg, item); err != nil {
			return fail("", err)
		}
		sizes = cfg.WarmupSizes()
	}
	for r := range warmupRounds(task, len(sizes)) {
		switch {
		case task.Stream:
			if err := c.warmStream(ctx, task, item, r, record); err != nil {
				return fail(fmt.Sprintf(" (stream, run %d)", r), err)
			}
			continue
		case task.Batching != nil:
			for _, n := range sizes {
				items := make([]map[string]any, n)
				for i := range items {
					items[i] = item
				}
				if err := record(WarmupCall{Path: WarmupBatch, Size: n, Run: r}, func() error {
					return c.callBatch(ctx, ti, task, Kwargs(task, items...), CallOptions{}, func(int, map[string]any) error { return nil }, opts...)
				}); err != nil {
					return fail(fmt.Sprintf(" (batch of %d, run %d)", n, r), err)
				}
			}
			if task.Batching.Dim != "" {
				continue // Run is a batch of one, at the smallest size above
			}
		}
		if err := record(WarmupCall{Path: WarmupRun, Run: r}, func() error {
			_, err := c.Call(ctx, task, Kwargs(task, item))
			return err
		}); err != nil {
			return fail(fmt.Sprintf(" (run %d)", r), err)
		}
	}
	return nil
}

// warmupRounds returns how many rounds of calls the warm-up of task makes:
// warmup.runs, else enough for MinWarmupCalls calls when a round makes
// calls (sizes: the number of batch sizes of a batchable task).
func warmupRounds(task *spec.InferenceTaskProfile, sizes int) int {
	if w := task.Warmup; w != nil && w.Runs > 0 {
		return w.Runs
	}
	perRound := 1 // Run
	switch {
	case task.Stream:
		perRound = WarmupStreamChunks
	case task.Batching != nil && task.Batching.Dim != "":
		perRound = sizes
	case task.Batching != nil:
		perRound = sizes + 1
	}
	perRound = max(perRound, 1)
	return (MinWarmupCalls + perRound - 1) / perRound
}

// warmStream runs one warm-up session of a streaming task, recording each
// chunk as it arrives.
func (c *Client) warmStream(ctx context.Context, task *spec.InferenceTaskProfile, item map[string]any, run int, record func(WarmupCall, func() error) error) error {
	s, err := c.CallStream(ctx, task, Kwargs(task, item), stream.WithPacing(false), stream.WithMaxChunks(WarmupStreamChunks))
	if err != nil {
		return err
	}
	next, stop := iter.Pull2(s.Chunks(ctx))
	defer stop()
	for k := range WarmupStreamChunks {
		if err := record(WarmupCall{Path: WarmupStream, Chunk: k, Run: run}, func() error {
			_, err, ok := next()
			if !ok {
				return errors.New("the session ended before its chunk")
			}
			return err
		}); err != nil {
			return fmt.Errorf("chunk %d: %w", k, err)
		}
	}
	return nil
}

// warmupKwargs returns the inputs of one warm-up call of task (of one item
// when it is batched) keyed by field id: spec.InferenceTaskProfile.
// WarmupValues, each value checked against its field and in the form the
// generated params give it.
func warmupKwargs(task *spec.InferenceTaskProfile) (map[string]any, error) {
	values, ps := task.WarmupValues()
	if len(ps) > 0 {
		return nil, errors.New(spec.JoinProblems(ps))
	}
	item := map[string]any{}
	for i := range task.Inputs {
		f := &task.Inputs[i]
		v, ok := values[f.FieldID]
		if !ok {
			continue
		}
		if !f.Kind.TensorLike() {
			rules, err := params.CompileField(f)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.FieldID, err)
			}
			nv, vs := rules.CheckValue(v)
			if len(vs) > 0 {
				errs := make([]error, len(vs))
				for j, x := range vs {
					errs[j] = x
				}
				return nil, fmt.Errorf("warm-up value of field %q: %w", f.FieldID, errors.Join(errs...))
			}
			if v, err = engine.ValueOf(nv); err != nil {
				return nil, fmt.Errorf("warm-up value of field %q: %w", f.FieldID, err)
			}
		}
		item[f.FieldID] = v
	}
	return item, nil
}
