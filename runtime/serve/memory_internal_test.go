package serve

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeUnits are units of fake sizes whose loads and evictions are
// recorded (and checked against the budget as they happen).
type fakeUnits struct {
	t        *testing.T
	m        *memory
	mu       sync.Mutex
	resident map[string]int64 // what is loaded, by name: the fake engine's memory
	peak     int64            // the most the fake engine held
	peakUsed int64            // the most the manager charged, seen as loads begin
	log      []string
	gate     chan struct{} // when not nil, loads wait for it
	loads    atomic.Int64
	fail     map[string]error
}

// newFake returns a manager of units named by sizes under budget, with a
// clock that advances one second a reading.
func newFake(t *testing.T, budget int64, sizes map[string]int64, order ...string) (*fakeUnits, map[string]*memUnit) {
	f := &fakeUnits{t: t, resident: map[string]int64{}, fail: map[string]error{}}
	units := map[string]*memUnit{}
	var list []*memUnit
	for _, name := range order {
		size := sizes[name]
		u := &memUnit{name: name}
		u.size = func() (int64, error) { return size, nil }
		u.load = func() error {
			if f.gate != nil {
				<-f.gate
			}
			f.loads.Add(1)
			f.m.mu.Lock()
			used := f.m.used
			f.m.mu.Unlock()
			f.mu.Lock()
			f.peakUsed = max(f.peakUsed, used)
			defer f.mu.Unlock()
			if err := f.fail[name]; err != nil {
				return err
			}
			f.resident[name] = size
			var sum int64
			for _, n := range f.resident {
				sum += n
			}
			f.peak = max(f.peak, sum)
			f.log = append(f.log, "load "+name)
			return nil
		}
		u.evict = func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.resident, name)
			f.log = append(f.log, "evict "+name)
		}
		units[name] = u
		list = append(list, u)
	}
	f.m = newMemory(budget, list)
	var clock atomic.Int64
	f.m.now = func() time.Time { return time.Unix(clock.Add(1), 0) }
	return f, units
}

// use takes and gives back one lease on u.
func (f *fakeUnits) use(u *memUnit) {
	f.t.Helper()
	release, err := f.m.acquire(context.Background(), u, false)
	if err != nil {
		f.t.Fatal(err)
	}
	release()
}

// settle waits until no eviction runs in the background.
func (f *fakeUnits) settle() {
	for i := 0; i < 1000; i++ {
		f.m.mu.Lock()
		busy := false
		for _, u := range f.m.units {
			busy = busy || u.state == unitDraining || u.state == unitLoading
		}
		f.m.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatal("units still loading or draining")
}

func (f *fakeUnits) loaded() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for n := range f.resident {
		out[n] = true
	}
	return out
}

func TestMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	f, u := newFake(t, 250, map[string]int64{"a": 100, "b": 100, "c": 100}, "a", "b", "c")
	f.use(u["a"])
	f.use(u["b"])
	f.use(u["a"]) // a is now more recent than b
	f.use(u["c"]) // does not fit: b goes
	f.settle()
	if got := f.loaded(); !got["a"] || got["b"] || !got["c"] {
		t.Errorf("loaded %v, want a and c (b was the least recently used)", got)
	}
	if f.peak > 250 || f.peakUsed > 250 {
		t.Errorf("peak %d, charged %d: over the budget 250", f.peak, f.peakUsed)
	}
	if u["b"].evicted != 1 || u["a"].loads != 1 || u["c"].loads != 1 {
		t.Errorf("b evicted %d, a loaded %d, c loaded %d: want 1 each", u["b"].evicted, u["a"].loads, u["c"].loads)
	}
	if used, _, _, _ := f.m.stats(); used != 200 {
		t.Errorf("used %d, want 200", used)
	}
}

func TestMemoryNeverEvictsPins(t *testing.T) {
	f, u := newFake(t, 200, map[string]int64{"p": 100, "b": 100, "c": 100}, "p", "b", "c")
	u["p"].pinned = true
	if err := f.m.loadPinned(); err != nil {
		t.Fatal(err)
	}
	f.use(u["b"])
	f.use(u["c"])
	f.use(u["b"])
	f.settle()
	if got := f.loaded(); !got["p"] || !got["b"] || got["c"] {
		t.Errorf("loaded %v, want p (pinned) and b", got)
	}
	if u["p"].loads != 1 || u["p"].evicted != 0 {
		t.Errorf("the pin loaded %d times and was evicted %d: want 1 and 0", u["p"].loads, u["p"].evicted)
	}
}

