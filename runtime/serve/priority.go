package serve

import (
	"context"
	"net/http"
	"time"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// Admission by priority and queue timeout (Triton's request parameters
// "priority" and "timeout"): an infer request may give a priority level —
// 1 is served first, larger levels later, 0 or none is the family's
// default_priority, else the server's (Config.DefaultPriority) — and a
// timeout in microseconds that
// bounds how long it may wait for an engine slot (or for its batch to
// form, under -batch) before it is answered 504 without running. Waiters
// for a variant's engine slots are served by level, then in arrival order;
// a batch goes at the best level among its requests. Sessions take the
// default level.

const (
	// PriorityParameter is the request parameter of a request's priority
	// level: 1 first, larger later, 0 the default.
	PriorityParameter = "priority"
	// TimeoutParameter is the request parameter of how long, in
	// microseconds, a request may wait to run.
	TimeoutParameter = "timeout"
)

// DefaultPriority is the level of a request that gives none (Config's
// default).
const DefaultPriority = 3

// errQueueTimeout answers a request that waited longer than its timeout.
var errQueueTimeout = withStatus(http.StatusGatewayTimeout, "the request waited longer than its timeout parameter to run")

// priorityKey is the context key of a request's place in the queue (place).
type priorityKey struct{}

// place is a request's priority level and the time it must run by
// (zero: no timeout).
type place struct {
	level int
	by    time.Time
}

// withPriority returns ctx carrying a request's place in the queue.
func withPriority(ctx context.Context, level int, by time.Time) context.Context {
	return context.WithValue(ctx, priorityKey{}, place{level, by})
}

// priorityOf returns the level and queue deadline ctx carries: the default
// level and none when it carries none.
func priorityOf(ctx context.Context) (int, time.Time) {
	if a, ok := ctx.Value(priorityKey{}).(place); ok {
		return a.level, a.by
	}
	return DefaultPriority, time.Time{}
}

// requestPlace reads a request's priority and timeout parameters:
// its level (def for 0 or none) and queue deadline, from arrived.
func requestPlace(p oip.Parameters, def int, arrived time.Time) (place, error) {
	a := place{level: def}
	if n, ok, err := p.IntParam(PriorityParameter); err != nil {
		return a, err
	} else if ok {
		if n < 0 || n > 1<<20 {
			return a, withStatus(http.StatusBadRequest, "parameter %q is %d: want 0 (the default level, %d) or a level from 1 (first)", PriorityParameter, n, def)
		}
		if n > 0 {
			a.level = int(n)
		}
	}
	if n, ok, err := p.IntParam(TimeoutParameter); err != nil {
		return a, err
	} else if ok {
		if n < 0 {
			return a, withStatus(http.StatusBadRequest, "parameter %q is %d: want microseconds ≥ 0 (0: none)", TimeoutParameter, n)
		}
		if n > 0 {
			a.by = arrived.Add(time.Duration(min(n, int64(time.Duration(1<<62)/time.Microsecond))) * time.Microsecond)
		}
	}
	return a, nil
}
