package serve

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
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
type slots chan struct{}

func newSlots(n int) slots { return make(slots, n) }

// acquire waits for a slot until ctx ends.
func (s slots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-s }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
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
