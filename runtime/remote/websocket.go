package remote

// A session connection on a WebSocket (oip.SessionsSubprotocol): the
// events come as text messages (oip.Message), a chunk's followed by one
// binary message holding its data; controls and acks go as text.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// maxEventBytes bounds one message of a session (a chunk's frames).
const maxEventBytes = 256 << 20

// wsConn is the client's end of a session on a WebSocket.
type wsConn struct {
	conn  *websocket.Conn
	first *oip.SessionMessage // read by openSession; the first Receive's
}

// Send writes one controls message.
func (w *wsConn) Send(ctx context.Context, m oip.ControlsRequest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return w.conn.Write(ctx, websocket.MessageText, b)
}

// Receive reads the session's next message.
func (w *wsConn) Receive(ctx context.Context) (oip.SessionMessage, error) {
	if m := w.first; m != nil {
		w.first = nil
		return *m, nil
	}
	return receive(ctx, w.conn)
}

// Close ends the connection with a close handshake.
func (w *wsConn) Close() error {
	return w.conn.Close(websocket.StatusNormalClosure, "")
}

// receive reads a session's next message from conn: an event and, for a
// chunk, its binary data; for an error, the status of the close frame
// that follows it.
func receive(ctx context.Context, conn *websocket.Conn) (oip.SessionMessage, error) {
	typ, b, err := conn.Read(ctx)
	if err == nil && typ != websocket.MessageText {
		err = errors.New("a binary message where an event was expected")
	}
	var msg oip.Message
	if err == nil {
		if err = json.Unmarshal(b, &msg); err != nil {
			err = fmt.Errorf("malformed message: %w", err)
		}
	}
	if err != nil {
		if websocket.CloseStatus(err) >= 0 {
			err = fmt.Errorf("the server closed the session without ending it: %w", err)
		}
		return oip.SessionMessage{}, err
	}
	m := oip.SessionMessage{Event: msg.Event}
	switch msg.Event {
	case oip.EventSession:
		var info oip.SessionInfo
		if err := json.Unmarshal(msg.Data, &info); err != nil || info.ID == "" {
			return oip.SessionMessage{}, fmt.Errorf("malformed session event: %s", msg.Data)
		}
		m.Session = &info
	case oip.EventChunk:
		typ, raw, err := conn.Read(ctx)
		if err == nil && typ != websocket.MessageBinary {
			err = errors.New("a chunk's data is not a binary message")
		}
		if err != nil {
			return oip.SessionMessage{}, fmt.Errorf("a chunk's data: %w", err)
		}
		header := msg.Data
		if m.Chunk, err = oip.DecodeBinaryResponse(append(header[:len(header):len(header)], raw...), int64(len(header))); err != nil {
			return oip.SessionMessage{}, fmt.Errorf("malformed chunk: %w", err)
		}
	case oip.EventSnapshot:
		var info oip.SnapshotInfo
		if err := json.Unmarshal(msg.Data, &info); err != nil || info.Token == nil {
			return oip.SessionMessage{}, fmt.Errorf("malformed snapshot event: %.200s", msg.Data)
		}
		m.Snapshot = &info
	case oip.EventControls:
		var c oip.ControlsRequest
		json.Unmarshal(msg.Data, &c)
		m.Controls = c.Controls
	case oip.EventRefused, oip.EventError:
		var e oip.ErrorResponse
		json.Unmarshal(msg.Data, &e)
		m.Error = e.Error
		if msg.Event == oip.EventError {
			m.Status = closedWith(ctx, conn)
		}
	}
	return m, nil
}

// closedWith reads on to the close frame that follows an error event and
// returns the HTTP status its code carries (oip.CloseCodeBase plus the
// status; 503 for 1001, going away: the server shuts down), or 0 when the
// connection ended otherwise.
func closedWith(ctx context.Context, conn *websocket.Conn) int {
	for {
		_, _, err := conn.Read(ctx)
		if err == nil {
			continue
		}
		code := websocket.CloseStatus(err)
		if code >= oip.CloseCodeBase && code < oip.CloseCodeBase+1000 {
			return int(code) - oip.CloseCodeBase
		}
		if code == websocket.StatusGoingAway {
			return http.StatusServiceUnavailable
		}
		return 0
	}
}
