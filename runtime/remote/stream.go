package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// maxEventBytes bounds one message of a session (a chunk's frames).
const maxEventBytes = 256 << 20

// CallStream starts a realtime session of a streaming task (a task of
// Spec) with the one item of in on the server and returns it as a local
// *stream.Session, as client.Client.CallStream does: its
// chunks are the server's, in order, checked like local ones. The session's
// options apply where the work is: pacing and the chunk limit are sent to
// the server (which releases chunks at playback time; the local session
// does not wait again), and SetControls sends the controls to the running
// server session before they apply locally (an error from the server
// leaves them unchanged).
//
// The server session opens when the first chunk is asked for and ends when
// the local one ends: ctx is done, a step's context is cancelled (a
// stopped Chunks loop whose context is cancelled), the chunk limit is
// reached, or an error. Cancel ctx to release a session that is left
// unfinished.
func (c *Client) CallStream(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, opts ...stream.Option) (*stream.Session, error) {
	if err := client.OneItem(in); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	if !task.Stream {
		return nil, fmt.Errorf("%s: task is not a streaming task (stream: true)", c.where(task.TaskID))
	}
	var video string
	for _, a := range task.Outputs {
		if a.Kind == spec.ArtifactVideo {
			video = a.ArtifactID
			break
		}
	}
	if video == "" {
		return nil, fmt.Errorf("%s: a streaming task needs a video artifact", c.where(task.TaskID))
	}
	req, err := c.request(task, client.CallKwargs(task, in, 0), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	// A probe session reads the options the caller gave.
	probe, err := stream.New(c.spec.Realtime, func(context.Context, stream.StepRequest) (stream.StepResult, error) {
		return stream.StepResult{}, errors.New("probe")
	}, opts...)
	if err != nil {
		return nil, err
	}
	if c.grpc != nil { // the session on the bidirectional RPC (grpcstream.go)
		return c.grpcStream(ctx, task, in, video, probe, opts)
	}
	rs := &remoteSession{c: c, ctx: ctx, task: task, video: video, req: req, paced: probe.Paced(), maxChunks: probe.MaxChunks()}
	all := append(append([]stream.Option{}, opts...), stream.WithPacing(false), stream.WithControlsHook(rs.sendControls))
	sess, err := stream.New(c.spec.Realtime, rs.step, all...)
	if err != nil {
		return nil, err
	}
	rs.local = sess
	return sess, nil
}

// Stream starts a realtime session of task taskID with untyped call
// kwargs: CallStream with them as Inputs (client.KwargsOf).
func (c *Client) Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, []map[string]any{call}, nil)
	if err != nil {
		return nil, err
	}
	return c.CallStream(ctx, task, in, opts...)
}

// remoteSession is the server side of a local session: one WebSocket
// (oip.SessionsSubprotocol) that carries the chunks out and the controls
// and acks in.
type remoteSession struct {
	c         *Client
	ctx       context.Context
	task      *spec.InferenceTaskProfile
	video     string
	req       *oip.InferenceRequest
	paced     bool
	maxChunks int
	local     *stream.Session

	mu      sync.Mutex // guards the fields below
	conn    *websocket.Conn
	events  chan wsEvent    // the session's events, in order, from read
	answers chan wsEvent    // answers to controls messages, in order
	done    chan struct{}   // closed by fail: read stops delivering
	pending stream.Controls // controls set before it opened
	closed  error           // why the session is over
	keep    bool            // the server keeps the connection after EventEnd

	ctl sync.Mutex // one controls message at a time: answers come in order
}

// wsEvent is one message of the session: an event and, for a chunk, its
// binary data; or why the connection ended.
type wsEvent struct {
	name string
	data []byte
	raw  []byte
	err  error
}

// open starts the server session with the controls the first step has.
func (r *remoteSession) open(controls stream.Controls) error {
	req := *r.req
	ctl, err := json.Marshal(map[string]float64(controls))
	if err != nil {
		return err
	}
	// Parameters are scalars (the protocol's rule): the controls travel as
	// JSON text. In lockstep the server makes each chunk only once this
	// side has taken the one before (step acks it), so controls set in
	// between apply to it, as they do in-process.
	req.Parameters = oip.Parameters{"task": r.task.TaskID, "paced": r.paced, "max_chunks": r.maxChunks,
		"controls": string(ctl), "lockstep": true}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	// A connection kept from an earlier session first; one that fails
	// before its first event (the server closed it while it was kept) is
	// replaced by a new one: no session opened on it.
	conn := r.c.ws.get()
	var ev wsEvent
	for reused := conn != nil; ; reused = false {
		if conn == nil {
			if conn, err = r.dial(); err != nil {
				return err
			}
		}
		if err := conn.Write(r.ctx, websocket.MessageText, b); err != nil && !reused {
			conn.CloseNow()
			return err
		} else if err == nil {
			r.conn = conn
			r.events, r.answers, r.done = make(chan wsEvent, 4), make(chan wsEvent, 1), make(chan struct{})
			// The first event is read here and the reader started after
			// it: the session event reaches open without a hand-off
			// between goroutines.
			if ev = r.next(); ev.err == nil || !reused || r.ctx.Err() != nil {
				break
			}
			r.conn = nil
		}
		conn.CloseNow()
		conn = nil
	}
	r.keep = conn.Subprotocol() == oip.KeepAliveSessionsSubprotocol
	go r.read()
	switch {
	case ev.err != nil:
		return ev.err
	case ev.name == oip.EventError:
		return r.serverError(ev.data)
	case ev.name != oip.EventSession:
		return fmt.Errorf("the session began with event %q, want %q", ev.name, oip.EventSession)
	}
	var info oip.SessionInfo
	if err := json.Unmarshal(ev.data, &info); err != nil || info.ID == "" {
		return fmt.Errorf("malformed session event: %s", ev.data)
	}
	return nil
}

