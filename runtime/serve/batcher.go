package serve

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// batcher is the dynamic batcher of one batchable task of one variant:
// concurrent requests are queued, and a single goroutine merges the queued
// requests that can share a forward call into batches of up to the task's
// max_batch_size, run through the client's CallBatch (so padding,
// out-of-memory splitting and per-item errors are the batch executor's) on
// one of the variant's engine slots, and hands each request its own output
// or error. Which requests may share a forward call is the in-process
// executor's rule, client.BatchConflict, over the requests' decoded
// values.
// A request whose context ends leaves the queue at once. The queue needs
// no bound of its own: every request in it was admitted (Config.MaxQueue).
type batcher struct {
	// pin gives the revision a batch runs on (n: the one its requests
	// name, 0 for the newest), pinned once the batch has its engine slot
	// (revision.go): one batch never mixes two, and a batch that got its
	// slot after an unload is refused.
	pin   func(n int64) (*revision, error)
	task  *spec.InferenceTaskProfile
	slots slots
	max   int
	delay time.Duration
	stats *counters
	// active returns the infer requests the server is reading, queueing or
	// running: when every one of them is already waiting here, no other
	// can join soon, and the batch runs without waiting out the delay.
	active func() int64

	mu      sync.Mutex
	waiting []*pending    // FIFO of queued requests
	wake    chan struct{} // a request arrived (buffered, one)
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// pending is one queued request.
type pending struct {
	ctx     context.Context
	call    map[string]any // the decoded call inputs, keyed by field id
	in      client.Inputs  // call as the task's inputs
	arrived time.Time
	want    int64       // the revision it names (revisionOf), 0 for the newest: batched only with those naming the same
	level   int         // priority level: lower first (priority.go)
	by      time.Time   // must run by then (zero: no timeout)
	result  chan result // buffered: the batcher never blocks on it
}

type result struct {
	out     map[string]any
	version string // the revision that ran it
	err     error
}

func newBatcher(pin func(int64) (*revision, error), task *spec.InferenceTaskProfile, sl slots, delay time.Duration, stats *counters, active func() int64) *batcher {
	b := &batcher{pin: pin, task: task, slots: sl, max: task.Batching.MaxBatchSize, delay: delay, stats: stats, active: active,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// close stops the batcher after the batch in progress; queued requests
// are answered with an error.
func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// submit queues one request and waits for its output and the version
// that computed it. ctx ending returns its error at once and takes the
// request out of the queue (a batch it already joined still runs for the
// others).
func (b *batcher) submit(ctx context.Context, call map[string]any) (map[string]any, string, error) {
	level, by := priorityOf(ctx)
	p := &pending{ctx: ctx, call: call, in: client.Kwargs(b.task, call), want: revisionOf(ctx), arrived: time.Now(), level: level, by: by, result: make(chan result, 1)}
	b.mu.Lock()
	select {
	case <-b.stop:
		b.mu.Unlock()
		return nil, "", errDraining
	default:
	}
	b.waiting = append(b.waiting, p)
	b.mu.Unlock()
	b.signal()
	select {
	case r := <-p.result:
		return r.out, r.version, r.err
	case <-ctx.Done():
		b.remove(p)
		return nil, "", ctx.Err()
	}
}

// signal wakes the loop.
func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// remove takes p out of the queue if it is still there.
func (b *batcher) remove(p *pending) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.waiting, p); i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
}

// loop forms and runs batches until stopped.
func (b *batcher) loop() {
	defer close(b.done)
	for {
		run, stopped := b.next()
		if stopped {
			b.drain()
			return
		}
		b.run(run)
	}
}

// next waits for the next batch: up to max queued requests that may share
// a forward call with the first one — by priority level, then the oldest
// (priority.go) —, once that group is full, its delay has passed, or
// every request the server is working on is queued here (no other can
// join). A request past its timeout leaves the queue answered 504.
func (b *batcher) next() (run []*pending, stopped bool) {
	for {
		var wait time.Duration
		b.mu.Lock()
		b.expire(time.Now())
		if len(b.waiting) > 0 {
			group := b.group()
			oldest := b.waiting[0]
			wait = time.Until(oldest.arrived.Add(b.delay))
			if len(group) >= b.max || int64(len(b.waiting)) >= b.active() || wait <= 0 {
				b.take(group)
				b.mu.Unlock()
				return group, false
			}
			for _, p := range b.waiting {
				if !p.by.IsZero() {
					wait = max(min(wait, time.Until(p.by)), time.Microsecond) // wake to answer it
				}
			}
		}
		b.mu.Unlock()
		var timer *time.Timer
		var fired <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			fired = timer.C
		}
		select {
		case <-b.wake:
		case <-fired:
		case <-b.stop:
			return nil, true
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// expire answers and takes out the queued requests past their timeout;
// b.mu is held.
func (b *batcher) expire(now time.Time) {
	b.waiting = slices.DeleteFunc(b.waiting, func(p *pending) bool {
		if !p.by.IsZero() && !now.Before(p.by) {
			p.result <- result{err: errQueueTimeout}
			return true
		}
		return false
	})
}

// group returns up to max queued requests that may share a forward call
// (and name the same revision) with the first one to serve — the lowest priority level, then the
// oldest (client.BatchConflict) —, taking the others by the same order;
// b.mu is held.
func (b *batcher) group() []*pending {
	// The queue is in arrival order; a stable sort by level keeps it
	// within a level.
	slices.SortStableFunc(b.waiting, func(x, y *pending) int { return x.level - y.level })
	var g []*pending
	first := b.waiting[0]
	for _, p := range b.waiting {
		if p == first || (p.want == first.want && client.BatchConflict(b.task, p.in, 0, first.in, 0) == "") {
			g = append(g, p)
			if len(g) == b.max {
				break
			}
		}
	}
	return g
}

// take removes group from the queue; b.mu is held.
func (b *batcher) take(group []*pending) {
	b.waiting = slices.DeleteFunc(b.waiting, func(p *pending) bool { return slices.Contains(group, p) })
}

// run runs one batch on one of the variant's engine slots and answers its
// requests. The batch's context ends when every request's context has
// ended.
func (b *batcher) run(run []*pending) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(run)))
	stops := make([]func() bool, len(run))
	for i, p := range run {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	level := run[0].level // the group's first is its best
	release, err := b.slots.acquire(withPriority(ctx, level, time.Time{}))
	var rev *revision
	if err == nil {
		if rev, err = b.pin(run[0].want); err != nil {
			release()
		}
	}
	if err != nil {
		for _, p := range run {
			p.result <- result{err: err}
		}
		return
	}
	defer release()
	defer rev.leave()
	items := make([]map[string]any, len(run))
	for i, p := range run {
		items[i] = p.call
	}
	b.stats.batches.Add(1)
	b.stats.batched.Add(int64(len(run)))
	bctx, ran := batchStarted(ctx, run) // batch size, queue waits, spans (tracing.go)
	outs, err := client.CollectBatch(bctx, rev.client, b.task, client.Kwargs(b.task, items...), batch.WithPerItemErrors())
	ran(err)
	var itemErrs batch.ItemErrors
	errors.As(err, &itemErrs)
	for i, p := range run {
		switch {
		case outs == nil:
			p.result <- result{err: err}
		case outs[i] == nil:
			p.result <- result{err: itemError(itemErrs, i, err)}
		default:
			p.result <- result{out: outs[i], version: rev.version}
		}
	}
}

// itemError returns item i's own error from a batch run.
func itemError(errs batch.ItemErrors, i int, all error) error {
	if j := slices.IndexFunc(errs, func(e batch.ItemError) bool { return e.Index == i }); j >= 0 {
		return errs[j].Err
	}
	return all
}

// drain answers every queued request: the server is closing.
func (b *batcher) drain() {
	b.mu.Lock()
	waiting := b.waiting
	b.waiting = nil
	b.mu.Unlock()
	for _, p := range waiting {
		p.result <- result{err: errDraining}
	}
}
