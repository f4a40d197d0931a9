package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The resident-memory budget (Config.ModelMemory; docs/operating.md,
// Memory). Each served variant is one unit of the budget: it is loaded
// lazily, by the first call that needs it (which waits for the load,
// bounded by its deadline), and charged its size while it loads and while
// it is resident. When the next unit would not fit, the least recently
// used unpinned units are evicted first: idle ones at once, and, when
// that is not enough, the least recently used one without a session is
// drained (no new call takes it; the calls that have it finish; then it
// is freed) — a realtime session holds its unit for its life. Pinned
// units load at start and are never evicted; an idle unit is evicted
// after its keep-alive even under budget. A unit larger than the whole
// budget is refused with 507.
//
// The manager knows nothing of revisions or engines: a unit's load and
// evict functions do the work (lazyload.go), so that the logic is tested
// with fake sizes.

// unit states.
const (
	unitIdle     = iota // not loaded
	unitLoading         // being loaded, its size charged
	unitResident        // loaded: calls take leases on it
	unitDraining        // chosen for eviction: no new lease; evicted once its leases are gone
)

// memUnit is one unit of the budget: a variant.
type memUnit struct {
	name      string // MODEL/VERSION, for errors
	pinned    bool
	keepAlive time.Duration // 0: no keep-alive
	// size returns the bytes the unit is charged (its checkpoint's size).
	size func() (int64, error)
	// load loads the unit; evict frees it (after every lease is gone).
	load  func() error
	evict func()

	state    int
	disabled error        // its model was removed (poll mode): no lease, no load; the calls' 503
	charged  int64        // bytes charged now: loading or loaded (what the gauge reports)
	claim    int64        // bytes it holds of the budget: charged, or what its load will take (0 for a victim of another's load)
	users    int          // leases held: calls running, and sessions
	sessions int          // of users, realtime sessions (not drained)
	lastUsed time.Time    // when its last lease was released (or it loaded)
	attempt  *loadAttempt // the load in progress
	loads    int64        // loads that succeeded
	evicted  int64        // evictions (budget or keep-alive)
}

// loadAttempt is one load of a unit that callers wait on.
type loadAttempt struct {
	done    chan struct{}
	err     error
	waiters int // callers waiting: each is given a lease when the load succeeds
}

// memory is the budget's manager.
type memory struct {
	budget int64 // bytes; 0: no budget (keep-alive only)
	now    func() time.Time

	mu        sync.Mutex
	used      int64 // bytes charged: units loading and loaded, evicted ones until freed
	committed int64 // bytes claimed: what decides whether a load fits (at least used, at most the budget)
	changed   chan struct{}
	units     []*memUnit
	stop      chan struct{}
	stopped   chan struct{}
}

// errTooLarge refuses a unit larger than the whole budget: 507.
func errTooLarge(u *memUnit, size, budget int64) error {
	return withStatus(http.StatusInsufficientStorage, "model %s needs %d bytes (its checkpoint) and the whole model memory budget (-model-memory) is %d: it can never be loaded", u.name, size, budget)
}

// newMemory returns a manager of units under budget bytes (0: none).
func newMemory(budget int64, units []*memUnit) *memory {
	return &memory{budget: budget, now: time.Now, changed: make(chan struct{}), units: units}
}

// notify wakes everyone waiting for a change; m.mu is held.
func (m *memory) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// errLoadWait answers a call whose deadline came before its unit could
// load: 503 (Retry-After).
func errLoadWait(u *memUnit, why string, err error) error {
	return withStatus(http.StatusServiceUnavailable, "model %s is not loaded and %s before the request's deadline (%v); retry", u.name, why, err)
}

// acquire returns a lease on u, loading it first when it is not resident
// (evicting others as the budget needs), waiting until ctx ends: 503 then.
// session marks a realtime session's lease (its unit is not drained for
// others while it holds it). release gives the lease back.
func (m *memory) acquire(ctx context.Context, u *memUnit, session bool) (release func(), err error) {
	m.mu.Lock()
	for {
		if u.disabled != nil {
			m.mu.Unlock()
			return nil, &statusError{status: http.StatusServiceUnavailable, err: u.disabled}
		}
		switch u.state {
		case unitResident:
			u.users++
			if session {
				u.sessions++
			}
			m.mu.Unlock()
			return m.releaser(u, session), nil
		case unitLoading:
			a := u.attempt
			a.waiters++
			m.mu.Unlock()
			select {
			case <-a.done:
				if a.err != nil {
					return nil, a.err
				}
				// The load gave this call a lease.
				if session {
					m.mu.Lock()
					u.sessions++
					m.mu.Unlock()
				}
				return m.releaser(u, session), nil
			case <-ctx.Done():
				m.mu.Lock()
				select {
				case <-a.done:
					if a.err == nil {
						m.releaseLocked(u, false)
					}
				default:
					a.waiters--
				}
				m.mu.Unlock()
				return nil, errLoadWait(u, "its load did not finish", ctx.Err())
			}
		case unitIdle:
			m.mu.Unlock()
			size, err := u.size() // outside the lock: it may read files
			if err != nil {
				return nil, err
			}
			m.mu.Lock()
			if u.state != unitIdle {
				continue // loaded by another meanwhile
			}
			if m.budget > 0 && size > m.budget {
				m.mu.Unlock()
				return nil, errTooLarge(u, size, m.budget)
			}
			victims, ok := m.room(size, u)
			if ok {
				m.startLoad(u, size, victims)
				continue // wait for it as any caller does
			}
		}
		// Draining, or no room yet: wait for a change.
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, errLoadWait(u, "the models loaded did not make room for it", ctx.Err())
		}
		m.mu.Lock()
	}
}

