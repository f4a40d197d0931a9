package remote

import (
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsPool keeps the WebSockets of sessions that ended by themselves, on a
// server that keeps them open (oip.KeepAliveSessionsSubprotocol), for the
// client's next sessions: as HTTP keep-alive does for requests, the next
// session skips the dial and the upgrade.
type wsPool struct {
	mu     sync.Mutex
	idle   []idleWS // the most recently kept last
	closed bool     // by the client's Close: nothing more is kept
}

// idleWS is a kept connection and when it was kept.
type idleWS struct {
	conn  *websocket.Conn
	since time.Time
}

const (
	// wsMaxIdle is how many connections a client keeps.
	wsMaxIdle = 2
	// wsIdleFor is how long a client keeps one: less than the server's
	// default idle timeout (serve.DefaultIdleTimeout, 30 s). A connection
	// the server closed first costs a retry on a new one (open).
	wsIdleFor = 20 * time.Second
)

// get returns a kept connection, or nil when there is none fresh enough.
func (p *wsPool) get() *websocket.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		last := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(last.since) < wsIdleFor {
			return last.conn
		}
		last.conn.CloseNow()
	}
	return nil
}

// put keeps conn, or closes it when the pool is full or closed.
func (p *wsPool) put(conn *websocket.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= wsMaxIdle {
		conn.CloseNow()
		return
	}
	p.idle = append(p.idle, idleWS{conn, time.Now()})
}

// close closes the kept connections and those put later.
func (p *wsPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.idle {
		w.conn.CloseNow()
	}
	p.idle, p.closed = nil, true
}
