package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// session is one open stream.
type session struct {
	model   *model
	variant *variant
	rev     *revision // pinned for the session's life: every chunk is its
	task    *spec.InferenceTaskProfile
	video   string // the task's video artifact
	id      string
	key     []byte // seals its snapshots (Config.SessionKey)
	s       *stream.Session
	ctx     context.Context // ends with the session
	cancel  func()          // ends the session (its handler then closes it)
	close   func()          // ends the session and forgets it

	mu    sync.Mutex
	acked int64         // last chunk the client took (lockstep), -1 before any
	acks  chan struct{} // closed and replaced at each ack
}

// ack records that the client took chunk i.
func (se *session) ack(i int64) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if i > se.acked {
		se.acked = i
		close(se.acks)
		se.acks = make(chan struct{})
	}
}

// waitAck waits until the client took chunk i, or ctx ends.
func (se *session) waitAck(ctx context.Context, i int64) error {
	for {
		se.mu.Lock()
		if se.acked >= i {
			se.mu.Unlock()
			return nil
		}
		ch := se.acks
		se.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stream answers an infer request to a streaming task with a realtime
// session streamed as Server-Sent Events. Request parameters: "paced"
// (default true), "max_chunks" (default 0: until the client goes away),
// "controls" (initial controls, as JSON text or an object) and "lockstep"
// (default false: each chunk after the first waits for the client's ack of
// the one before, see oip.ControlsRequest.Ack). Every chunk runs on one of
// the variant's engine slots, like a request.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, m *model, v *variant, task *spec.InferenceTaskProfile, call map[string]any, req *oip.InferenceRequest) {
	// A session joins no batch: the batchers stop waiting for it (active).
	s.active.Add(-1)
	defer s.active.Add(1)
	// The session ends when the client goes away or the server shuts down.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	se, err := s.openSession(ctx, m, v, task, call, req.Parameters)
	if err != nil {
		writeError(w, err)
		return
	}
	defer se.close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	// A stream lasts as long as its client wants, but each event must
	// reach it within sessionWriteTimeout, and every write is cut once the
	// server's shutdown grace has passed: a client that stops reading
	// loses its session.
	var mu sync.Mutex
	cut := false
	stopCut := context.AfterFunc(s.writeCtx, func() {
		mu.Lock()
		defer mu.Unlock()
		cut = true
		rc.SetWriteDeadline(time.Now())
	})
	defer stopCut()
	deadline := func() {
		mu.Lock()
		defer mu.Unlock()
		if !cut {
			rc.SetWriteDeadline(time.Now().Add(sessionWriteTimeout))
		}
	}
	deadline()
	w.WriteHeader(http.StatusOK)
	send := func(event string, data any) error {
		b, err := marshal(data)
		if err != nil {
			return err
		}
		deadline()
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	s.pump(ctx, r.Context(), se, req.ID, send, nil)
}

// openSession starts a realtime session of task with the stream
// parameters p (see stream) and registers it under a fresh id for its
// controls; close ends it. It is refused (429) when MaxSessions are open.
// The session ends when ctx does or the server shuts down.
func (s *Server) openSession(ctx context.Context, m *model, v *variant, task *spec.InferenceTaskProfile, call map[string]any, p oip.Parameters) (*session, error) {
	opts, lockstep, err := streamOptions(p)
	if err != nil {
		return nil, err
	}
	restore, first, err := s.restoreOptions(p)
	if err != nil {
		return nil, err
	}
	opts = append(opts, restore...)
	if s.nsessions.Add(1) > int64(s.cfg.MaxSessions) {
		s.nsessions.Add(-1)
		return nil, withStatus(http.StatusTooManyRequests, "%d realtime sessions are open, the limit; retry later", s.cfg.MaxSessions)
	}
	unlease, err := s.lease(ctx, v, true)
	if err != nil {
		s.nsessions.Add(-1)
		return nil, err
	}
	rev, err := v.pinAt(revisionOf(ctx)) // the newest, or the VARIANT@N the request names
	if err != nil {
		unlease()
		s.nsessions.Add(-1)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stopOnShutdown := context.AfterFunc(s.streamCtx, cancel)
	// A restored session's first chunk is the snapshot's next: it waits
	// for no ack.
	se := &session{model: m, variant: v, rev: rev, task: task, key: s.cfg.SessionKey, acked: int64(first) - 1, acks: make(chan struct{})}
	gate := func(ctx context.Context, i int) (func(), error) {
		if lockstep && i > 0 {
			if err := se.waitAck(ctx, int64(i-1)); err != nil {
				return nil, err
			}
		}
		if task.SessionBatching != nil {
			// The sessions' steps share calls, and each call holds a slot
			// (client.WithSessionGate): a step waiting for its call must
			// not hold one, or no two steps would ever meet.
			return func() {}, nil
		}
		return v.slots.acquire(ctx)
	}
	opts = append(opts, stream.WithGate(gate))
	sess, err := rev.client.CallStream(ctx, task, client.Kwargs(task, call), opts...)
	if err != nil {
		stopOnShutdown()
		cancel()
		rev.leave()
		unlease()
		s.nsessions.Add(-1)
		return nil, restoreError(err)
	}
	se.s, se.ctx, se.cancel = sess, ctx, cancel
	for _, a := range task.Outputs {
		if a.Kind.Picture() == spec.PictureVideo {
			se.video = a.ArtifactID
			break
		}
	}
	se.id = newID(16)
	s.sessions.Store(se.id, se)
	m.sessions.Add(1)
	se.close = func() {
		s.sessions.Delete(se.id)
		m.sessions.Add(-1)
		stopOnShutdown()
		cancel()
		rev.leave()
		unlease()
		s.nsessions.Add(-1)
	}
	return se, nil
}

// pump sends a session's events until it ends: EventSession, one
// EventChunk per chunk, then EventEnd, or EventError when it fails while
// its client (whose context is client) still listens. chunk, when not
// nil, sends a chunk's response in place of send(EventChunk, ...); binary
// says which outputs it takes as binary data. It returns whether the
// session ended by itself and EventEnd went out.
func (s *Server) pump(ctx, client context.Context, se *session, reqID string, send func(event string, data any) error, chunk func(*oip.InferenceResponse) error) (ended bool) {
	m, sess := se.model, se.s
	info := oip.SessionInfo{ID: se.id, ControlsURL: "/v2/models/" + m.oip.Spec.ModelFamilyID + "/sessions/" + se.id, Realtime: sess.Spec().ToPayload()}
	if send(oip.EventSession, info) != nil {
		return false
	}
	raw := chunk != nil
	binary := func(string) bool { return raw }
	if chunk == nil {
		chunk = func(resp *oip.InferenceResponse) error { return send(oip.EventChunk, resp) }
	}
	for c, err := range sess.Chunks(ctx) {
		if err != nil {
			if client.Err() == nil { // someone is still listening
				msg := err.Error()
				if s.streamCtx.Err() != nil {
					msg = "the server is shutting down: " + msg
				}
				send(oip.EventError, oip.ErrorResponse{Error: msg})
			}
			return false
		}
		out, err := oip.EncodeOutputsBinary(se.task, map[string]any{se.video: c.Video.Frames}, nil, binary)
		if err != nil {
			send(oip.EventError, oip.ErrorResponse{Error: err.Error()})
			return false
		}
		resp := oip.InferenceResponse{
			ModelName: m.oip.Spec.ModelFamilyID, ModelVersion: se.rev.version, ID: reqID, Outputs: out,
			Parameters: oip.Parameters{
				"task":              se.task.TaskID,
				oip.ChunkIndex:      c.Index,
				oip.ChunkFirstFrame: c.FirstFrame,
				oip.ChunkLatencyMS:  float64(c.Latency.Microseconds()) / 1000,
				oip.ChunkRealtime:   realtimeText(sess.Spec()),
			},
		}
		if chunk(&resp) != nil {
			return false // the client went away; ctx ends with it
		}
	}
	return send(oip.EventEnd, struct{}{}) == nil
}

// realtimeText is a realtime spec as the chunk parameter carries it: JSON
// text.
func realtimeText(sp spec.RealtimeSpec) string {
	b, _ := json.Marshal(sp.ToPayload())
	return string(b)
}

// streamOptions reads the stream parameters of a request.
func streamOptions(p oip.Parameters) (opts []stream.Option, lockstep bool, err error) {
	if paced, ok, err := p.BoolParam("paced"); err != nil {
		return nil, false, err
	} else if ok {
		opts = append(opts, stream.WithPacing(paced))
	}
	if n, ok, err := p.IntParam("max_chunks"); err != nil {
		return nil, false, err
	} else if ok {
		if n < 0 || n > 1<<31 {
			return nil, false, withStatus(http.StatusBadRequest, "parameter \"max_chunks\" is %d, want 0 (no limit) or more", n)
		}
		opts = append(opts, stream.WithMaxChunks(int(n)))
	}
	if c, ok, err := p.FloatsParam("controls"); err != nil {
		return nil, false, err
	} else if ok {
		opts = append(opts, stream.WithControls(c))
	}
	lockstep, _, err = p.BoolParam("lockstep")
	if err != nil {
		return nil, false, err
	}
	return opts, lockstep, nil
}

// control answers POST /v2/models/{model}/sessions/{session}: it sets the
// controls of an open session of the model, from its next chunk, and
// records the client's ack of a chunk (lockstep sessions). The session
// ends when its stream's client goes away.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	m, id := modelOf(r), r.PathValue("session")
	v, ok := s.sessions.Load(id)
	if !ok || v.(*session).model != m {
		refuse(w, r, withStatus(http.StatusNotFound, "no open session %q of model %q", id, m.oip.Spec.ModelFamilyID))
		return
	}
	se := v.(*session)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, err)
		return
	}
	ans, _, snap, err := se.apply(body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, oip.ControlsAnswer{Controls: ans.Controls, Snapshot: snap})
}

