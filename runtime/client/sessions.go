package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/params"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	wftensor "github.com/worldfoundry/wfgen/runtime/tensor"
)

// Batching sessions (spec.SessionBatchingSpec).
//
// The steps of a session-batched streaming task's sessions go to one queue
// per loaded model and task. While the queue has steps, one goroutine
// repeats: wait for an engine slot (the client's session gate: a server's
// slots, else one call at a time), then take the oldest waiting step and
// the waiting steps that can share its call (the batch executor's rule,
// BatchConflict: the same num_frames, the same stacked inputs given — a
// first step has no state —, equal other inputs), at most max_batch_size,
// and run them as one call of the batched steps task
// (contract.BatchedSteps) on a goroutine of its own, which hands each
// session its row as soon as the call is over and gives the slot back.
// Calls run side by side as far as the gate allows, and steps arrive while
// the queue waits for a slot, so the busier the engine, the fuller the
// calls. A session is never held for another's cadence: a paused or slow
// session simply sends no step, and one that joins or leaves does so
// between calls. No timer gathers steps: at low load a step runs at once
// (alone, padded to the smallest size measured to give the max's bits).

// addSteps adds a loaded task for the batched steps of each
// session-batched streaming task the module can run that way (its method
// takes controls), and its queue.
func (l *loaded) addSteps(c *Client) {
	for i := range c.spec.Tasks {
		t := &c.spec.Tasks[i]
		if t.SessionBatching == nil || len(t.SessionBatchingProblems()) > 0 || !l.tasks[i].args[ArgControls] {
			continue
		}
		args := slices.Sorted(maps.Keys(l.tasks[i].args)) // one order: one probe key per shape
		st := contract.BatchedSteps(t, args)
		lt := loadedTask{args: l.tasks[i].args, outputs: params.CompileOutputs(st), base: l.tasks[i].base, baseErr: l.tasks[i].baseErr, task: st, equiv: &equivalence{}}
		lt.batch, lt.batchCfg, lt.batchErr = c.batchConfig(st, l, nil)
		lt.queue = &stepQueue{c: c, ti: len(l.tasks), task: st, own: make(chan struct{}, 1)}
		l.tasks[i].steps = len(l.tasks)
		l.tasks = append(l.tasks, lt)
	}
}

// stepQueue gathers the steps of one session-batched task's sessions.
type stepQueue struct {
	c    *Client
	ti   int                        // the batched steps' index in l.tasks
	task *spec.InferenceTaskProfile // contract.BatchedSteps

	own chan struct{} // one call at a time without a session gate

	mu      sync.Mutex
	waiting []*stepCall
	running bool
}

// stepCall is one session's step in the queue.
type stepCall struct {
	ctx  context.Context
	row  map[string]any // the step's inputs by field id of the batched task
	done chan struct{}
	out  map[string]any // the session's row of the outputs, by artifact id
	err  error
}

// step runs one step through the queue: it returns the session's row of the
// batched call's outputs (views the caller may keep) once its round ran.
func (q *stepQueue) step(ctx context.Context, row map[string]any) (map[string]any, error) {
	sc := &stepCall{ctx: ctx, row: row, done: make(chan struct{})}
	q.mu.Lock()
	q.waiting = append(q.waiting, sc)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
	select {
	case <-sc.done:
		return sc.out, sc.err
	case <-ctx.Done():
		return nil, ctx.Err() // the round skips or drops it
	}
}

// run starts calls while steps wait: for each, a slot first, then the
// steps that share it.
func (q *stepQueue) run() {
	for {
		release, err := q.gate()
		q.mu.Lock()
		calls := q.take()
		if len(calls) == 0 {
			q.running = false
			q.mu.Unlock()
			if err == nil {
				release()
			}
			return
		}
		q.mu.Unlock()
		if err != nil {
			q.finish(calls, nil, err)
			continue
		}
		go func() {
			defer release()
			q.call(calls)
		}()
	}
}

// gate waits for a slot for one call: the client's session gate, else the
// queue's own one call at a time.
func (q *stepQueue) gate() (func(), error) {
	if g := q.c.opts.SessionGate; g != nil {
		return g(context.Background())
	}
	q.own <- struct{}{}
	return func() { <-q.own }, nil
}

