package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// wsStream answers GET /v2/models/{model}[/versions/{version}]/stream: a
// realtime session on one WebSocket (oip.SessionsSubprotocol). The
// client's first message is the infer request; then the session's events
// go out as oip.Message texts (a chunk's video as one binary message after
// its header) while the client's oip.ControlsRequest messages come in,
// each answered by oip.EventControls or oip.EventRefused (an ack alone only
// when refused). The session ends
// when either side closes, when it ends by itself (EventEnd, a normal
// close) or fails (EventError, close code oip.CloseCodeBase + status).
// With oip.KeepAliveSessionsSubprotocol a session that ended by itself
// leaves the connection open for the next request, for Config.IdleTimeout
// or until the server shuts down.
//
// The same limits hold as for the stream of an infer request: the request
// must arrive within the read limit and within MaxBodyBytes, its tensors
// count against the in-flight budget until the session opens, and the
// session against MaxSessions; chunks run on the variant's engine slots.
// Origins are not checked: the server takes no ambient credentials
// (cookies), only a bearer token the page must hold.
func (s *Server) wsStream(w http.ResponseWriter, r *http.Request) {
	a, err := s.arrive(true)
	if err != nil {
		refuse(w, r, err)
		return
	}
	defer a.done()
	markStream(r.Context())
	// A session lasts as long as its client wants; the deadlines observe
	// set would stay on the connection after the upgrade.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{oip.KeepAliveSessionsSubprotocol, oip.SessionsSubprotocol},
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		if rec, ok := w.(*recorder); ok {
			rec.err = err.Error() // Accept answered the request
		}
		return
	}
	closing := false // the close handshake went on in the background
	defer func() {
		if !closing {
			c.CloseNow()
		}
	}()
	keepAlive := c.Subprotocol() == oip.KeepAliveSessionsSubprotocol
	if !keepAlive && c.Subprotocol() != oip.SessionsSubprotocol {
		c.Close(websocket.StatusPolicyViolation, fmt.Sprintf("offer the subprotocol %q", oip.SessionsSubprotocol))
		return
	}
	ws := &wsConn{c: c, base: s.writeCtx, timeout: sessionWriteTimeout}
	// One reader takes the connection's messages for its whole life:
	// requests between sessions, controls during them. A closed
	// connection ends the session (and ctx, the reader with it).
	// (Not r's context, which ends when the handler returns: a close
	// handshake that goes on in the background needs the reader.)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer func() {
		if !closing {
			cancel()
		}
	}()
	c.SetReadLimit(s.cfg.MaxBodyBytes)
	in := make(chan wsMessage)
	go func() {
		for {
			msg := s.readWS(ctx, c)
			select {
			case in <- msg:
			case <-ctx.Done():
				msg.hold.done()
				return
			}
			if msg.err != nil {
				return
			}
		}
	}()
	var next *wsMessage // the next request, read while a session ended
	for first := true; ; first = false {
		var msg wsMessage
		switch {
		case next != nil:
			msg, next = *next, nil
		case first:
			// A read whose context ends closes the connection at once,
			// with no word to the client; the read limit is a timer
			// instead, so that the refusal (408) can be sent first.
			limit := time.NewTimer(s.readLimit())
			select {
			case msg = <-in:
				limit.Stop()
			case <-limit.C:
				msg.err = withStatus(http.StatusRequestTimeout, "no infer request within %v of the connection", s.readLimit())
			case <-s.streamCtx.Done(): // a request still arriving at shutdown
				limit.Stop()
				msg.err = errDraining
			}
		default:
			idle := time.NewTimer(s.cfg.IdleTimeout)
			select {
			case msg = <-in:
				idle.Stop()
			// A kept connection closes as an idle HTTP keep-alive one
			// does: at once, with no close frame, since a close handshake
			// would wait for a client that is not reading.
			case <-idle.C:
				return
			case <-s.streamCtx.Done():
				idle.Stop()
				return
			}
		}
		if !first && msg.err != nil {
			return // the client closed the connection
		}
		if stray, controls := strayControls(msg); !first && stray {
			// An ack or controls meant for the session that ended: an ack
			// is dropped, controls are refused; the connection waits on.
			msg.hold.done()
			if controls {
				ws.send(oip.EventRefused, oip.ErrorResponse{Error: "no session is open (the last one ended): send an infer request to open one"})
			}
			continue
		}
		se, err := s.openWS(ctx, r, msg)
		if err != nil {
			if rec, ok := w.(*recorder); ok {
				rec.err = err.Error()
			}
			if s.streamCtx.Err() != nil {
				// The close handshake waits up to 5 s for a client that
				// may not read: it goes on without holding the drain.
				closing = true
				go func() {
					ws.fail(err)
					cancel()
				}()
				return
			}
			ws.fail(err)
			return
		}
		var ended, gone bool
		ended, gone, next = s.runWS(cancel, se, ws, in)
		shutdown := se.ctx.Err() != nil && s.streamCtx.Err() != nil
		se.close()
		switch {
		case gone:
			return
		case shutdown:
			// The close handshake waits up to 5 s for a client that may
			// not read: it goes on without holding the drain.
			closing = true
			go func() {
				c.Close(websocket.StatusGoingAway, "the server is shutting down")
				cancel()
			}()
			return
		case ws.failed:
			c.Close(websocket.StatusCode(oip.CloseCodeBase+http.StatusInternalServerError), "the session failed")
			return
		case !ended || !keepAlive:
			c.Close(websocket.StatusNormalClosure, "the session has ended")
			return
		}
	}
}