// apply applies a ControlsRequest body to the session (POST .../sessions/{id}
// or a WebSocket message) and returns the controls in effect, whether the
// body set any, and the snapshot it asked for. The controls apply first,
// then the snapshot is taken, then the ack: a snapshot never runs past
// the chunk the message acks.
func (se *session) apply(body []byte) (ans oip.ControlsRequest, set bool, snap *oip.SnapshotInfo, err error) {
	var req oip.ControlsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return ans, false, nil, withStatus(http.StatusBadRequest, "malformed controls: %v (want {\"controls\": {\"NAME\": NUMBER, ...}}, {\"ack\": CHUNK} and/or {\"snapshot\": true})", err)
	}
	if req.Controls == nil && req.Ack == nil && !req.Snapshot {
		return ans, false, nil, withStatus(http.StatusBadRequest, "neither a \"controls\" object, an \"ack\" nor \"snapshot\": true")
	}
	if req.Controls != nil {
		if err := se.s.SetControls(req.Controls); err != nil {
			return ans, false, nil, &statusError{status: http.StatusBadRequest, err: err}
		}
	}
	if req.Snapshot {
		if snap, err = se.snapshot(se.key); err != nil {
			return ans, req.Controls != nil, nil, err
		}
	}
	if req.Ack != nil {
		se.ack(*req.Ack)
	}
	return oip.ControlsRequest{Controls: se.s.Controls()}, req.Controls != nil, snap, nil
}
