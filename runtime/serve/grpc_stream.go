package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
)

// ModelStreamInfer runs a realtime session on one bidirectional stream:
// the first message opens it (the infer request, as a REST request that
// asks for a stream: same limits, MaxSessions included, and stream
// parameters), then the server sends the session message and one chunk
// message per chunk while the client's control messages set controls and
// ack chunks (lockstep), as the REST controls endpoint does; a control
// message that sets controls is answered with the controls in effect, a
// refused one with an error_message, and the session goes on. The
// stream ends OK after the last chunk, with Unavailable when the server
// shuts down, and with the session's error otherwise. The first message
// must arrive within the server's read limit (DeadlineExceeded).
func (g *grpcService) ModelStreamInfer(st oippb.RealtimeInferenceService_ModelStreamInferServer) error {
	s := g.s
	a, err := s.arrive(true)
	if err != nil {
		return err
	}
	defer a.done()
	hold := &a.hold
	ctx := st.Context()
	markStream(ctx)
	start, err := s.firstMessage(ctx, st, hold)
	if err != nil {
		return err
	}
	m, pv, n, err := s.lookupRevision(ctx, start.GetModelName(), start.GetModelVersion())
	ctx = withRevision(ctx, n)
	if m == nil {
		setObs(ctx, s.tel.unknownModel)
	} else {
		setObs(ctx, s.tel.obs(m, ""))
	}
	if err != nil {
		return err
	}
	req, err := oippb.Request(start, s.lim)
	if err != nil {
		return err
	}
	c, err := s.resolve(ctx, m, pv, req, true, hold)
	if err != nil {
		return err
	}
	if !c.stream {
		return withStatus(http.StatusBadRequest, "task %q is not a streaming task (or the request says \"stream\": false): call ModelInfer", c.task.TaskID)
	}
	hold.done() // the session holds its inputs; it counts against MaxSessions
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	se, err := s.openSession(sctx, m, c.v, c.task, c.call, req.Parameters)
	if err != nil {
		return err
	}
	defer se.close()

	// One Send at a time (the chunks and the refusals), and none once the
	// handler has returned. A send that the client does not take within
	// sessionWriteTimeout (it stopped reading), or that is still blocked once
	// the server's shutdown grace has passed, ends the call.
	var mu sync.Mutex
	closed := false
	defer func() {
		mu.Lock()
		closed = true
		mu.Unlock()
	}()
	// Ending the call cancels its context, and grpc-go then answers it
	// itself (the reader's pending Recv fails and writes Canceled): so the
	// shutdown grace's end ends it only when a send is blocked, and says why
	// (the drain); otherwise the session ends on its own with the drain's
	// answer, Unavailable.
	end := callCancel(ctx)
	var sending atomic.Bool
	defer context.AfterFunc(s.writeCtx, func() {
		if sending.Load() {
			end(errDraining)
		}
	})()
	send := func(msg *oippb.ModelStreamInferResponse) error {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return errors.New("the stream has ended")
		}
		sending.Store(true)
		defer sending.Store(false)
		if s.writeCtx.Err() != nil {
			return errDraining // after the grace: no send may block
		}
		// As though the client went away: it does not read.
		t := time.AfterFunc(sessionWriteTimeout, func() { end(nil) })
		defer t.Stop()
		return st.Send(msg)
	}
	// The reader: controls in. The client's half-close ends the controls,
	// not the session.
	go func() {
		for {
			msg, err := s.controlMessage(st)
			if err != nil {
				if status(err) != http.StatusInternalServerError {
					send(&oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_ErrorMessage{ErrorMessage: err.Error()}})
					cancel() // a malformed or oversized message ends the session
				}
				return
			}
			ans, snap, err := se.control(msg.GetControls())
			var out *oippb.ModelStreamInferResponse
			if ans != nil {
				if send(&oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_Controls{Controls: ans}}) != nil {
					return
				}
			}
			switch {
			case err != nil:
				out = &oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_ErrorMessage{ErrorMessage: err.Error()}}
			case snap != nil:
				out = &oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_Snapshot{Snapshot: &oippb.SessionSnapshot{Token: snap.Token, Next: snap.Next}}}
			default:
				continue // an ack alone is answered only when refused
			}
			if send(out) != nil {
				return
			}
		}
	}()
	var failed string
	event := func(name string, data any) error {
		switch name {
		case oip.EventSession:
			info := data.(oip.SessionInfo)
			rt, err := json.Marshal(info.Realtime)
			if err != nil {
				return err
			}
			return send(&oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_Session{Session: &oippb.SessionInfo{Id: info.ID, Realtime: string(rt)}}})
		case oip.EventError:
			if e, ok := data.(oip.ErrorResponse); ok {
				failed = e.Error
			} else {
				failed = "the session failed"
			}
		}
		return nil
	}
	chunk := func(resp *oip.InferenceResponse) error {
		out, err := oippb.Response(resp)
		if err != nil {
			return err
		}
		return send(&oippb.ModelStreamInferResponse{Message: &oippb.ModelStreamInferResponse_Chunk{Chunk: out}})
	}
	s.pump(se.ctx, ctx, se, req.ID, event, chunk)
	switch {
	case s.streamCtx.Err() != nil:
		return errDraining // first: the drain may have cut the call too
	case ctx.Err() != nil:
		return ctx.Err() // the client went away, or stopped reading
	case failed != "":
		return grpcstatus.Error(codes.Internal, failed)
	}
	return nil
}

