package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// wsSession is a raw WebSocket session for the tests: what a browser or a
// third-party client does, with no wfgen client code.
type wsSession struct {
	t *testing.T
	c *websocket.Conn
}

// dialWS opens a session connection to model on s, offering protos (the
// sessions subprotocol when none) and sending header.
func dialWS(t *testing.T, s *started, model string, header http.Header, protos ...string) (*wsSession, *http.Response, error) {
	t.Helper()
	if protos == nil {
		protos = []string{oip.SessionsSubprotocol}
	}
	c, resp, err := websocket.Dial(context.Background(), s.url+"/v2/models/"+model+"/stream", &websocket.DialOptions{Subprotocols: protos, HTTPHeader: header})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsSession{t: t, c: c}, resp, nil
}

func (w *wsSession) sendText(s string) {
	w.t.Helper()
	if err := w.c.Write(context.Background(), websocket.MessageText, []byte(s)); err != nil {
		w.t.Fatalf("send %s: %v", s, err)
	}
}

// next reads one event; a chunk's binary data is returned as raw.
func (w *wsSession) next() (msg oip.Message, raw []byte, err error) {
	w.t.Helper()
	typ, b, err := w.c.Read(context.Background())
	if err != nil {
		return msg, nil, err
	}
	if typ != websocket.MessageText {
		w.t.Fatalf("a binary message where an event was expected (%d bytes)", len(b))
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		w.t.Fatalf("malformed message %s: %v", b, err)
	}
	if msg.Event == oip.EventChunk {
		typ, raw, err = w.c.Read(context.Background())
		if err != nil {
			w.t.Fatalf("a chunk's data: %v", err)
		}
		if typ != websocket.MessageBinary {
			w.t.Fatalf("a chunk's data is a text message: %s", raw)
		}
	}
	return msg, raw, nil
}

func (w *wsSession) must(event string) (oip.Message, []byte) {
	w.t.Helper()
	msg, raw, err := w.next()
	if err != nil {
		w.t.Fatalf("waiting for %q: %v", event, err)
	}
	if msg.Event != event {
		w.t.Fatalf("event %q %.300s, want %q", msg.Event, msg.Data, event)
	}
	return msg, raw
}

// refusedWith reads the error event and the close code a refused session
// ends with.
func (w *wsSession) refusedWith(code int, text string) {
	w.t.Helper()
	msg, _ := w.must(oip.EventError)
	var e oip.ErrorResponse
	if json.Unmarshal(msg.Data, &e) != nil || !strings.Contains(e.Error, text) {
		w.t.Errorf("error %s, want it to contain %q", msg.Data, text)
	}
	_, _, err := w.next()
	if got := websocket.CloseStatus(err); int(got) != code {
		w.t.Errorf("closed with %v (%v), want %d", got, err, code)
	}
}

const wsWorldRequest = `{"parameters":{"task":"step","paced":false,"lockstep":true,"controls":{"right":1}},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[2.5]}]}`