// take removes from the waiting steps the oldest one still wanted and
// those that can share its call, at most the max batch size. q.mu is held.
func (q *stepQueue) take() []*stepCall {
	var calls []*stepCall
	var lead Inputs // the first step's, which the others must share a call with
	keep := q.waiting[:0]
	for _, sc := range q.waiting {
		switch {
		case sc.ctx.Err() != nil:
			sc.err = sc.ctx.Err()
			close(sc.done)
		case len(calls) == 0:
			calls, lead = append(calls, sc), Kwargs(q.task, sc.row)
		case len(calls) < q.task.Batching.MaxBatchSize && BatchConflict(q.task, Kwargs(q.task, sc.row), 0, lead, 0) == "":
			calls = append(calls, sc)
		default:
			keep = append(keep, sc)
		}
	}
	clear(q.waiting[len(keep):])
	q.waiting = keep
	return calls
}

// call runs the steps of one call and hands each session its row.
func (q *stepQueue) call(calls []*stepCall) {
	rows := make([]map[string]any, len(calls))
	for i, sc := range calls {
		rows[i] = sc.row
	}
	// A step that fails on its own (its state, say) fails its session
	// only: the executor finds it by halving.
	opts := []batch.Option{batch.WithPerItemErrors()}
	var st batch.Stats
	if q.c.opts.SessionBatches != nil {
		opts = append(opts, batch.WithStats(func(s batch.Stats) { st = s }))
	}
	// The call is every session's: no one session's context may stop it.
	outs, err := q.c.runStacked(context.Background(), q.ti, q.task, Kwargs(q.task, rows...), CallOptions{}, opts...)
	if q.c.opts.SessionBatches != nil {
		q.c.opts.SessionBatches(SessionBatch{Task: q.task.TaskID, Sessions: len(calls), Calls: st.Calls, Padded: st.Padded})
	}
	q.finish(calls, outs, err)
}

// finish hands each step of a call its outputs or error.
func (q *stepQueue) finish(calls []*stepCall, outs []itemOutputs, err error) {
	own := map[int]error{}
	var items batch.ItemErrors
	if errors.As(err, &items) {
		for _, ie := range items {
			own[ie.Index] = fmt.Errorf("%s: %w", q.c.where(q.task.TaskID), ie.Err) // as the executor's errors are
		}
		err = nil
	}
	for i, sc := range calls {
		switch {
		case err != nil:
			sc.err = err
		case own[i] != nil:
			sc.err = own[i]
		case i < len(outs) && outs[i].ran():
			sc.out = map[string]any{}
			outs[i].fill(sc.out)
		default:
			sc.err = fmt.Errorf("%s: step of row %d did not run", q.c.where(q.task.TaskID), i)
		}
		close(sc.done)
	}
}

// stepRow is a session's step as a row of the batched steps task: the
// item's call kwargs (base), num_frames, the controls as a float32 tensor
// [C] in the realtime spec's order, and the state when there is one.
func stepRow(base map[string]any, args map[string]bool, frames int, names []string, controls stream.Controls, state any) (map[string]any, error) {
	row := maps.Clone(base)
	if row == nil {
		row = map[string]any{}
	}
	if args[ArgNumFrames] {
		row[ArgNumFrames] = int64(frames)
	}
	ct := &wftensor.Tensor{DType: wftensor.Float32, Shape: []int64{int64(len(names))}, Data: make([]byte, 4*len(names))}
	for i, name := range names {
		binary.LittleEndian.PutUint32(ct.Data[4*i:], math.Float32bits(float32(controls[name])))
	}
	row[ArgControls] = ct
	if state != nil && args[ArgState] {
		t, ok := state.(*wftensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("a session-batched step's state must be a tensor, got %s", describe(state))
		}
		row[ArgState] = t
	}
	return row, nil
}

// stepsOf returns the queue of a session-batched task (index ti), nil when
// the task's sessions are not batched.
func (l *loaded) stepsOf(ti int) *stepQueue {
	if s := l.tasks[ti].steps; s > 0 {
		return l.tasks[s].queue
	}
	return nil
}
