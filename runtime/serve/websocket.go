package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
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
//
// The same limits hold as for the stream of an infer request: the request
// must arrive within the read limit and within MaxBodyBytes, its tensors
// count against the in-flight budget until the session opens, and the
// session against MaxSessions; chunks run on the variant's engine slots.
// Origins are not checked: the server takes no ambient credentials
// (cookies), only a bearer token the page must hold.
func (s *Server) wsStream(w http.ResponseWriter, r *http.Request) {
	if !s.inflight.enter(false) {
		refuse(w, r, errDraining)
		return
	}
	defer s.inflight.leave()
	s.active.Add(1)
	defer s.active.Add(-1)
	markStream(r.Context())
	// A session lasts as long as its client wants; the deadlines observe
	// set would stay on the connection after the upgrade.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{oip.SessionsSubprotocol},
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		if rec, ok := w.(*recorder); ok {
			rec.err = err.Error() // Accept answered the request
		}
		return
	}
	defer c.CloseNow()
	if c.Subprotocol() != oip.SessionsSubprotocol {
		c.Close(websocket.StatusPolicyViolation, fmt.Sprintf("offer the subprotocol %q", oip.SessionsSubprotocol))
		return
	}
	ws := &wsConn{c: c}
	// The session ends when the client goes away (the reader below sees
	// the connection close) or the server shuts down.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	se, err := s.openWS(ctx, r, c)
	if err != nil {
		if rec, ok := w.(*recorder); ok {
			rec.err = err.Error()
		}
		ws.fail(err)
		return
	}
	defer se.close()

	// The reader: controls in, answered in order; a closed connection
	// ends the session.
	clientGone, gone := context.WithCancel(context.Background())
	go func() {
		defer cancel()
		defer gone()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageText {
				ws.send(oip.EventRefused, oip.ErrorResponse{Error: "a binary message; controls are JSON text"})
				continue
			}
			ans, set, err := se.apply(b)
			switch {
			case err != nil:
				ws.send(oip.EventRefused, oip.ErrorResponse{Error: err.Error()})
			case set: // an ack alone is not answered
				ws.send(oip.EventControls, ans)
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
	s.pump(se.ctx, clientGone, se, "", ws.send, chunk)
	switch {
	case clientGone.Err() != nil:
	case se.ctx.Err() != nil && s.streamCtx.Err() != nil:
		c.Close(websocket.StatusGoingAway, "the server is shutting down")
	case ws.failed:
		c.Close(websocket.StatusCode(oip.CloseCodeBase+http.StatusInternalServerError), "the session failed")
	default:
		c.Close(websocket.StatusNormalClosure, "the session has ended")
	}
}

// openWS reads a WebSocket session's first message, the infer request,
// and opens its session; the ctx of the session ends with ctx.
func (s *Server) openWS(ctx context.Context, r *http.Request, c *websocket.Conn) (*session, error) {
	m := modelOf(r)
	c.SetReadLimit(s.cfg.MaxBodyBytes)
	// A read whose context ends closes the connection at once, with no
	// word to the client; the read limit is a timer instead, so that the
	// refusal (408) can be sent before the close.
	type message struct {
		typ  websocket.MessageType
		body []byte
		err  error
	}
	first := make(chan message, 1)
	go func() {
		typ, body, err := c.Read(ctx)
		first <- message{typ, body, err}
	}()
	limit := time.NewTimer(s.readLimit())
	defer limit.Stop()
	var msg message
	select {
	case msg = <-first:
	case <-limit.C:
		return nil, withStatus(http.StatusRequestTimeout, "no infer request within %v of the connection", s.readLimit())
	}
	typ, body, err := msg.typ, msg.body, msg.err
	switch {
	case websocket.CloseStatus(err) == websocket.StatusMessageTooBig:
		return nil, withStatus(http.StatusRequestEntityTooLarge, "request larger than the limit of %d bytes", s.cfg.MaxBodyBytes)
	case err != nil:
		return nil, withStatus(http.StatusBadRequest, "no infer request: %v", err)
	case typ != websocket.MessageText:
		return nil, withStatus(http.StatusBadRequest, "the first message is binary; send the infer request as JSON text")
	}
	hold := &holding{a: &s.adm}
	defer hold.done()
	if err := hold.add(int64(len(body))); err != nil {
		return nil, err
	}
	req, err := oip.DecodeRequest(body, s.lim)
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
// message go out together.
type wsConn struct {
	c      *websocket.Conn
	mu     sync.Mutex
	failed bool // an EventError went out
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

// wsWriteTimeout bounds one message's write: a client that stops reading
// loses its session rather than holding it.
const wsWriteTimeout = 30 * time.Second

func (ws *wsConn) write(typ websocket.MessageType, b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), wsWriteTimeout)
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