// dial opens a session's WebSocket.
func (r *remoteSession) dial() (*websocket.Conn, error) {
	u := r.c.path("stream")
	hreq, err := http.NewRequestWithContext(r.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	r.c.authorize(hreq)
	conn, resp, err := websocket.Dial(r.ctx, u, &websocket.DialOptions{
		HTTPClient:      r.c.http,
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

// read takes the session's messages until the connection ends or the
// session fails: answers to controls to r.answers (dropped when nobody
// waits for one: the server answers an ack only to refuse it), everything
// else to r.events, then the reason it ended.
func (r *remoteSession) read() {
	defer close(r.answers)
	defer close(r.events)
	put := func(ev wsEvent) bool {
		select {
		case r.events <- ev:
			return true
		case <-r.done:
			return false
		}
	}
	for {
		ev := r.next()
		switch {
		case ev.err != nil:
			put(ev)
			return
		case ev.name == oip.EventControls, ev.name == oip.EventRefused:
			select {
			case r.answers <- ev:
			default:
			}
			continue
		}
		if !put(ev) || ev.name == oip.EventEnd && r.keep {
			return // on a kept connection the next session reads on
		}
	}
}

// next reads the session's next message: an event and, for a chunk, its
// binary data; or why the connection ended.
func (r *remoteSession) next() wsEvent {
	typ, b, err := r.conn.Read(r.ctx)
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
		if closeStatus(err) >= 0 {
			err = fmt.Errorf("the server closed the session without ending it: %w", err)
		}
		return wsEvent{err: err}
	}
	ev := wsEvent{name: msg.Event, data: msg.Data}
	if ev.name == oip.EventChunk {
		typ, ev.raw, err = r.conn.Read(r.ctx)
		if err == nil && typ != websocket.MessageBinary {
			err = errors.New("a chunk's data is not a binary message")
		}
		if err != nil {
			return wsEvent{err: fmt.Errorf("a chunk's data: %w", err)}
		}
	}
	return ev
}

// closeStatus is the close code of a connection that ended with err, or
// -1 when it did not end by a close frame.
func closeStatus(err error) websocket.StatusCode {
	return websocket.CloseStatus(err)
}

// serverError is the error of an EventError's data.
func (r *remoteSession) serverError(data []byte) error {
	var e oip.ErrorResponse
	json.Unmarshal(data, &e)
	// The close frame that follows carries the status.
	for ev := range r.events {
		if code := closeStatus(ev.err); code >= oip.CloseCodeBase && code < oip.CloseCodeBase+1000 {
			return &StatusError{Status: int(code) - oip.CloseCodeBase, Message: e.Error}
		}
	}
	return fmt.Errorf("server: %s", e.Error)
}

// step returns the server's next chunk.
func (r *remoteSession) step(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
	r.mu.Lock()
	if r.closed != nil {
		err := r.closed
		r.mu.Unlock()
		return stream.StepResult{}, err
	}
	if r.conn == nil {
		controls := req.Controls
		if r.pending != nil {
			controls = r.pending
		}
		if err := r.open(controls); err != nil {
			r.closed = err
			if r.conn != nil {
				close(r.done)
				r.conn.CloseNow()
			}
			r.mu.Unlock()
			return stream.StepResult{}, err
		}
	}
	r.mu.Unlock()
	// A cancelled step ends the server session: the connection closes.
	stop := context.AfterFunc(ctx, func() { r.fail(ctx.Err()) })
	defer stop()
	if req.Index > 0 {
		// The consumer has taken the previous chunk (the local session
		// asks for this one only then), and any controls it set since
		// have reached the server: let the server make this one.
		// An ack that cannot be sent means the connection is gone: the
		// next event says why (the server's error, or how it closed).
		ack := int64(req.Index - 1)
		if err := r.send(ctx, oip.ControlsRequest{Ack: &ack}); err != nil && ctx.Err() != nil {
			r.fail(ctx.Err())
			return stream.StepResult{}, ctx.Err()
		}
	}
	ev, ok := <-r.events
	if !ok || ev.err != nil {
		err := ev.err
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if err == nil {
			err = r.closedErr()
		}
		r.fail(err)
		return stream.StepResult{}, err
	}
	switch ev.name {
	case oip.EventChunk:
	case oip.EventError:
		err := r.serverError(ev.data)
		r.fail(err)
		return stream.StepResult{}, err
	case oip.EventEnd:
		err := errors.New("the server ended the session")
		r.fail(err)
		return stream.StepResult{}, err
	default:
		err := fmt.Errorf("unexpected event %q", ev.name)
		r.fail(err)
		return stream.StepResult{}, err
	}
	header := ev.data
	resp, err := oip.DecodeBinaryResponse(append(header[:len(header):len(header)], ev.raw...), int64(len(header)))
	if err != nil {
		err = fmt.Errorf("malformed chunk: %w", err)
		r.fail(err)
		return stream.StepResult{}, err
	}
	res, err := chunkResult(r.task, r.video, resp)
	if err != nil {
		r.fail(err)
		return stream.StepResult{}, err
	}
	if r.maxChunks > 0 && req.Index+1 >= r.maxChunks {
		r.finish()
	}
	return res, nil
}

// finish ends the session after its last chunk. A kept connection
// (r.keep) with no controls message under way goes back to the client for
// its next session once the server's EventEnd has come; any other is
// closed.
func (r *remoteSession) finish() {
	ended := errors.New("the session has ended")
	if !r.keep || !r.ctl.TryLock() {
		r.fail(ended)
		return
	}
	defer r.ctl.Unlock()
	// The server sends the end right after the last chunk; one that does
	// not within wsEndWait loses the connection, not the chunk.
	wait := time.NewTimer(wsEndWait)
	defer wait.Stop()
	select {
	case ev, ok := <-r.events:
		if !ok || ev.err != nil || ev.name != oip.EventEnd {
			r.fail(ended)
			return
		}
	case <-wait.C:
		r.fail(ended)
		return
	}
	r.mu.Lock()
	first := r.closed == nil
	if first {
		r.closed = ended
		close(r.done)
	}
	r.mu.Unlock()
	if first {
		r.c.ws.put(r.conn)
	}
}

// chunkResult is the step result of a chunk's response, whatever the
// transport: its video's frames and the realtime spec for the next chunk
// (malformed metadata is ignored, as in-process).
func chunkResult(task *spec.InferenceTaskProfile, video string, resp *oip.InferenceResponse) (stream.StepResult, error) {
	out, err := oip.DecodeOutputs(task, resp.Outputs)
	if err != nil {
		return stream.StepResult{}, err
	}
	res := stream.StepResult{Frames: out[video]}
	if text, ok := resp.Parameters[oip.ChunkRealtime].(string); ok {
		var rt map[string]any
		if json.Unmarshal([]byte(text), &rt) == nil {
			res.Realtime = rt
		}
	}
	return res, nil
}

// send writes one controls message.
func (r *remoteSession) send(ctx context.Context, m oip.ControlsRequest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return r.conn.Write(ctx, websocket.MessageText, b)
}

// closedErr is why the session is over.
func (r *remoteSession) closedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed != nil {
		return r.closed
	}
	return errors.New("the session has ended")
}

// fail ends the server session (closing the connection) for err.
func (r *remoteSession) fail(err error) {
	r.mu.Lock()
	first := r.closed == nil
	if first {
		r.closed = err
	}
	conn := r.conn
	r.mu.Unlock()
	if first && conn != nil {
		close(r.done)
		conn.Close(websocket.StatusNormalClosure, "")
	}
}

// sendControls is the local session's controls hook: once the server
// session is open, the controls are sent to it and apply locally only when
// it took them. Before it opens they go with the request that opens it.
func (r *remoteSession) sendControls(c stream.Controls) error {
	r.mu.Lock()
	open, closed := r.conn != nil, r.closed
	if !open {
		r.pending = c // open sends them
	}
	r.mu.Unlock()
	if !open || closed != nil {
		return nil
	}
	r.ctl.Lock()
	defer r.ctl.Unlock()
	r.mu.Lock()
	closed = r.closed
	r.mu.Unlock()
	if closed != nil { // finish may have kept the connection for another session
		return nil
	}
	if err := r.send(r.ctx, oip.ControlsRequest{Controls: c}); err != nil {
		return fmt.Errorf("%s: controls: %w", r.c.where(r.task.TaskID), err)
	}
	ev, ok := <-r.answers
	switch {
	case !ok:
		return fmt.Errorf("%s: controls: %w", r.c.where(r.task.TaskID), r.closedErr())
	case ev.name == oip.EventRefused:
		var e oip.ErrorResponse
		json.Unmarshal(ev.data, &e)
		return fmt.Errorf("%s: controls: %w", r.c.where(r.task.TaskID), &StatusError{Status: http.StatusBadRequest, Message: e.Error})
	}
	return nil
}
