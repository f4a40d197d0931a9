package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// grpcStream is CallStream on a gRPC client: the server session runs on
// one ModelStreamInfer call, in lockstep (each chunk after the first is
// acked when the local session asks for the next, so that controls set in
// between apply to it, as in-process), its controls sent on the same
// stream and applied locally once the server took them.
func (c *Client) grpcStream(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, video string, probe *stream.Session, opts []stream.Option) (*stream.Session, error) {
	req, err := rawRequest(task, client.CallKwargs(task, in, 0), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	gs := &grpcSession{c: c, ctx: ctx, task: task, video: video, req: req, paced: probe.Paced(), maxChunks: probe.MaxChunks()}
	all := append(append([]stream.Option{}, opts...), stream.WithPacing(false), stream.WithControlsHook(gs.sendControls))
	sess, err := stream.New(c.spec.Realtime, gs.step, all...)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// grpcSession is the server side of a local session over gRPC.
type grpcSession struct {
	c         *Client
	ctx       context.Context
	task      *spec.InferenceTaskProfile
	video     string
	req       *oip.InferenceRequest
	paced     bool
	maxChunks int

	mu      sync.Mutex // guards the fields below
	st      oippb.RealtimeInferenceService_ModelStreamInferClient
	cancel  context.CancelFunc // ends the call
	sctx    context.Context    // the call's context
	events  chan grpcEvent     // chunks, in order, then why the stream ended
	answers chan grpcEvent     // answers to controls messages, in order
	done    chan struct{}      // closed by fail: read stops delivering
	pending stream.Controls    // controls set before it opened
	closed  error              // why the session is over

	send sync.Mutex // one Send at a time
	ctl  sync.Mutex // one controls message at a time: answers come in order
}

// grpcEvent is one message of the session, or why it ended.
type grpcEvent struct {
	msg *oippb.ModelStreamInferResponse
	err error
}

// open starts the server session with the controls the first step has.
func (g *grpcSession) open(controls stream.Controls) error {
	ctl, err := json.Marshal(map[string]float64(controls))
	if err != nil {
		return err
	}
	req := *g.req
	req.Parameters = oip.Parameters{"task": g.task.TaskID, "paced": g.paced, "max_chunks": int64(g.maxChunks),
		"controls": string(ctl), "lockstep": true}
	start, err := oippb.NewRequest(g.c.model, g.c.variant, &req)
	if err != nil {
		return err
	}
	g.sctx, g.cancel = context.WithCancel(g.c.grpcContext(g.ctx))
	st, err := g.c.grpc.rt.ModelStreamInfer(g.sctx)
	if err != nil {
		return grpcError(g.ctx, err)
	}
	if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: start}}); err != nil && !errors.Is(err, io.EOF) {
		return grpcError(g.ctx, err)
	}
	first, err := st.Recv()
	if err != nil {
		return grpcError(g.ctx, err)
	}
	if first.GetSession() == nil {
		return fmt.Errorf("the session began with %v, want a session message", first)
	}
	g.st = st
	g.events, g.answers, g.done = make(chan grpcEvent, 4), make(chan grpcEvent, 1), make(chan struct{})
	go g.read()
	return nil
}

// read takes the session's messages until the stream ends: answers to
// controls to g.answers (dropped when nobody waits for one: the server
// answers an ack only to refuse it), chunks to g.events, then why it
// ended (io.EOF: it ended by itself).
func (g *grpcSession) read() {
	defer close(g.answers)
	defer close(g.events)
	for {
		msg, err := g.st.Recv()
		if err == nil && (msg.GetControls() != nil || msg.GetErrorMessage() != "") {
			select {
			case g.answers <- grpcEvent{msg: msg}:
			default:
			}
			continue
		}
		select {
		case g.events <- grpcEvent{msg: msg, err: err}:
		case <-g.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// step returns the server's next chunk.
func (g *grpcSession) step(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
	g.mu.Lock()
	if g.closed != nil {
		err := g.closed
		g.mu.Unlock()
		return stream.StepResult{}, err
	}
	if g.st == nil {
		controls := req.Controls
		if g.pending != nil {
			controls = g.pending
		}
		if err := g.open(controls); err != nil {
			g.closed = err
			if g.cancel != nil {
				g.cancel()
			}
			g.mu.Unlock()
			return stream.StepResult{}, err
		}
	}
	g.mu.Unlock()
	// A cancelled step ends the server session.
	stop := context.AfterFunc(ctx, func() { g.fail(ctx.Err()) })
	defer stop()
	if req.Index > 0 {
		// The consumer took the previous chunk, and the controls it set
		// since have reached the server: let the server make this one. A
		// failed send means the stream is gone; the next event says why.
		ack := int64(req.Index - 1)
		g.write(&oippb.SessionControls{Ack: &ack})
	}
	ev, ok := <-g.events
	var err error
	switch {
	case !ok:
		err = g.closedErr()
	case errors.Is(ev.err, io.EOF):
		err = errors.New("the server ended the session")
	case ev.err != nil:
		err = grpcError(ctx, ev.err)
	case ev.msg.GetChunk() == nil:
		err = fmt.Errorf("unexpected message %v", ev.msg)
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		g.fail(err)
		return stream.StepResult{}, err
	}
	resp, err := oippb.DecodeResponse(ev.msg.GetChunk())
	if err != nil {
		err = fmt.Errorf("malformed chunk: %w", err)
		g.fail(err)
		return stream.StepResult{}, err
	}
	res, err := chunkResult(g.task, g.video, resp)
	if err != nil {
		g.fail(err)
		return stream.StepResult{}, err
	}
	if g.maxChunks > 0 && req.Index+1 >= g.maxChunks {
		g.fail(errors.New("the session has ended"))
	}
	return res, nil
}

// write sends one controls message.
func (g *grpcSession) write(c *oippb.SessionControls) error {
	g.send.Lock()
	defer g.send.Unlock()
	return g.st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: c}})
}

// closedErr is why the session is over.
func (g *grpcSession) closedErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		return g.closed
	}
	return errors.New("the session has ended")
}

// fail ends the server session (cancelling the call) for err.
func (g *grpcSession) fail(err error) {
	g.mu.Lock()
	first := g.closed == nil
	if first {
		g.closed = err
	}
	open := g.st != nil
	g.mu.Unlock()
	if first && open {
		close(g.done)
		g.cancel()
	}
}

// sendControls is the local session's controls hook: once the server
// session is open, the controls are sent to it and apply locally only when
// it took them. Before it opens they go with the request that opens it.
func (g *grpcSession) sendControls(c stream.Controls) error {
	g.mu.Lock()
	open, closed := g.st != nil, g.closed
	if !open {
		g.pending = c // open sends them
	}
	g.mu.Unlock()
	if !open || closed != nil {
		return nil
	}
	g.ctl.Lock()
	defer g.ctl.Unlock()
	if err := g.write(&oippb.SessionControls{Controls: c}); err != nil {
		return fmt.Errorf("%s: controls: %w", g.c.where(g.task.TaskID), grpcError(g.ctx, err))
	}
	ev, ok := <-g.answers
	switch {
	case !ok:
		return fmt.Errorf("%s: controls: %w", g.c.where(g.task.TaskID), g.closedErr())
	case ev.msg.GetErrorMessage() != "":
		return fmt.Errorf("%s: controls: %w", g.c.where(g.task.TaskID), &StatusError{Status: 400, Message: ev.msg.GetErrorMessage()})
	}
	return nil
}
