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
// per loaded model and task. Whenever the queue has steps and no batch of
// its own is running, one goroutine takes every step waiting, groups those
// that can share a call (the batch executor's rule, BatchConflict: the
// same num_frames, the same stacked inputs given — a first step has no
// state —, equal other inputs) and runs each group through the batched
// steps task (contract.BatchedSteps) with the batch executor: rows stacked,
// invariant padding, out-of-memory halving, outputs split back per session.
// Steps that arrive meanwhile wait for the next round, so a session is
// never held for another's cadence: a paused or slow session simply sends
// no step, and one that joins or leaves does so between rounds. No timer
// gathers steps: at low load a step runs at once (alone, padded to the
// smallest size measured to give the max's bits), at high load the steps
// that arrived during a round make the next.

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
		lt.queue = &stepQueue{c: c, l: l, ti: len(l.tasks), task: st}
		l.tasks[i].steps = len(l.tasks)
		l.tasks = append(l.tasks, lt)
	}
}

// stepQueue gathers the steps of one session-batched task's sessions.
type stepQueue struct {
	c    *Client
	l    *loaded
	ti   int                        // the batched steps' index in l.tasks
	task *spec.InferenceTaskProfile // contract.BatchedSteps

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

// run takes rounds of waiting steps until none is left.
func (q *stepQueue) run() {
	for {
		q.mu.Lock()
		calls := q.waiting
		q.waiting = nil
		if len(calls) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.round(calls)
	}
}

// round runs the steps of one round, in groups that can share a call.
func (q *stepQueue) round(calls []*stepCall) {
	var groups [][]*stepCall
	for _, sc := range calls {
		if err := sc.ctx.Err(); err != nil {
			sc.err = err
			close(sc.done)
			continue
		}
		placed := false
		for g, grp := range groups {
			if BatchConflict(q.task, Kwargs(q.task, sc.row), 0, Kwargs(q.task, grp[0].row), 0) == "" {
				groups[g] = append(grp, sc)
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []*stepCall{sc})
		}
	}
	for _, grp := range groups {
		rows := make([]map[string]any, len(grp))
		for i, sc := range grp {
			rows[i] = sc.row
		}
		// The round's calls are every session's: no one session's context
		// may stop them.
		// A step that fails on its own (its state, say) fails its session
		// only: the executor finds it by halving.
		opts := []batch.Option{batch.WithPerItemErrors()}
		var st batch.Stats
		if q.c.opts.SessionBatches != nil {
			opts = append(opts, batch.WithStats(func(s batch.Stats) { st = s }))
		}
		outs, err := q.call(rows, opts)
		if q.c.opts.SessionBatches != nil {
			q.c.opts.SessionBatches(SessionBatch{Task: q.task.TaskID, Sessions: len(grp), Calls: st.Calls, Padded: st.Padded})
		}
		own := map[int]error{}
		var items batch.ItemErrors
		if errors.As(err, &items) {
			for _, ie := range items {
				own[ie.Index] = fmt.Errorf("%s: %w", q.c.where(q.task.TaskID), ie.Err) // as the executor's errors are
			}
			err = nil
		}
		for i, sc := range grp {
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
}

// call runs rows (one group's steps) as one batched call, holding the
// client's session gate.
func (q *stepQueue) call(rows []map[string]any, opts []batch.Option) ([]itemOutputs, error) {
	if gate := q.c.opts.SessionGate; gate != nil {
		release, err := gate(context.Background())
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return q.c.runStacked(context.Background(), q.ti, q.task, Kwargs(q.task, rows...), CallOptions{}, opts...)
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