// strayControls says whether msg is a controls message — an ack and/or
// controls, no inputs — rather than an infer request, and whether it sets
// controls.
func strayControls(msg wsMessage) (stray, controls bool) {
	if msg.err != nil || msg.typ != websocket.MessageText {
		return false, false
	}
	var m struct {
		Inputs   json.RawMessage `json:"inputs"`
		Ack      json.RawMessage `json:"ack"`
		Controls json.RawMessage `json:"controls"`
		Snapshot json.RawMessage `json:"snapshot"`
	}
	if json.Unmarshal(msg.body, &m) != nil || m.Inputs != nil || m.Ack == nil && m.Controls == nil && m.Snapshot == nil {
		return false, false
	}
	return true, m.Controls != nil || m.Snapshot != nil
}

// wsMessage is one message read from a session's WebSocket, or why the
// connection ended. hold holds its bytes in the in-flight budget until
// whoever takes the message is done with it.
type wsMessage struct {
	typ  websocket.MessageType
	body []byte
	hold *holding
	err  error
}

// readWS reads a session connection's next message, its bytes reserved
// in the in-flight budget as they arrive (as a chunked REST body's are),
// not once the whole message is in memory.
func (s *Server) readWS(ctx context.Context, c *websocket.Conn) wsMessage {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return wsMessage{err: err}
	}
	hold := &holding{a: &s.adm}
	reserve := min(bodyStep, s.cfg.MaxBodyBytes)
	if err := hold.add(bodyCost * reserve); err != nil {
		return wsMessage{err: err}
	}
	body, err := readReserved(r, reserve, s.cfg.MaxBodyBytes, hold)
	if err != nil {
		hold.done()
		return wsMessage{err: err}
	}
	return wsMessage{typ: typ, body: body, hold: hold}
}

// runWS runs an open session on its WebSocket until it ends: its events
// out, the controls of in applied meanwhile. It returns whether the
// session ended by itself (EventEnd went out), whether the client went
// away (in ended; cancel, the connection's, has been called), and a
// message that came after EventEnd went out — the next session's request
// on a kept connection, read here by the controls reader.
func (s *Server) runWS(cancel context.CancelFunc, se *session, ws *wsConn, in <-chan wsMessage) (ended, gone bool, next *wsMessage) {
	clientGone, leave := context.WithCancel(context.Background())
	defer leave()
	var over atomic.Bool // EventEnd is going out: what comes now is no control
	send := func(event string, data any) error {
		if event == oip.EventEnd {
			over.Store(true)
		}
		return ws.send(event, data)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			var m wsMessage
			select {
			case m = <-in:
			case <-stop:
				return
			}
			switch {
			case over.Load():
				next = &m
				return
			case m.err != nil:
				leave()
				cancel()
				return
			case m.typ != websocket.MessageText:
				m.hold.done()
				ws.send(oip.EventRefused, oip.ErrorResponse{Error: "a binary message; controls are JSON text"})
				continue
			}
			ans, set, snap, err := se.apply(m.body)
			m.hold.done()
			if set { // an ack alone is not answered
				ws.send(oip.EventControls, ans)
			}
			switch {
			case err != nil:
				ws.send(oip.EventRefused, oip.ErrorResponse{Error: err.Error()})
			case snap != nil:
				ws.send(oip.EventSnapshot, snap)
			}
		}
	}()
	chunk := func(resp *oip.InferenceResponse) error {
		header, data, err := resp.EncodeBody()
		if err != nil {
			return err
		}
		return ws.chunk(header, data)
	}
	ended = s.pump(se.ctx, clientGone, se, "", send, chunk)
	close(stop)
	<-stopped
	return ended, clientGone.Err() != nil, next
}

