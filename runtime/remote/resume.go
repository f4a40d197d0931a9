package remote

// Resuming a session whose connection broke (WithResume): the client
// keeps the token of the session's last snapshot it was answered and the
// controls it sent since, and on a broken connection opens the session
// again through the same URL — the balancer sends it to a live replica —
// from that token, makes the chunks the local session already released
// again (dropped), sending the logged controls before the chunks they
// applied to, and carries on with the chunk the local session waits for.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// WithResume makes the client's realtime sessions outlive their
// connection, and so the replica that serves them. After every every-th
// chunk (every ≥ 1) the client asks the server for a snapshot of the
// session — a message on the session's connection whose answer nobody
// waits for: no round trip on the way of a chunk, but a snapshot sealed
// on the server and its token sent back — and keeps the latest token and
// the controls it sent since. When the connection breaks (a transport
// error, a gRPC Unavailable, a proxy's reset; not an error of the server
// or the model), the session is opened again through the client's URL
// from that token (from the session's start before the first snapshot);
// the chunks the local session already released are made again and
// dropped, with the logged controls sent before the chunks they applied
// to, and the session goes on. The caller sees no error and no chunk
// twice or missing, and the chunks are bit for bit those of an unbroken
// session. Every replica must read the same session key
// (-session-key-file).
//
// A reopen is tried up to 4 times — twice at once, then after pauses of
// 50 and 100 ms (jittered) — and up to 4 breaks are resumed per chunk. A
// reopen that the server refuses (the token of another key or model:
// 400, 409, 501) ends the session with the break's error. A server
// without a session key refuses the snapshots: the session then resumes
// from its start, making every chunk again. A replay (stream.WithReplay)
// is not resumed. A resume costs a new connection, the restore, and the
// chunks made again: every-1 at most when the last snapshot's answer
// came before the break, every more when it did not (docs/serving.md, "A
// session outlives its replica"). The first open of a session is not
// retried: its error is the caller's.
func WithResume(every int) Option {
	return func(c *Client) error {
		if every < 1 {
			return fmt.Errorf("remote: resume with a snapshot every %d chunks, want ≥ 1", every)
		}
		c.resume = every
		return nil
	}
}

// maxResumes bounds the breaks of one chunk, and the tries of one reopen.
const maxResumes = 4

// errBroken is the error of a write while the session reopens.
var errBroken = errors.New("the session's connection broke")

// resumePoint is where a broken session reopens: a token (nil: the
// session's own start, s.token) at chunk next, and the controls changes
// from next on — the first one at next, the controls in force there.
type resumePoint struct {
	token []byte
	next  int
	log   []controlsChange
}

// controlsChange is controls sent to the server session, and the chunk
// they apply from.
type controlsChange struct {
	from     int
	controls stream.Controls
}

// at returns the controls in force at chunk i ≥ p.next.
func (p *resumePoint) at(i int) stream.Controls {
	var c stream.Controls
	for _, ch := range p.log {
		if ch.from <= i {
			c = ch.controls
		}
	}
	return c
}

// moveTo makes a snapshot's token at chunk next the resume point,
// forgetting the changes before it.
func (p *resumePoint) moveTo(token []byte, next int) {
	log := []controlsChange{{from: next, controls: p.at(next)}}
	for _, ch := range p.log {
		if ch.from > next {
			log = append(log, ch)
		}
	}
	p.token, p.next, p.log = token, next, log
}

// eventsNow and answersNow are the channels of the session's current
// connection.
func (s *session) eventsNow() chan received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events
}

func (s *session) answersNow() chan oip.SessionMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers
}

// askSnapshot asks the server for a snapshot after chunk k, every
// s.resume chunks (k+1-first a multiple of it): a message of its own, sent
// as soon as chunk k came, at the server's chunk boundary k+1 — in
// lockstep the server makes chunk k+1 only after the ack of k, which the
// next step sends. Its answer is not waited for: whoever sends the next
// message that is answered (controls, a snapshot, an ack's reopen) takes
// it first (takeSnapshot), in order.
func (s *session) askSnapshot(ctx context.Context, k int) {
	s.mu.Lock()
	ask := s.resume > 0 && !s.noSnap && (k+1-s.first)%s.resume == 0
	s.mu.Unlock()
	if !ask {
		return
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.takeSnapshot(s.answersNow())
	if s.write(ctx, oip.ControlsRequest{Snapshot: true}) == nil {
		s.snapPending = true
	}
}

// takeSnapshot reads the answer to askSnapshot's message, when one is
// due, from answers (s.ctl held): a token becomes the resume point; a
// refusal (a server without a session key) stops the snapshots, and the
// session resumes from its start.
func (s *session) takeSnapshot(answers <-chan oip.SessionMessage) {
	if !s.snapPending {
		return
	}
	s.snapPending = false
	m, ok := <-answers
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !ok:
	case m.Event == oip.EventSnapshot && m.Snapshot != nil:
		s.resumed.moveTo(m.Snapshot.Token, int(m.Snapshot.Next))
	default:
		s.noSnap = true
	}
}

