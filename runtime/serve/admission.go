package serve

import (
	"container/heap"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// admission bounds the work in flight: the infer requests admitted
// (Config.MaxQueue) and the bytes their bodies and decoded tensors hold
// (Config.MaxInflightBytes). Both are refused at once (429) rather than
// queued: a client retries with backoff, a queue would only move the
// waiting into the server.
type admission struct {
	maxRequests int64
	requests    atomic.Int64

	maxBytes int64
	mu       sync.Mutex
	bytes    int64
	freed    chan struct{} // closed (and dropped) when bytes are given back while someone waits
}

// admit counts one infer request in; release counts it out.
func (a *admission) admit() (release func(), err error) {
	if a.requests.Add(1) > a.maxRequests {
		a.requests.Add(-1)
		return nil, errQueueFull
	}
	var once sync.Once
	return func() { once.Do(func() { a.requests.Add(-1) }) }, nil
}

// reserve takes n bytes of the in-flight budget, or refuses with 429.
func (a *admission) reserve(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bytes+n > a.maxBytes {
		return withStatus(http.StatusTooManyRequests, "the requests in flight hold %d of the server's %d bytes, and this one needs %d more; retry later", a.bytes, a.maxBytes, n)
	}
	a.bytes += n
	return nil
}

// reserveWait takes n bytes of the in-flight budget, waiting for them
// until ctx ends (429 then). It is for a message whose size is not
// declared before it arrives (gRPC): it reserves the largest size a
// message may have while it arrives, a wait of the time it takes others'
// messages to arrive, rather than a refusal that the next microsecond
// would not have needed.
func (a *admission) reserveWait(ctx context.Context, n int64) error {
	for {
		a.mu.Lock()
		if a.bytes+n <= a.maxBytes {
			a.bytes += n
			a.mu.Unlock()
			return nil
		}
		if a.freed == nil {
			a.freed = make(chan struct{})
		}
		freed := a.freed
		a.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return withStatus(http.StatusTooManyRequests, "the requests in flight held the server's %d bytes until this one's deadline (it needs %d while its message arrives); retry later", a.maxBytes, n)
		}
	}
}

// give returns n bytes to the budget.
func (a *admission) give(n int64) {
	a.mu.Lock()
	a.bytes -= n
	if a.freed != nil {
		close(a.freed)
		a.freed = nil
	}
	a.mu.Unlock()
}

// bytesInUse returns the bytes reserved now.
func (a *admission) bytesInUse() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes
}

// holding is the in-flight bytes one request holds, returned at once when
// it is answered.
type holding struct {
	a *admission
	n int64
}

// add reserves n more bytes for the request.
func (h *holding) add(n int64) error {
	if err := h.a.reserve(n); err != nil {
		return err
	}
	h.n += n
	return nil
}

// addWait reserves n more bytes for the request, waiting for them until
// ctx ends (admission.reserveWait).
func (h *holding) addWait(ctx context.Context, n int64) error {
	if err := h.a.reserveWait(ctx, n); err != nil {
		return err
	}
	h.n += n
	return nil
}

// give returns n of the bytes the request holds.
func (h *holding) give(n int64) {
	h.a.give(n)
	h.n -= n
}

// done returns everything the request holds (nothing for a nil holding).
func (h *holding) done() {
	if h != nil && h.n != 0 {
		h.a.give(h.n)
		h.n = 0
	}
}

// slots bound the engine calls that run at once for one variant.
type slots struct{ q *slotQueue }

// slotQueue is a counting semaphore whose waiters are served by priority
// (lower level first), then in order of arrival (priority.go).
type slotQueue struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiting waiters
}

func newSlots(n int) slots { return slots{&slotQueue{free: n}} }

// acquire waits for a slot, behind the waiters of a lower level and those
// of its own level that came first, until ctx ends — or, when ctx carries
// a queue deadline (a request's timeout parameter), until then:
// errQueueTimeout.
func (s slots) acquire(ctx context.Context) (release func(), err error) {
	q := s.q
	level, by := priorityOf(ctx)
	q.mu.Lock()
	if q.free > 0 && len(q.waiting) == 0 {
		q.free--
		q.mu.Unlock()
		return q.releaser(), nil
	}
	w := &waiter{level: level, seq: q.seq, ready: make(chan struct{})}
	q.seq++
	heap.Push(&q.waiting, w)
	q.mu.Unlock()
	var expired <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.ready:
		return q.releaser(), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = errQueueTimeout
	}
	q.mu.Lock()
	granted := w.index < 0
	if !granted {
		heap.Remove(&q.waiting, w.index)
	}
	q.mu.Unlock()
	if granted {
		q.releaser()() // handed over as the wait ended: pass it on
	}
	return nil, err
}

// waiters returns how many wait for a slot now.
func (s slots) waiters() int64 {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	return int64(len(s.q.waiting))
}

// releaser returns the release of one held slot: it goes to the first
// waiter, or back to the free ones. Releasing twice is harmless.
func (q *slotQueue) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if len(q.waiting) > 0 {
				w := heap.Pop(&q.waiting).(*waiter)
				w.index = -1
				close(w.ready)
				return
			}
			q.free++
		})
	}
}

// waiter is one acquire waiting for a slot.
type waiter struct {
	level int
	seq   uint64
	ready chan struct{} // closed when it is handed a slot
	index int           // in the heap; -1 once handed a slot
}

// waiters is a heap of waiters, the first to serve at the top.
type waiters []*waiter

func (h waiters) Len() int { return len(h) }
func (h waiters) Less(i, j int) bool {
	return h[i].level < h[j].level || h[i].level == h[j].level && h[i].seq < h[j].seq
}
func (h waiters) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiters) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

// tracker counts work in progress and tells when it is all done once
// draining began. (A sync.WaitGroup cannot take new work while another
// goroutine waits on it.)
type tracker struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed when n drops to 0 while draining
}

// enter counts one piece of work in; it refuses new work once draining
// began, unless force (work that belongs to work already counted in).
func (t *tracker) enter(force bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining && !force {
		return false
	}
	t.n++
	return true
}

// count returns the pieces of work counted in now.
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// leave counts one piece of work out.
func (t *tracker) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// drain refuses new work from now on and returns a channel closed once
// the work in progress is done.
func (t *tracker) drain() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining = true
	ch := make(chan struct{})
	if t.n == 0 {
		close(ch)
	} else if t.idle != nil {
		ch = t.idle
	} else {
		t.idle = ch
	}
	return ch
}