// TestStreamOverWebSocket runs a realtime session on one WebSocket: the
// request as the first message, the chunks as a JSON header and a binary
// message of frames, controls answered in order (a refused one leaves the
// session going), acks releasing lockstep chunks; and the session ends,
// its controls URL with it, when the client closes.
func TestStreamOverWebSocket(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	ws, resp, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != oip.SessionsSubprotocol {
		t.Errorf("subprotocol %q", p)
	}
	ws.sendText(wsWorldRequest)
	msg, _ := ws.must(oip.EventSession)
	var info oip.SessionInfo
	if json.Unmarshal(msg.Data, &info) != nil || len(info.ID) != 32 || info.Realtime["fps"] != 8.0 {
		t.Fatalf("session event %s", msg.Data)
	}
	chunk := func(i int) oip.InferenceResponse {
		t.Helper()
		msg, raw := ws.must(oip.EventChunk)
		resp, err := oip.DecodeBinaryResponse(append(append([]byte{}, msg.Data...), raw...), int64(len(msg.Data)))
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		frames := int64(4)
		if i > 0 {
			frames = 2
		}
		out := resp.Outputs[0]
		if resp.Parameters[oip.ChunkIndex] != json.Number(strconv.Itoa(i)) || out.Name != "frames" || out.Shape[0] != frames || int64(len(raw)) != frames*out.Shape[1]*out.Shape[2]*out.Shape[3] {
			t.Errorf("chunk %d: %v %v, %d bytes", i, resp.Parameters, out.Shape, len(raw))
		}
		return *resp
	}
	chunk(0)
	// Lockstep: nothing comes until the ack; controls and refusals are
	// answered in order.
	ws.sendText(`{"controls":{"forward":1}}`)
	if msg, _ := ws.must(oip.EventControls); !strings.Contains(string(msg.Data), `"forward":1`) {
		t.Errorf("controls answer %s", msg.Data)
	}
	ws.sendText(`{"controls":{"up":1}}`)
	if msg, _ := ws.must(oip.EventRefused); !strings.Contains(string(msg.Data), `unknown control \"up\"`) {
		t.Errorf("refusal %s", msg.Data)
	}
	ws.sendText(`{"controls":`)
	if msg, _ := ws.must(oip.EventRefused); !strings.Contains(string(msg.Data), "malformed controls") {
		t.Errorf("refusal %s", msg.Data)
	}
	if err := ws.c.Write(context.Background(), websocket.MessageBinary, []byte{1}); err != nil {
		t.Fatal(err)
	}
	ws.must(oip.EventRefused)
	ws.sendText(`{"ack":0}`)
	chunk(1)
	// The controls URL works for a WebSocket session too.
	if code, _, b := call(t, "POST", s.url+info.ControlsURL, `{"controls":{"left":1},"ack":1}`); code != 200 {
		t.Errorf("controls POST: %d %s", code, b)
	}
	chunk(2)
	// The client closes: the session ends.
	ws.c.Close(websocket.StatusNormalClosure, "")
	enginetest.WaitFor(t, "the session to end after its client closed", func() bool {
		code, _, _ := call(t, "POST", s.url+info.ControlsURL, `{"controls":{}}`)
		return code == 404
	})
}

// TestWebSocketRefusals checks what a session refused before it opens
// gets: an error event and the close code of its HTTP status, or the HTTP
// status itself before the upgrade.
func TestWebSocketRefusals(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{MaxSessions: 1})
	refused := func(model, first string, code int, text string) {
		t.Helper()
		ws, _, err := dialWS(t, s, model, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.sendText(first)
		ws.refusedWith(code, text)
	}
	refused("tiny-encoder", `{"parameters":{"task":"embed"},"inputs":[{"name":"tokens","datatype":"INT64","shape":[2],"data":[1,2]}]}`, 4400, `task "embed" is not a streaming task`)
	refused("tiny-world", `{"inputs":`, 4400, "malformed request")
	refused("tiny-world", strings.Replace(wsWorldRequest, `"paced"`, `"batch":true,"paced"`, 1), 4400, "a stream is not a batch")
	refused("tiny-world", strings.Replace(wsWorldRequest, `"paced"`, `"binary_data_output":true,"paced"`, 1), 4400, `parameter "binary_data_output" does not apply`)
	refused("tiny-world", strings.Replace(wsWorldRequest, `2.5`, `-1`, 1), 4400, "speed")

	// The one session allowed is open: another is refused 4429.
	ws, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.sendText(wsWorldRequest)
	ws.must(oip.EventSession)
	refused("tiny-world", wsWorldRequest, 4429, "realtime sessions are open")
	ws.c.Close(websocket.StatusNormalClosure, "")

	// Without the subprotocol, the server closes at once.
	bare, _, err := dialWS(t, s, "tiny-world", nil, "chat")
	if err == nil {
		_, _, err = bare.next()
		if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Errorf("no subprotocol: %v", err)
		}
	}
	// An unknown model is refused before the upgrade.
	if _, resp, err := dialWS(t, s, "nope", nil); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("unknown model: %v %v", resp, err)
	}
}