// broken reports whether a step's event is a broken connection rather
// than the server's or the model's answer: a transport error, the status
// a gRPC call ends with when its connection is lost (Unavailable) or a
// balancer has no replica for it (502, 503), or the Internal status
// grpc-go gives a call that a proxy ended without the server's trailers
// or reset.
func broken(ev received, ok bool) bool {
	if !ok {
		return false // the session was ended here
	}
	if ev.err != nil {
		return true
	}
	if ev.msg.Event != oip.EventError {
		return false
	}
	switch ev.msg.Status {
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return true
	case http.StatusInternalServerError:
		return strings.Contains(ev.msg.Error, "server closed the stream without sending trailers") ||
			strings.HasPrefix(ev.msg.Error, "stream terminated by RST_STREAM")
	}
	return false
}

// reopen opens the session again after a break (cause) while the local
// session waits for chunk idx: from the resume point, making the chunks
// before idx again and dropping them. It returns cause when it cannot:
// every try failed, or the server refused the restore.
func (s *session) reopen(ctx context.Context, idx int, cause error) error {
	s.ctl.Lock() // controls wait: they go on the new connection
	defer s.ctl.Unlock()
	s.mu.Lock()
	if s.closed != nil { // ended here meanwhile
		s.mu.Unlock()
		return cause
	}
	old, unwatch, done, answers := s.conn, s.unwatch, s.done, s.answers
	s.conn = nil
	s.mu.Unlock()
	if old != nil {
		unwatch()
		close(done)
		old.Close()
	}
	s.takeSnapshot(answers) // an answer that came before the break
	for try := 0; try < maxResumes; try++ {
		if try > 1 { // the second try at once: the balancer may not know yet
			t := time.NewTimer(backoff(try - 2))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return cause
			}
		}
		s.mu.Lock()
		p := resumePoint{token: s.resumed.token, next: s.resumed.next, log: slices.Clone(s.resumed.log)}
		s.mu.Unlock()
		maxChunks := s.maxChunks
		if maxChunks > 0 {
			maxChunks -= p.next - s.first
		}
		conn, keep, err := s.dial(s.ctx, p.token, p.next, maxChunks, p.at(p.next))
		if err != nil {
			var se *StatusError
			if errors.As(err, &se) && se.Status != http.StatusBadGateway && se.Status != http.StatusServiceUnavailable {
				return cause // refused: another key, another model
			}
			continue
		}
		held, err := s.catchUp(ctx, conn, &p, idx)
		if err != nil {
			conn.Close()
			continue
		}
		s.mu.Lock()
		if s.closed != nil { // ended while it reopened
			err := s.closed
			s.mu.Unlock()
			conn.Close()
			return err
		}
		s.attachLocked(&heldConn{SessionConn: conn, held: held}, keep)
		s.mu.Unlock()
		return nil
	}
	return cause
}

// catchUp takes a reopened session from p.next to idx: it receives the
// chunks before idx (the local session released them: dropped), sends
// each logged change before the ack of the chunk before the one it
// applies from, and the acks. The messages it read past what it waited
// for — chunk idx, when it came before an answer — are returned, for the
// session's reader to deliver first.
func (s *session) catchUp(ctx context.Context, conn oip.SessionConn, p *resumePoint, idx int) ([]oip.SessionMessage, error) {
	var held []oip.SessionMessage
	next := func(want ...string) (oip.SessionMessage, error) {
		for {
			m, err := conn.Receive(ctx)
			if err != nil {
				return m, err
			}
			switch {
			case slices.Contains(want, m.Event):
				return m, nil
			case m.Event == oip.EventError || m.Event == oip.EventEnd:
				return m, fmt.Errorf("the reopened session ended: %s", m.Error)
			case m.Event == oip.EventChunk:
				held = append(held, m)
			}
		}
	}
	changes := func(from int) error {
		for _, ch := range p.log {
			if ch.from != from {
				continue
			}
			if err := conn.Send(ctx, oip.ControlsRequest{Controls: ch.controls}); err != nil {
				return err
			}
			if _, err := next(oip.EventControls, oip.EventRefused); err != nil {
				return err
			}
		}
		return nil
	}
	s.send.Lock()
	defer s.send.Unlock()
	s.acked = p.next - 1
	for j := p.next; j < idx; j++ {
		if _, err := next(oip.EventChunk); err != nil {
			return nil, err
		}
		if err := changes(j + 1); err != nil {
			return nil, err
		}
		ack := int64(j)
		if err := conn.Send(ctx, oip.ControlsRequest{Ack: &ack}); err != nil {
			return nil, err
		}
		s.acked = j
	}
	// Controls sent while chunk idx was being made apply after it.
	if err := changes(idx + 1); err != nil {
		return nil, err
	}
	return held, nil
}

// heldConn is a connection whose first messages were read already.
type heldConn struct {
	oip.SessionConn
	held []oip.SessionMessage
}

// Receive returns the held messages, then the connection's.
func (h *heldConn) Receive(ctx context.Context) (oip.SessionMessage, error) {
	if len(h.held) > 0 {
		m := h.held[0]
		h.held = h.held[1:]
		return m, nil
	}
	return h.SessionConn.Receive(ctx)
}
