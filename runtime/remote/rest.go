package remote

// The REST transport: a Client made for an http:// or https:// URL sends
// the protocol's REST requests (POST .../infer with JSON or binary tensors,
// GET for the metadata and readiness) and runs realtime sessions on one
// WebSocket each (websocket.go), kept for the next session when the server
// keeps it (wspool.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// restTransport is the transport of an http:// or https:// URL.
type restTransport struct {
	c  *Client
	ws *wsPool // the WebSockets kept for the next sessions
}

// Infer sends an infer request with POST .../infer.
func (t *restTransport) Infer(ctx context.Context, req *oip.InferenceRequest) (*oip.InferenceResponse, error) {
	var resp oip.InferenceResponse
	if err := t.do(ctx, http.MethodPost, t.path("infer"), req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (t *restTransport) metadata(ctx context.Context) (*oip.ModelMetadata, error) {
	var md oip.ModelMetadata
	if err := t.do(ctx, http.MethodGet, t.path(""), nil, &md); err != nil {
		return nil, err
	}
	return &md, nil
}

func (t *restTransport) ready(ctx context.Context) error {
	var v map[string]any
	return t.do(ctx, http.MethodGet, t.path("ready"), nil, &v)
}

// request builds the infer request of a task: by default with its tensor,
// image and video inputs binary and every output asked for binary (the
// binary tensor data extension), with WithJSONTensors all JSON.
func (t *restTransport) request(task *spec.InferenceTaskProfile, call, load map[string]any) (*oip.InferenceRequest, error) {
	if t.c.asJSON {
		return jsonRequest(task, call, load)
	}
	inputs, err := oip.EncodeInputsBinary(task, call, load)
	if err != nil {
		return nil, err
	}
	if inputs == nil {
		inputs = []oip.Tensor{}
	}
	return &oip.InferenceRequest{Inputs: inputs, Parameters: oip.Parameters{"task": task.TaskID, oip.BinaryDataOutput: true}}, nil
}

// sessionRequest builds a session's request with its inputs as JSON: the
// WebSocket's first message is one JSON text.
func (t *restTransport) sessionRequest(task *spec.InferenceTaskProfile, call map[string]any) (*oip.InferenceRequest, error) {
	return jsonRequest(task, call, nil)
}

// openSession sends start on a WebSocket kept from an earlier session,
// else on a new one. A kept connection that fails before the first answer
// (the server closed it while it was kept) is replaced by a new one: no
// session opened on it. The first answer is read here, and handed out by
// the connection's first Receive.
func (t *restTransport) openSession(ctx context.Context, start *oip.InferenceRequest) (oip.SessionConn, func(), error) {
	b, err := json.Marshal(start)
	if err != nil {
		return nil, nil, err
	}
	conn := t.ws.get()
	for reused := conn != nil; ; reused = false {
		if conn == nil {
			if conn, err = t.dial(ctx); err != nil {
				return nil, nil, err
			}
		}
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			conn.CloseNow()
			if !reused {
				return nil, nil, err
			}
		} else if first, err := receive(ctx, conn); err == nil || !reused || ctx.Err() != nil {
			if err != nil {
				conn.CloseNow()
				return nil, nil, err
			}
			ws := &wsConn{conn: conn, first: &first}
			if conn.Subprotocol() != oip.KeepAliveSessionsSubprotocol {
				return ws, nil, nil
			}
			return ws, func() { t.ws.put(conn) }, nil
		} else {
			conn.CloseNow()
		}
		conn = nil
	}
}

// dial opens a session's WebSocket.
func (t *restTransport) dial(ctx context.Context) (*websocket.Conn, error) {
	u := t.path("stream")
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	t.authorize(hreq)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient:      t.c.http,
		HTTPHeader:      hreq.Header,
		Subprotocols:    []string{oip.KeepAliveSessionsSubprotocol, oip.SessionsSubprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, statusError(resp)
		}
		return nil, err
	}
	conn.SetReadLimit(maxEventBytes)
	return conn, nil
}

// close closes the WebSockets kept for the next sessions.
func (t *restTransport) close() error {
	t.ws.close()
	return nil
}

// path returns the URL of a model endpoint ("infer", "ready", "").
func (t *restTransport) path(endpoint string) string {
	c := t.c
	p := c.base.Path + "/v2/models/" + url.PathEscape(c.model)
	if c.variant != "" {
		p += "/versions/" + url.PathEscape(c.variant)
	}
	if endpoint != "" {
		p += "/" + endpoint
	}
	u := *c.base
	u.Path, u.RawPath = p, ""
	return u.String()
}

// jsonRequest builds the infer request of a task with its inputs as JSON.
func jsonRequest(task *spec.InferenceTaskProfile, call, load map[string]any) (*oip.InferenceRequest, error) {
	inputs, err := oip.EncodeInputs(task, call, load)
	if err != nil {
		return nil, err
	}
	req := &oip.InferenceRequest{Inputs: inputs, Parameters: oip.Parameters{"task": task.TaskID}}
	if inputs == nil {
		req.Inputs = []oip.Tensor{}
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON answer into out; an error
// status is a *StatusError. An *oip.InferenceRequest body whose inputs
// travel binary is sent with the binary tensor data extension, and an
// answer that has binary outputs is decoded into an *oip.InferenceResponse
// out (binaryBody, decodeBinary).
func (t *restTransport) do(ctx context.Context, method, u string, body any, out any) (err error) {
	c := t.c
	ctx, span := t.startSpan(ctx, method, u)
	defer func() { endSpan(span, err) }()
	var payload []byte
	var binaryHeader int
	if req, ok := body.(*oip.InferenceRequest); ok {
		b, n, err := binaryBody(req)
		if err != nil {
			return err
		}
		payload, binaryHeader = b, n
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = b
	}
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(payload)
		}
		hreq, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return err
		}
		switch {
		case binaryHeader > 0:
			hreq.Header.Set("Content-Type", oip.BinaryContentType)
			hreq.Header.Set(oip.HeaderContentLength, strconv.Itoa(binaryHeader))
		case body != nil:
			hreq.Header.Set("Content-Type", "application/json")
		}
		t.authorize(hreq)
		resp, err = c.http.Do(hreq)
		if attempt < c.retries && c.retry(ctx, attempt, resp, err) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	if h := resp.Header.Get(oip.HeaderContentLength); h != "" {
		if err := decodeBinary(resp, h, out); err != nil {
			return fmt.Errorf("malformed answer from %s: %w", u, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("malformed answer from %s: %w", u, err)
	}
	return nil
}

// authorize adds the bearer token and the trace context to a request.
func (t *restTransport) authorize(r *http.Request) {
	injectTrace(r) // the caller's span continues on the server
	if t.c.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.c.token)
	}
}

// statusError reads an error answer.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e oip.ErrorResponse
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
		if len(e.Error) > 200 {
			e.Error = e.Error[:200] + "..."
		}
	}
	return &StatusError{Status: resp.StatusCode, Message: e.Error}
}