// control applies a control message to a session: its controls from the
// next chunk (clear_controls: none), a snapshot (taken after the controls apply and before the
// ack), its ack. It returns the controls in effect when the message set
// some (nil for an ack alone) and the snapshot it asked for. A message
// without any of them is refused.
func (se *session) control(c *oippb.SessionControls) (*oippb.SessionControls, *oip.SnapshotInfo, error) {
	if c == nil {
		return nil, nil, withStatus(http.StatusBadRequest, "a message after the first must be controls (the session is open)")
	}
	set := len(c.GetControls()) > 0 || c.GetClearControls()
	if !set && c.Ack == nil && !c.GetSnapshot() {
		return nil, nil, withStatus(http.StatusBadRequest, "the controls message has neither controls, clear_controls, an ack nor snapshot: true")
	}
	var ans *oippb.SessionControls
	if set {
		if len(c.GetControls()) > 0 && c.GetClearControls() {
			return nil, nil, withStatus(http.StatusBadRequest, "the controls message has both controls and clear_controls")
		}
		if err := se.s.SetControls(c.GetControls()); err != nil {
			return nil, nil, err
		}
		ans = &oippb.SessionControls{Controls: se.s.Controls()}
	}
	var snap *oip.SnapshotInfo
	if c.GetSnapshot() {
		var err error
		if snap, err = se.snapshot(se.key); err != nil {
			return ans, nil, err
		}
	}
	if c.Ack != nil {
		se.ack(c.GetAck())
	}
	return ans, snap, nil
}

// firstMessage receives a session's first message, the infer request that
// opens it, within the server's read limit, its bytes counted in hold as
// receive counts them.
func (s *Server) firstMessage(ctx context.Context, st grpc.ServerStream, hold *holding) (*oippb.ModelInferRequest, error) {
	type received struct {
		msg  *oippb.ModelStreamInferRequest
		hold *holding
		err  error
	}
	ch := make(chan received, 1)
	rctx, cancel := context.WithTimeout(ctx, s.readLimit())
	defer cancel()
	go func() {
		r := received{msg: &oippb.ModelStreamInferRequest{}, hold: &holding{a: &s.adm}}
		r.err = s.receive(rctx, st, r.msg, r.hold)
		ch <- r
	}()
	select {
	case r := <-ch:
		hold.n += r.hold.n // the request's now
		if r.err != nil {
			return nil, r.err
		}
		start := r.msg.GetStart()
		if start == nil {
			return nil, withStatus(http.StatusBadRequest, "the first message must be start, the infer request that opens the session")
		}
		return start, nil
	case <-rctx.Done():
		// Returning ends the stream, and with it the receive above, which
		// gives its bytes back.
		go func() { (<-ch).hold.done() }()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, withStatus(http.StatusRequestTimeout, "no infer request within %v of the stream's start", s.readLimit())
	}
}

// maxControlBytes bounds a session's message after the first (controls and
// acks), as the REST controls endpoint bounds its body.
const maxControlBytes = 1 << 20

// controlMessage receives a session's next message, controls or an ack:
// one larger than maxControlBytes ends the session, and what decoding it
// takes is counted against the in-flight budget while it is decoded. A
// message is not waited for with bytes reserved, as a request's is: a
// session waits for its controls all its life.
func (s *Server) controlMessage(st grpc.ServerStream) (*oippb.ModelStreamInferRequest, error) {
	var raw rawMessage
	defer raw.free()
	if err := st.RecvMsg(&raw); err != nil {
		return nil, err
	}
	if n := len(raw.bytes()); n > maxControlBytes {
		return nil, withStatus(http.StatusRequestEntityTooLarge, "a controls message of %d bytes, more than the limit of %d: the session ends", n, maxControlBytes)
	}
	hold := &holding{a: &s.adm}
	defer hold.done()
	var msg oippb.ModelStreamInferRequest
	if err := oippb.Unmarshal(raw.bytes(), &msg, s.limits(hold)); err != nil {
		return nil, err
	}
	return &msg, nil
}