func TestMemoryRefusesTooLarge(t *testing.T) {
	f, u := newFake(t, 100, map[string]int64{"big": 101, "p": 60, "q": 60}, "big", "p", "q")
	_, err := f.m.acquire(context.Background(), u["big"], false)
	if status(err) != http.StatusInsufficientStorage {
		t.Errorf("acquire big: %v (status %d), want 507", err, status(err))
	}
	u["p"].pinned, u["q"].pinned = true, true
	if err := f.m.loadPinned(); err == nil {
		t.Error("two pins of 60 under a budget of 100 loaded")
	}
	u["big"].pinned = true
	if err := f.m.loadPinned(); err == nil {
		t.Error("a pin of 101 under a budget of 100 loaded")
	}
	if f.loads.Load() != 1 {
		t.Errorf("%d loads, want 1 (p)", f.loads.Load())
	}
}

func TestMemoryKeepAlive(t *testing.T) {
	f, u := newFake(t, 0, map[string]int64{"a": 1, "b": 1, "p": 1}, "a", "b", "p")
	for _, x := range u {
		x.keepAlive = 10 * time.Second
	}
	u["p"].pinned = true
	if err := f.m.loadPinned(); err != nil {
		t.Fatal(err)
	}
	f.use(u["a"])
	release, err := f.m.acquire(context.Background(), u["b"], false) // b stays in use
	if err != nil {
		t.Fatal(err)
	}
	now := u["a"].lastUsed
	f.m.sweep(now.Add(9 * time.Second))
	if got := f.loaded(); !got["a"] {
		t.Errorf("a evicted before its keep-alive: %v", got)
	}
	f.m.sweep(now.Add(time.Hour))
	if got := f.loaded(); got["a"] || !got["b"] || !got["p"] {
		t.Errorf("after the keep-alive: %v, want b (in use) and p (pinned)", got)
	}
	release()
	f.m.sweep(now.Add(2 * time.Hour))
	if got := f.loaded(); got["b"] || !got["p"] {
		t.Errorf("after b's release: %v, want p only", got)
	}
	f.use(u["a"]) // loads again
	if u["a"].loads != 2 || u["a"].evicted != 1 {
		t.Errorf("a loaded %d, evicted %d; want 2 and 1", u["a"].loads, u["a"].evicted)
	}
}

func TestMemoryLoadsOnceForConcurrentCalls(t *testing.T) {
	f, u := newFake(t, 100, map[string]int64{"a": 100}, "a")
	f.gate = make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := f.m.acquire(context.Background(), u["a"], false)
			if err == nil {
				release()
			}
			errs <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.loads.Load(); n != 1 {
		t.Errorf("%d loads, want 1", n)
	}
	if u["a"].users != 0 {
		t.Errorf("%d leases left", u["a"].users)
	}
}

func TestMemoryDrainsInUseAndWaits(t *testing.T) {
	f, u := newFake(t, 200, map[string]int64{"a": 100, "b": 100, "c": 100}, "a", "b", "c")
	relA, err := f.m.acquire(context.Background(), u["a"], false)
	if err != nil {
		t.Fatal(err)
	}
	relB, err := f.m.acquire(context.Background(), u["b"], true) // a session: never drained
	if err != nil {
		t.Fatal(err)
	}
	// Both in use: c waits until its deadline, and a (not the session's
	// b) is set draining meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err = f.m.acquire(ctx, u["c"], false)
	cancel()
	if status(err) != http.StatusServiceUnavailable {
		t.Fatalf("c while a and b are in use: %v, want 503", err)
	}
	if u["a"].state != unitDraining || u["b"].state != unitResident {
		t.Errorf("states a %d b %d, want a draining, b resident", u["a"].state, u["b"].state)
	}
	// A call for a waits while it drains; c gets its room once a's call ends.
	done := make(chan error, 2)
	go func() {
		rel, err := f.m.acquire(context.Background(), u["c"], false)
		if err == nil {
			rel()
		}
		done <- err
	}()
	relA()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.settle()
	if got := f.loaded(); got["a"] || !got["b"] || !got["c"] {
		t.Errorf("loaded %v, want b and c", got)
	}
	relB()
	if f.peak > 200 || f.peakUsed > 200 {
		t.Errorf("peak %d, charged %d: over the budget 200", f.peak, f.peakUsed)
	}
}

