package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Lazy loading and eviction under the model memory budget
// (Config.ModelMemory, ModelKeepAlive, PinModels; memory.go holds the
// budget's logic). Each variant is a unit charged its model checkpoint
// file's size; a call takes a lease on its variant's unit before it waits
// for an engine slot (execute, executeBatch; a realtime session for its
// life), loading it when it is not resident.

// errEvicted is the state of a variant the budget or its keep-alive
// evicted: it loads again on its next request.
var errEvicted = errors.New("evicted")

// managesMemory reports whether cfg asks for lazy loading: a budget, a
// keep-alive or pins.
func (c *Config) managesMemory() bool {
	return c.ModelMemory > 0 || c.ModelKeepAlive > 0 || len(c.PinModels) > 0
}

// checkMemory checks the memory settings of cfg.
func (c *Config) checkMemory() error {
	if c.ModelMemory < 0 || c.ModelKeepAlive < 0 {
		return fmt.Errorf("serve: model memory %d and keep-alive %v: want positive values or 0 (none)", c.ModelMemory, c.ModelKeepAlive)
	}
	if !c.managesMemory() {
		return nil
	}
	if c.ModelControl == ControlExplicit {
		return fmt.Errorf("serve: %w", ErrExplicitWithMemory)
	}
	return nil
}

// ErrExplicitWithMemory refuses explicit model control with memory
// management (a budget, a keep-alive, pins), and says why.
var ErrExplicitWithMemory = errors.New("a model memory budget, keep-alive or pins decide which models are resident (they load on request and are evicted), and explicit model control leaves that to the operator's load and unload calls: the two would undo each other (an unloaded model loaded again by the next request, a loaded one evicted); use one of them (-model-control poll or none combine with memory management)")

// newMemoryOf makes the budget's units, one per variant, pinned as
// Config.PinModels says.
func (s *Server) newMemoryOf() error {
	pinned := map[*model]bool{}
	for _, name := range s.cfg.PinModels {
		m := s.cat().models[name]
		if m == nil {
			return fmt.Errorf("serve: pinned model %q is not served (served: %s)", name, s.modelNames())
		}
		pinned[m] = true
	}
	var units []*memUnit
	for _, m := range s.cat().order {
		units = append(units, s.newUnits(m, pinned[m])...)
	}
	s.mem = newMemory(s.cfg.ModelMemory, units)
	return nil
}

// newUnits makes the budget's units of m's variants (v.unit).
func (s *Server) newUnits(m *model, pinned bool) []*memUnit {
	var units []*memUnit
	for _, v := range m.sortedVariants() {
		u := &memUnit{name: m.oip.Spec.ModelFamilyID + "/" + v.id, pinned: pinned, keepAlive: s.cfg.ModelKeepAlive,
			size:  func() (int64, error) { return s.checkpointSize(m, v) },
			load:  func() error { return s.lazyLoad(m, v) },
			evict: func() { s.evict(m, v) }}
		v.unit = u
		units = append(units, u)
	}
	return units
}

// checkpointSize is the size of v's model checkpoint file: what the
// budget charges it (0 for a variant with none).
func (s *Server) checkpointSize(m *model, v *variant) (int64, error) {
	m.control.Lock()
	src := m.source
	m.control.Unlock()
	path, err := s.checkpointFile(src, v.id)
	if err != nil || path == "" {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, withStatus(http.StatusServiceUnavailable, "model %s/%s: checkpoint: %v", m.oip.Spec.ModelFamilyID, v.id, err)
	}
	return fi.Size(), nil
}

// lazyLoad loads v for the budget: a failure is the waiting calls' 503.
func (s *Server) lazyLoad(m *model, v *variant) error {
	m.control.Lock()
	defer m.control.Unlock()
	if m.removed.Load() {
		// Poll mode removed it after this load was chosen: it loads
		// nothing, and its unit is dropped (poll.go).
		return withStatus(http.StatusServiceUnavailable, "model %s/%s is %v", m.oip.Spec.ModelFamilyID, v.id, errRemoved)
	}
	before := vmRSS()
	start := time.Now()
	if err := s.loadVariant(m, v); err != nil {
		return withStatus(http.StatusServiceUnavailable, "model %s/%s failed to load: %v", m.oip.Spec.ModelFamilyID, v.id, err)
	}
	s.cfg.Logger.Info("loaded on request", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", v.id),
		slog.Int64("rss_growth_bytes", vmRSS()-before),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	return nil
}

// evict takes v out of service for the budget or its keep-alive, as an
// unload does (no call holds a lease on it: the calls that pinned its
// revision finish first), and returns once its module is freed.
func (s *Server) evict(m *model, v *variant) {
	m.control.Lock()
	defer m.control.Unlock()
	v.loaded.Store(false)
	if !m.removed.Load() { // a removed model's state stays errRemoved
		err := errEvicted
		v.loadErr.Store(&err)
	}
	s.health.notify()
	freed := s.retireKept(m, v)
	if old := v.swap(nil); old != nil {
		freed = append(freed, s.retire(m, old))
	}
	for _, f := range freed {
		<-f
	}
	s.cfg.Logger.Info("evicted", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", v.id))
}

// lease takes a lease on v's unit for one call (session: a realtime
// session's life), loading it first when the budget manages memory and it
// is not resident; release it when done. The wait for the load ends with
// ctx, or at the request's queue timeout (its "timeout" parameter) when it
// has one: 503 with Retry-After either way.
func (s *Server) lease(ctx context.Context, v *variant, session bool) (release func(), err error) {
	if s.mem == nil || v.unit == nil {
		return func() {}, nil
	}
	if _, by := priorityOf(ctx); !by.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, by)
		defer cancel()
	}
	return s.mem.acquire(ctx, v.unit, session)
}

// keepAliveTick is how often idle models are looked at for their
// keep-alive: a quarter of it, between 10 ms and 1 s.
func keepAliveTick(d time.Duration) time.Duration {
	return min(max(d/4, 10*time.Millisecond), time.Second)
}

// vmRSS is the process's resident set size in bytes (VmRSS of
// /proc/self/status; 0 where there is none).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
