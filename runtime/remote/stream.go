package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// maxEventBytes bounds one Server-Sent Event (a chunk's frames as JSON).
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

// remoteSession is the server side of a local session: the event stream
// and the session's controls URL.
type remoteSession struct {
	c         *Client
	ctx       context.Context
	task      *spec.InferenceTaskProfile
	video     string
	req       *oip.InferenceRequest
	paced     bool
	maxChunks int
	local     *stream.Session

	mu       sync.Mutex // guards the fields below
	body     io.ReadCloser
	events   *bufio.Reader
	controls string          // the session's controls URL, once open
	pending  stream.Controls // controls set before it opened
	closed   error           // why the stream is over
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
	req.Parameters = oip.Parameters{"task": r.task.TaskID, "stream": true, "paced": r.paced, "max_chunks": r.maxChunks,
		"controls": string(ctl), "lockstep": true}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(r.ctx, http.MethodPost, r.c.path("infer"), bytes.NewReader(b))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	r.c.authorize(hreq)
	resp, err := r.c.http.Do(hreq)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return fmt.Errorf("the server answered %s, not a stream (text/event-stream): it does not support wfserve's sessions", ct)
	}
	r.body, r.events = resp.Body, bufio.NewReaderSize(resp.Body, 64<<10)
	name, data, err := r.next()
	if err != nil {
		r.body.Close()
		return err
	}
	if name != oip.EventSession {
		r.body.Close()
		return fmt.Errorf("the stream began with event %q, want %q", name, oip.EventSession)
	}
	var info oip.SessionInfo
	if err := json.Unmarshal(data, &info); err != nil || info.ControlsURL == "" {
		r.body.Close()
		return fmt.Errorf("malformed session event: %s", data)
	}
	u := *r.c.base
	u.Path, u.RawPath = r.c.base.Path+info.ControlsURL, ""
	r.controls = u.String()
	return nil
}

// readLine reads one line, however long (up to maxEventBytes).
func (r *remoteSession) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := r.events.ReadSlice('\n')
		if len(line)+len(frag) > maxEventBytes {
			return nil, fmt.Errorf("an event is larger than %d bytes", maxEventBytes)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, frag...)
			continue
		case err != nil:
			return nil, eventError(err)
		}
		return append(line, frag...), nil
	}
}

// next reads one event: its name and data.
func (r *remoteSession) next() (name string, data []byte, err error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return "", nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if name != "" || data != nil {
				if name == "" {
					name = "message"
				}
				return name, data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value := sseField(line)
		switch field {
		case "event":
			name = string(value)
		case "data":
			if len(data)+len(value) > maxEventBytes {
				return "", nil, fmt.Errorf("an event is larger than %d bytes", maxEventBytes)
			}
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
}

// sseField splits one line into its field and value.
func sseField(line []byte) (string, []byte) {
	field, value, _ := bytes.Cut(line, []byte(":"))
	return string(field), bytes.TrimPrefix(value, []byte(" "))
}

func eventError(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("the server closed the stream without ending it")
	}
	return err
}

// step returns the server's next chunk.
func (r *remoteSession) step(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
	r.mu.Lock()
	if r.closed != nil {
		err := r.closed
		r.mu.Unlock()
		return stream.StepResult{}, err
	}
	if r.body == nil {
		controls := req.Controls
		if r.pending != nil {
			controls = r.pending
		}
		if err := r.open(controls); err != nil {
			r.closed = err
			r.mu.Unlock()
			return stream.StepResult{}, err
		}
	}
	u := r.controls
	r.mu.Unlock()
	// A cancelled step ends the server session: reading is interrupted by
	// closing the stream.
	stop := context.AfterFunc(ctx, func() { r.fail(ctx.Err()) })
	defer stop()
	if req.Index > 0 {
		// The consumer has taken the previous chunk (the local session
		// asks for this one only then), and any controls it set since
		// have reached the server: let the server make this one.
		ack := int64(req.Index - 1)
		var ans oip.ControlsRequest
		if err := r.c.do(ctx, http.MethodPost, u, oip.ControlsRequest{Ack: &ack}, &ans); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			err = fmt.Errorf("ack of chunk %d: %w", ack, err)
			r.fail(err)
			return stream.StepResult{}, err
		}
	}
	name, data, err := r.next()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		r.fail(err)
		return stream.StepResult{}, err
	}
	switch name {
	case oip.EventChunk:
	case oip.EventError:
		var e oip.ErrorResponse
		json.Unmarshal(data, &e)
		err := fmt.Errorf("server: %s", e.Error)
		r.fail(err)
		return stream.StepResult{}, err
	case oip.EventEnd:
		err := errors.New("the server ended the session")
		r.fail(err)
		return stream.StepResult{}, err
	default:
		err := fmt.Errorf("unexpected event %q", name)
		r.fail(err)
		return stream.StepResult{}, err
	}
	var resp oip.InferenceResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		r.fail(err)
		return stream.StepResult{}, fmt.Errorf("malformed chunk event: %w", err)
	}
	out, err := oip.DecodeOutputs(r.task, resp.Outputs)
	if err != nil {
		r.fail(err)
		return stream.StepResult{}, err
	}
	res := stream.StepResult{Frames: out[r.video]}
	if text, ok := resp.Parameters[oip.ChunkRealtime].(string); ok {
		var rt map[string]any
		if json.Unmarshal([]byte(text), &rt) == nil {
			res.Realtime = rt // malformed metadata is ignored, as in-process
		}
	}
	if r.maxChunks > 0 && req.Index+1 >= r.maxChunks {
		r.fail(errors.New("the session has ended"))
	}
	return res, nil
}

// fail ends the server session (closing the stream) for err.
func (r *remoteSession) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed == nil {
		r.closed = err
	}
	if r.body != nil {
		r.body.Close()
	}
}

// sendControls is the local session's controls hook: once the server
// session is open, the controls are sent to it before they apply locally.
// Before it opens they go with the request that opens it.
func (r *remoteSession) sendControls(c stream.Controls) error {
	r.mu.Lock()
	u, closed := r.controls, r.closed
	if u == "" {
		r.pending = c // open sends them
	}
	r.mu.Unlock()
	if u == "" || closed != nil {
		return nil
	}
	var ans oip.ControlsRequest
	if err := r.c.do(r.ctx, http.MethodPost, u, oip.ControlsRequest{Controls: c}, &ans); err != nil {
		return fmt.Errorf("%s: controls: %w", r.c.where(r.task.TaskID), err)
	}
	return nil
}