// openWS opens the session of msg, a WebSocket session's infer request;
// the ctx of the session ends with ctx.
func (s *Server) openWS(ctx context.Context, r *http.Request, msg wsMessage) (*session, error) {
	m := modelOf(r)
	typ, body, err := msg.typ, msg.body, msg.err
	hold := msg.hold // the request's bytes, as they were read
	defer hold.done()
	var st *statusError
	switch {
	case errors.As(err, &st):
		return nil, err
	case websocket.CloseStatus(err) == websocket.StatusMessageTooBig:
		return nil, withStatus(http.StatusRequestEntityTooLarge, "request larger than the limit of %d bytes", s.cfg.MaxBodyBytes)
	case err != nil:
		return nil, withStatus(http.StatusBadRequest, "no infer request: %v", err)
	case typ != websocket.MessageText:
		return nil, withStatus(http.StatusBadRequest, "the first message is binary; send the infer request as JSON text")
	}
	req, err := oip.DecodeRequest(body, s.limits(hold))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{oip.BinaryDataOutput, oip.BinaryData} {
		if _, ok := req.Parameters[k]; ok {
			return nil, withStatus(http.StatusBadRequest, "parameter %q does not apply to a WebSocket session (its video always travels as binary messages)", k)
		}
	}
	ic, err := s.resolve(r.Context(), m, pathVariant(r), req, true, hold)
	if err != nil {
		return nil, err
	}
	if !ic.stream {
		return nil, withStatus(http.StatusBadRequest, "task %q is not a streaming task: send it to /v2/models/%s/infer", ic.task.TaskID, m.oip.Spec.ModelFamilyID)
	}
	return s.openSession(ctx, ic.m, ic.v, ic.task, ic.call, req.Parameters)
}

// wsConn sends a session's messages; a chunk's header and its binary
// message go out together. Each write must be done within timeout
// (sessionWriteTimeout), and is cut when base ends (the server's shutdown grace):
// a client that stops reading loses its session rather than holding it.
type wsConn struct {
	c       *websocket.Conn
	base    context.Context
	timeout time.Duration
	mu      sync.Mutex
	failed  bool // an EventError went out
}

// send writes one event as an oip.Message.
func (ws *wsConn) send(event string, data any) error {
	b, err := marshal(data)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(oip.Message{Event: event, Data: b})
	if err != nil {
		return err
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if event == oip.EventError {
		ws.failed = true
	}
	return ws.write(websocket.MessageText, msg)
}

// chunk writes a chunk's header (an oip.Message) and its binary data.
func (ws *wsConn) chunk(header []byte, data [][]byte) error {
	msg, err := json.Marshal(oip.Message{Event: oip.EventChunk, Data: header})
	if err != nil {
		return err
	}
	var n int
	for _, d := range data {
		n += len(d)
	}
	raw := make([]byte, 0, n)
	for _, d := range data {
		raw = append(raw, d...)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if err := ws.write(websocket.MessageText, msg); err != nil {
		return err
	}
	return ws.write(websocket.MessageBinary, raw)
}

func (ws *wsConn) write(typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(ws.base, ws.timeout)
	defer cancel()
	return ws.c.Write(ctx, typ, b)
}

// fail ends a session that did not open: EventError with err's text,
// then the close code of its status.
func (ws *wsConn) fail(err error) {
	ws.send(oip.EventError, oip.ErrorResponse{Error: err.Error()})
	ws.c.Close(websocket.StatusCode(oip.CloseCodeBase+status(err)), closeReason(err.Error()))
}

// closeReason fits a close frame's reason (at most 123 bytes).
func closeReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	cut := 120
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut-- // not inside a UTF-8 sequence
	}
	return s[:cut] + "..."
}
