package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
)

// batcher is the dynamic batcher of one batchable task of one variant:
// concurrent requests are queued, and a single goroutine merges the queued
// requests that can share a forward call into batches of up to the task's
// max_batch_size, run through client.RunBatch (so padding, out-of-memory
// splitting and per-item errors are the batch executor's), and hands each
// request its own output or error.
type batcher struct {
	client *client.Client
	task   *runtime.InferenceTaskProfile
	max    int
	delay  time.Duration
	queue  chan *pending
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	stats  *counters
	// admitted returns the infer requests the server has admitted: when
	// every one of them is already waiting here, no other can join soon,
	// and the batch runs without waiting out the delay.
	admitted func() int64
}

// pending is one queued request.
type pending struct {
	ctx     context.Context
	call    map[string]any
	key     string // requests with equal keys can share a forward call
	arrived time.Time
	result  chan result // buffered: the batcher never blocks on it
}

type result struct {
	out map[string]any
	err error
}

func newBatcher(c *client.Client, task *runtime.InferenceTaskProfile, queue int, delay time.Duration, stats *counters, admitted func() int64) *batcher {
	b := &batcher{client: c, task: task, max: task.Batching.MaxBatchSize, delay: delay, stats: stats, admitted: admitted,
		queue: make(chan *pending, queue), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// close stops the batcher after the batch in progress; queued requests
// are answered with an error.
func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// submit queues one request and waits for its output. A full queue is
// errQueueFull at once; ctx ending returns its error at once (the batch the
// request joined still runs for the others).
func (b *batcher) submit(ctx context.Context, call map[string]any) (map[string]any, error) {
	key, err := batchKey(call)
	if err != nil {
		return nil, err
	}
	p := &pending{ctx: ctx, call: call, key: key, arrived: time.Now(), result: make(chan result, 1)}
	select {
	case b.queue <- p:
	default:
		return nil, errQueueFull
	}
	select {
	case r := <-p.result:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// batchKey identifies what a request must share with others to be stacked
// with them: the dtype and shape of each tensor and every other value.
func batchKey(call map[string]any) (string, error) {
	keys := make([]string, 0, len(call))
	for k := range call {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		sb.WriteString(k)
		sb.WriteByte('=')
		switch v := call[k].(type) {
		case *runtime.Tensor:
			fmt.Fprintf(&sb, "tensor %s%v", v.DType, v.Shape)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("kwarg %q: %w", k, err)
			}
			sb.Write(b)
		}
		sb.WriteByte(';')
	}
	return sb.String(), nil
}

// loop forms and runs batches until stopped.
func (b *batcher) loop() {
	defer close(b.done)
	var waiting []*pending // FIFO of requests not yet run
	for {
		if len(waiting) == 0 {
			select {
			case p := <-b.queue:
				waiting = append(waiting, p)
			case <-b.stop:
				b.drain(waiting)
				return
			}
		}
		waiting = b.gather(waiting)
		if waiting == nil {
			return // stopped
		}
		var run []*pending
		run, waiting = b.take(waiting)
		if len(run) > 0 {
			b.run(run)
		}
	}
}

// gather adds queued requests to waiting until the oldest request's group
// is full, its delay has passed, or every request the server has admitted
// is waiting here (no other can join). It returns nil once stopped (having
// answered every request).
func (b *batcher) gather(waiting []*pending) []*pending {
	for {
		// Take everything already queued without waiting.
		for more := true; more; {
			select {
			case p := <-b.queue:
				waiting = append(waiting, p)
			default:
				more = false
			}
		}
		if b.groupSize(waiting) >= b.max || int64(len(waiting)) >= b.admitted() {
			return waiting
		}
		wait := time.Until(waiting[0].arrived.Add(b.delay))
		if wait <= 0 {
			return waiting
		}
		t := time.NewTimer(wait)
		select {
		case p := <-b.queue:
			t.Stop()
			waiting = append(waiting, p)
		case <-t.C:
			return waiting
		case <-b.stop:
			t.Stop()
			b.drain(waiting)
			return nil
		}
	}
}

// groupSize counts the live requests that share the oldest one's key.
func (b *batcher) groupSize(waiting []*pending) int {
	n := 0
	for _, p := range waiting {
		if p.key == waiting[0].key {
			n++
		}
	}
	return n
}

// take removes from waiting up to max live requests with the oldest live
// request's key; requests whose context has ended are dropped.
func (b *batcher) take(waiting []*pending) (run, rest []*pending) {
	key := ""
	for _, p := range waiting {
		if p.ctx.Err() != nil {
			continue // its submit has returned already
		}
		if len(run) == 0 {
			key = p.key
		}
		if p.key == key && len(run) < b.max {
			run = append(run, p)
			continue
		}
		rest = append(rest, p)
	}
	return run, rest
}

// run runs one batch and answers its requests. The batch's context ends
// when every request's context has ended.
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
	items := make([]map[string]any, len(run))
	for i, p := range run {
		items[i] = p.call
	}
	b.stats.batches.Add(1)
	b.stats.batched.Add(int64(len(run)))
	outs, err := b.client.RunBatch(ctx, b.task.TaskID, items, batch.WithPerItemErrors())
	for _, stop := range stops {
		stop()
	}
	var itemErrs batch.ItemErrors
	errors.As(err, &itemErrs)
	for i, p := range run {
		switch {
		case outs == nil:
			p.result <- result{err: err}
		case outs[i] == nil:
			p.result <- result{err: itemError(itemErrs, i, err)}
		default:
			p.result <- result{out: outs[i]}
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

// drain answers every waiting and queued request: the server is closing.
func (b *batcher) drain(waiting []*pending) {
	for {
		select {
		case p := <-b.queue:
			waiting = append(waiting, p)
			continue
		default:
		}
		break
	}
	for _, p := range waiting {
		p.result <- result{err: errDraining}
	}
}