// room returns the resident units to evict so that size more bytes fit:
// idle ones, least recently used first; ok is false when they are not
// enough, and then the least recently used unit without a session (and
// not pinned) is set draining, so that it is freed once its calls finish.
// m.mu is held.
func (m *memory) room(size int64, self *memUnit) (victims []*memUnit, ok bool) {
	if m.budget == 0 {
		return nil, true
	}
	free := m.budget - m.committed
	if size <= free {
		return nil, true
	}
	for _, v := range m.lru() {
		if v.users > 0 || v.state != unitResident || v.pinned || v == self {
			continue
		}
		victims = append(victims, v)
		free += v.claim
		if size <= free {
			return victims, true
		}
	}
	// Not enough idle: drain one in use, unless one already drains.
	for _, v := range m.units {
		if v.state == unitDraining {
			return nil, false
		}
	}
	for _, v := range m.lru() {
		if v.state == unitResident && v.users > 0 && !v.pinned && v.sessions == 0 && v != self {
			v.state = unitDraining
			return nil, false
		}
	}
	return nil, false
}

// lru returns the units by last use, the least recent first. m.mu is held.
func (m *memory) lru() []*memUnit {
	out := append([]*memUnit(nil), m.units...)
	for i := 1; i < len(out); i++ { // insertion sort: a handful of units, stable
		for j := i; j > 0 && out[j].lastUsed.Before(out[j-1].lastUsed); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// startLoad evicts victims and loads u in the background: u claims size
// bytes of the budget from now, the victims' claims passing to it, and is
// charged them once the victims are freed and its load begins, so that
// the bytes charged never exceed the budget. m.mu is held.
func (m *memory) startLoad(u *memUnit, size int64, victims []*memUnit) {
	for _, v := range victims {
		v.state = unitDraining // no lease meanwhile; its bytes stay charged until freed
		m.committed -= v.claim
		v.claim = 0
	}
	u.state, u.claim = unitLoading, size
	m.committed += size
	a := &loadAttempt{done: make(chan struct{})}
	u.attempt = a
	m.notify()
	go func() {
		for _, v := range victims {
			m.evictNow(v)
		}
		m.mu.Lock()
		u.charged = size
		m.used += size
		m.mu.Unlock()
		err := u.load()
		m.mu.Lock()
		defer m.mu.Unlock()
		a.err = err
		u.attempt = nil
		if err != nil {
			m.used -= u.charged
			m.committed -= u.claim
			u.state, u.charged, u.claim = unitIdle, 0, 0
		} else {
			u.state = unitResident
			u.users += a.waiters
			u.loads++
			u.lastUsed = m.now()
		}
		close(a.done)
		m.notify()
	}()
}

// evictNow frees v, draining with no lease left (the caller made sure):
// its bytes are given back once it is freed.
func (m *memory) evictNow(v *memUnit) {
	v.evict()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= v.charged
	m.committed -= v.claim
	v.state, v.charged, v.claim = unitIdle, 0, 0
	v.evicted++
	m.notify()
}

// releaser returns the release of one lease on u (harmless twice).
func (m *memory) releaser(u *memUnit, session bool) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.releaseLocked(u, session)
		})
	}
}

// releaseLocked gives one lease on u back; the last one of a draining
// unit evicts it. m.mu is held.
func (m *memory) releaseLocked(u *memUnit, session bool) {
	u.users--
	if session {
		u.sessions--
	}
	u.lastUsed = m.now()
	if u.users == 0 && u.state == unitDraining {
		go m.evictNow(u) // off the caller's path and lock
	}
	m.notify()
}

// loadPinned loads the pinned units at start, in order: an error when one
// cannot fit, alone or beside the pins before it.
func (m *memory) loadPinned() error {
	var errs []error
	for _, u := range m.units {
		if !u.pinned {
			continue
		}
		size, err := u.size()
		if err != nil {
			errs = append(errs, fmt.Errorf("pinned model %s: %w", u.name, err))
			continue
		}
		m.mu.Lock()
		if m.budget > 0 && m.committed+size > m.budget {
			m.mu.Unlock()
			errs = append(errs, fmt.Errorf("pinned model %s needs %d bytes (its checkpoint), and the budget (-model-memory %d) has %d left after the pins before it", u.name, size, m.budget, m.budget-m.committed))
			continue
		}
		m.mu.Unlock()
		release, err := m.acquire(context.Background(), u, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("pinned model %s: %w", u.name, err))
			continue
		}
		release()
	}
	return errors.Join(errs...)
}