// TestWebSocketToken checks the bearer token of a session: an
// Authorization header, or the bearer subprotocol a browser can send;
// anything else is refused 401 before the upgrade.
func TestWebSocketToken(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Token: "s3cret"})
	open := func(header http.Header, protos ...string) error {
		ws, resp, err := dialWS(t, s, "tiny-world", header, protos...)
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusUnauthorized {
				return errors.New("401")
			}
			return err
		}
		ws.sendText(wsWorldRequest)
		ws.must(oip.EventSession)
		ws.c.Close(websocket.StatusNormalClosure, "")
		return nil
	}
	sub := func(token string) string {
		return oip.BearerSubprotocol + base64.RawURLEncoding.EncodeToString([]byte(token))
	}
	if err := open(nil); err == nil || err.Error() != "401" {
		t.Errorf("no token: %v", err)
	}
	if err := open(http.Header{"Authorization": {"Bearer s3cret"}}); err != nil {
		t.Errorf("header token: %v", err)
	}
	if err := open(nil, oip.SessionsSubprotocol, sub("s3cret")); err != nil {
		t.Errorf("subprotocol token: %v", err)
	}
	if err := open(nil, oip.SessionsSubprotocol, sub("wrong")); err == nil || err.Error() != "401" {
		t.Errorf("wrong subprotocol token: %v", err)
	}
	// The subprotocol token opens the session endpoint only: not a
	// WebSocket upgrade to any other path (it unlocked every one), and
	// two Authorization headers are refused whatever they hold.
	for _, path := range []string{"/v2/models/tiny-world", "/metrics", "/v2/models/tiny-world/infer", "/v2/models/tiny-world/sessions/x", "/v2/models/tiny-world/stream/x"} {
		code, _, body := call(t, "GET", s.url+path, "", "Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Protocol", oip.SessionsSubprotocol+", "+sub("s3cret"))
		if code != http.StatusUnauthorized {
			t.Errorf("GET %s with the subprotocol token: %d %s", path, code, body)
		}
	}
	req, _ := http.NewRequest("GET", s.url+"/v2/models/tiny-world", nil)
	req.Header["Authorization"] = []string{"Bearer s3cret", "Bearer other"}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A hostile client's first message: one that never comes is refused 4408
// once the read limit (-timeout) passed, one over -max-body 4413; neither
// opens a session or holds the server.
func TestWebSocketHostileFirstMessage(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Timeout: 300 * time.Millisecond, MaxBodyBytes: 4096})
	silent, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	silent.refusedWith(4408, "no infer request within")

	big, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	big.sendText(`{"inputs":[],"parameters":{"task":"step","id":"` + strings.Repeat("x", 8192) + `"}}`)
	_, _, err = big.next()
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig && int(got) != 4413 {
		t.Errorf("a first message over -max-body: %v, want close 1009 or 4413", err)
	}
	// The server still opens sessions, once the refused message's bytes
	// are given back (its handler may still be closing when the client
	// reads the close: then a new session finds them in flight).
	enginetest.WaitFor(t, "the refused message's bytes to be given back", func() bool { return s.srv.Stats().InflightBytes == 0 })
	ok, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok.sendText(wsWorldRequest)
	ok.must(oip.EventSession)
}

// A session open when the server drains ends with an error event that
// says so and the close code 1001 (going away); the drain does not wait
// for it, and a new session is refused before the upgrade (503).
func TestWebSocketSessionEndsOnShutdown(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	ws, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.sendText(`{"parameters":{"task":"step"},"inputs":[]}`) // paced: a chunk every 250 ms
	ws.must(oip.EventSession)
	ws.must(oip.EventChunk)
	ctx, cancel := context.WithTimeout(context.Background(), enginetest.Patience)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		msg, _, err := ws.next()
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusGoingAway {
				t.Errorf("closed with %v, want 1001 (going away)", err)
			}
			break
		}
		if msg.Event == oip.EventChunk {
			continue
		}
		if msg.Event != oip.EventError || !strings.Contains(string(msg.Data), "shutting down") {
			t.Errorf("event %q %s, want an error saying the server is shutting down", msg.Event, msg.Data)
		}
	}
	if _, resp, err := dialWS(t, s, "tiny-world", nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a session while draining: %v %v, want 503", resp, err)
	}
}

// wsEnds is a request for a tiny-world session of two unpaced chunks
// that then ends by itself.
const wsEnds = `{"parameters":{"task":"step","paced":false,"max_chunks":2},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[2.5]}]}`

