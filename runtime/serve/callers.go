package serve

import "sync/atomic"

// callers run a variant's engine calls on long-lived goroutines, at most
// one per engine slot, started as calls need them. A goroutine started for
// one call grows its stack anew through the client and the engine binding
// every time (runtime.morestack and copystack were 4 % of the server's CPU
// per request on the tiny encoder); a caller's stack has grown once.
type callers struct {
	calls   chan func()
	started atomic.Int32
	max     int32
	stop    <-chan struct{} // closed by Server.Close: the callers return
}

func newCallers(max int, stop <-chan struct{}) *callers {
	return &callers{calls: make(chan func()), max: int32(max), stop: stop}
}

// run runs f on an idle caller, on a new caller when fewer than max have
// started, and otherwise on a goroutine of its own (a caller finishing its
// call and not yet idle again). It never waits.
func (c *callers) run(f func()) {
	select {
	case c.calls <- f:
		return
	default:
	}
	if c.started.Add(1) <= c.max {
		go c.loop(f)
		return
	}
	c.started.Add(-1)
	go f()
}

// loop runs f, then every call it is given until the server closes.
func (c *callers) loop(f func()) {
	for {
		f()
		select {
		case f = <-c.calls:
		case <-c.stop:
			return
		}
	}
}