func TestMemoryLoadFailure(t *testing.T) {
	f, u := newFake(t, 100, map[string]int64{"a": 100}, "a")
	boom := errors.New("boom")
	f.fail["a"] = boom
	if _, err := f.m.acquire(context.Background(), u["a"], false); !errors.Is(err, boom) {
		t.Fatalf("acquire: %v, want boom", err)
	}
	if used, _, _, _ := f.m.stats(); used != 0 || u["a"].state != unitIdle {
		t.Errorf("after a failed load: used %d, state %d", used, u["a"].state)
	}
	delete(f.fail, "a")
	f.use(u["a"])
}

// TestMemoryRandomMix runs leases on 5 units under a budget of 2 from 8
// goroutines: the fake engine never holds more than the budget.
func TestMemoryRandomMix(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	sizes := map[string]int64{}
	for _, n := range names {
		sizes[n] = 100
	}
	f, u := newFake(t, 250, sizes, names...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				x := u[names[(g*7+i*13+i*i)%len(names)]]
				release, err := f.m.acquire(context.Background(), x, false)
				if err != nil {
					t.Error(err)
					return
				}
				f.mu.Lock()
				in := f.resident[x.name] > 0
				f.mu.Unlock()
				if !in {
					t.Errorf("%s leased but not loaded", x.name)
				}
				release()
			}
		}()
	}
	wg.Wait()
	f.settle()
	if f.peak > 250 || f.peakUsed > 250 {
		t.Errorf("peak %d, charged %d: over the budget 250", f.peak, f.peakUsed)
	}
	var loads, evictions int64
	for _, x := range u {
		loads += x.loads
		evictions += x.evicted
	}
	if loads < 5 || evictions == 0 {
		t.Errorf("%d loads, %d evictions", loads, evictions)
	}
}

// A reload's reservation (poll mode under the budget): the new revision
// is charged beside the serving one, the least recently used idle unit
// evicted for it (never the reloaded one), one too large beside the
// serving one refused at once; after swapCharge the unit is charged the
// new size and releasing the reservation (the old revision freed) leaves
// exactly it; a dropped unit gives its bytes back and refuses leases.
func TestMemoryReserveAndDrop(t *testing.T) {
	f, u := newFake(t, 250, map[string]int64{"a": 100, "b": 100}, "a", "b")
	f.use(u["b"])
	f.use(u["a"]) // b is the least recently used
	if _, err := f.m.reserve(context.Background(), u["a"], 200); status(err) != http.StatusInsufficientStorage {
		t.Errorf("200 bytes beside a's 100 under 250: %v, want 507", err)
	}
	r, err := f.m.reserve(context.Background(), u["a"], 120)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if got := f.loaded(); !got["a"] || got["b"] {
		t.Errorf("loaded %v after the reservation, want a only (b evicted for it)", got)
	}
	if used, _, _, _ := f.m.stats(); used != 220 {
		t.Errorf("used %d with the reservation, want 220", used)
	}
	f.m.swapCharge(u["a"], r)
	if u["a"].charged != 120 || u["a"].claim != 120 {
		t.Errorf("a charged %d (claim %d) after the swap, want 120", u["a"].charged, u["a"].claim)
	}
	r.release()
	r.release() // harmless twice
	if used, _, _, _ := f.m.stats(); used != 120 || f.m.committed != 120 {
		t.Errorf("used %d, committed %d once the old revision is freed: want 120", used, f.m.committed)
	}
	// A reservation that finds no room in time: every other unit in use.
	f.use(u["b"])
	release, err := f.m.acquire(context.Background(), u["b"], true) // a session: never drained
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.m.reserve(ctx, u["a"], 120); status(err) != http.StatusServiceUnavailable {
		t.Errorf("no room: %v, want 503", err)
	}
	// Dropped: leases refused, its bytes given back once its session ends.
	f.m.disable(u["b"], errRemoved)
	if _, err := f.m.acquire(context.Background(), u["b"], false); status(err) != http.StatusServiceUnavailable || !errors.Is(err, errRemoved) {
		t.Errorf("a lease on a disabled unit: %v", err)
	}
	dropped := make(chan error, 1)
	go func() { dropped <- f.m.drop(context.Background(), u["b"]) }()
	release()
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	if used, _, _, _ := f.m.stats(); used != 120 || f.m.committed != 120 || len(f.m.units) != 1 {
		t.Errorf("used %d, committed %d, %d units after the drop: want 120, 120, 1", used, f.m.committed, len(f.m.units))
	}
}