// runEnding runs the wsEnds session on ws to its end and returns its id.
func (w *wsSession) runEnding() string {
	w.t.Helper()
	w.sendText(wsEnds)
	msg, _ := w.must(oip.EventSession)
	var info oip.SessionInfo
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		w.t.Fatal(err)
	}
	w.must(oip.EventChunk)
	w.must(oip.EventChunk)
	w.must(oip.EventEnd)
	return info.ID
}

// With the keep-alive subprotocol a session that ended by itself leaves
// its WebSocket open and the next message opens the next session on it
// (the request sent at once, as the end arrives); a late ack or controls
// opens nothing; a bad request there is refused as on a new connection; a client offering only the first
// subprotocol gets the close after the end; and a kept connection closes
// when the server shuts down, without holding the drain.
func TestWebSocketKeepsConnection(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{IdleTimeout: time.Hour})
	ws, resp, err := dialWS(t, s, "tiny-world", nil, oip.KeepAliveSessionsSubprotocol, oip.SessionsSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != oip.KeepAliveSessionsSubprotocol {
		t.Fatalf("subprotocol %q, want %q", p, oip.KeepAliveSessionsSubprotocol)
	}
	ids := map[string]bool{}
	for range 3 {
		ids[ws.runEnding()] = true
	}
	if len(ids) != 3 {
		t.Errorf("session ids %v, want three", ids)
	}

	bad, _, err := dialWS(t, s, "tiny-world", nil, oip.KeepAliveSessionsSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	bad.runEnding()
	// Late acks and controls for the session that ended are no request:
	// an ack is dropped, controls refused, and the connection waits on.
	bad.sendText(`{"ack":1}`)
	bad.sendText(`{"controls":{"right":1},"ack":1}`)
	bad.must(oip.EventRefused)
	bad.runEnding()
	bad.sendText(`not JSON`)
	bad.refusedWith(oip.CloseCodeBase+http.StatusBadRequest, "malformed")

	v1, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	v1.runEnding()
	if _, _, err := v1.next(); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after the end of a %s session: %v, want the close 1000", oip.SessionsSubprotocol, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), enginetest.Patience)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.next(); err == nil {
		t.Error("a kept connection is open after the server shut down")
	}
}

// A kept connection that sends no request within the idle timeout is
// closed.
func TestWebSocketKeptConnectionIdles(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{IdleTimeout: time.Millisecond})
	ws, _, err := dialWS(t, s, "tiny-world", nil, oip.KeepAliveSessionsSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	ws.runEnding()
	if _, _, err := ws.next(); err == nil {
		t.Error("an idle kept connection is still open")
	}
}

// Realtime sessions join no batch, so the batchers do not wait for them:
// with a batch delay longer than the test, a lone request of a batchable
// task is answered at once while a session runs on each transport (SSE,
// WebSocket, gRPC stream) and a WebSocket waits for its next session.
func TestSessionsHoldNoBatch(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Batching: true, BatchDelay: time.Hour, Timeout: enginetest.Patience, IdleTimeout: time.Hour})
	g := withGRPC(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	kept, _, err := dialWS(t, s, "tiny-world", nil, oip.KeepAliveSessionsSubprotocol)
	if err != nil {
		t.Fatal(err)
	}
	kept.runEnding()
	running, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	running.sendText(`{"parameters":{"task":"step"},"inputs":[]}`) // paced, no end
	running.must(oip.EventSession)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v2/models/tiny-world/infer", strings.NewReader(`{"parameters":{"task":"step","stream":true},"inputs":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("SSE stream: %d %v", resp.StatusCode, resp.Header)
	}
	sess, err := grpcRemote(t, g, "tiny-world").Stream(ctx, "step", map[string]any{"speed": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		first := opened
		for range sess.Chunks(ctx) {
			if first != nil {
				close(first)
				first = nil
			}
		}
	}()
	<-opened // and the SSE stream's 200 came once its session opened

	if code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody); code != http.StatusOK {
		t.Errorf("a lone batchable request while sessions run: %d %s", code, b)
	}
}