// sweep evicts the units idle for longer than their keep-alive at now.
func (m *memory) sweep(now time.Time) {
	m.mu.Lock()
	var idle []*memUnit
	for _, u := range m.units {
		if u.keepAlive > 0 && !u.pinned && u.state == unitResident && u.users == 0 && now.Sub(u.lastUsed) >= u.keepAlive {
			u.state = unitDraining
			idle = append(idle, u)
		}
	}
	m.mu.Unlock()
	for _, u := range idle {
		m.evictNow(u)
	}
}

// start runs the keep-alive sweep every interval until stopAll.
func (m *memory) start(interval time.Duration) {
	m.stop, m.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.sweep(m.now())
			case <-m.stop:
				return
			}
		}
	}()
}

// stopAll stops the sweep (if started).
func (m *memory) stopAll() {
	if m.stop != nil {
		close(m.stop)
		<-m.stopped
		m.stop = nil
	}
}

// stats returns the bytes charged, in total and per resident unit.
func (m *memory) stats() (used int64, charged map[*memUnit]int64, loads, evictions map[*memUnit]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	charged, loads, evictions = map[*memUnit]int64{}, map[*memUnit]int64{}, map[*memUnit]int64{}
	for _, u := range m.units {
		charged[u], loads[u], evictions[u] = u.charged, u.loads, u.evicted
	}
	return m.used, charged, loads, evictions
}

// Poll mode under a budget (docs/operating.md, Memory): units come and go
// with their families' manifests, and a reload charges the new revision
// beside the serving one.

// add adds u, a variant of a family added while serving, not loaded.
func (m *memory) add(u *memUnit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.units = append(m.units, u)
	m.notify()
}

// disable refuses u's leases and loads from now on, with err (503).
func (m *memory) disable(u *memUnit, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u.disabled = err
	m.notify()
}

// drop takes u, disabled and freed by its model's unload, out of the
// budget once no call holds it and no load or eviction of it runs (ctx
// bounds the wait), giving its bytes back.
func (m *memory) drop(ctx context.Context, u *memUnit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for u.users > 0 || u.state == unitLoading || u.state == unitDraining {
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			m.mu.Lock()
			return fmt.Errorf("model %s: still in use: %w", u.name, ctx.Err())
		}
		m.mu.Lock()
	}
	m.used -= u.charged
	m.committed -= u.claim
	u.state, u.charged, u.claim = unitIdle, 0, 0
	for i, x := range m.units {
		if x == u {
			m.units = append(m.units[:i:i], m.units[i+1:]...)
			break
		}
	}
	m.notify()
	return nil
}

// reservation is budget bytes held for a revision of a unit beside the
// one it is charged for: a reload's new revision while it loads, then
// (swapped, swapCharge) the revision it replaced until that is freed.
type reservation struct {
	m       *memory
	charged int64
	claim   int64
	once    sync.Once
}

// release gives r's bytes back (harmless twice).
func (r *reservation) release() {
	r.once.Do(func() {
		r.m.mu.Lock()
		defer r.m.mu.Unlock()
		r.m.used -= r.charged
		r.m.committed -= r.claim
		r.charged, r.claim = 0, 0
		r.m.notify()
	})
}

// reserve holds size bytes of the budget for a new revision of u, which
// is resident: the least recently used idle units (never u) are evicted
// to make room, as for a load, and the bytes are charged once they are
// freed. It waits for room until ctx ends; a revision that cannot fit
// beside u's is refused at once.
func (m *memory) reserve(ctx context.Context, u *memUnit, size int64) (*reservation, error) {
	m.mu.Lock()
	for {
		if m.budget > 0 && size+u.charged > m.budget {
			m.mu.Unlock()
			return nil, withStatus(http.StatusInsufficientStorage, "model %s: its new checkpoint (%d bytes) does not fit beside the serving one (%d bytes) in the model memory budget (-model-memory %d), which a reload without downtime needs", u.name, size, u.charged, m.budget)
		}
		victims, ok := m.room(size, u)
		if ok {
			for _, v := range victims {
				v.state = unitDraining
				m.committed -= v.claim
				v.claim = 0
			}
			r := &reservation{m: m, claim: size}
			m.committed += size
			m.notify()
			m.mu.Unlock()
			for _, v := range victims {
				m.evictNow(v)
			}
			m.mu.Lock()
			r.charged = size
			m.used += size
			m.mu.Unlock()
			return r, nil
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, withStatus(http.StatusServiceUnavailable, "model %s: the models loaded did not make room for its new checkpoint (%d bytes) in time: %v", u.name, size, ctx.Err())
		}
		m.mu.Lock()
	}
}

// swapCharge exchanges u's charge with r's: the new revision r was held
// for is the one u is charged for now, and r holds the bytes of the one
// it replaced (released when that is freed). The totals do not change.
func (m *memory) swapCharge(u *memUnit, r *reservation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u.charged, r.charged = r.charged, u.charged
	u.claim, r.claim = r.claim, u.claim
	m.notify()
}
