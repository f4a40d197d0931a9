package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// session is one open stream.
type session struct {
	model *model
	s     *stream.Session
}

// stream answers an infer request to a streaming task with a realtime
// session streamed as Server-Sent Events. Request parameters: "paced"
// (default true), "max_chunks" (default 0: until the client goes away),
// "controls" (initial controls).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, m *model, v *variant, task *runtime.InferenceTaskProfile, call map[string]any, req *oip.InferenceRequest) {
	opts, err := streamOptions(req.Parameters)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.nsessions.Add(1) > int64(s.cfg.MaxSessions) {
		s.nsessions.Add(-1)
		writeError(w, withStatus(http.StatusTooManyRequests, "%d realtime sessions are open, the limit; retry later", s.cfg.MaxSessions))
		return
	}
	defer s.nsessions.Add(-1)
	if !s.inflight.enter(false) {
		writeError(w, errDraining)
		return
	}
	defer s.inflight.leave()

	// The session ends when the client goes away or the server shuts down.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stopOnShutdown := context.AfterFunc(s.streamCtx, cancel)
	defer stopOnShutdown()

	sess, err := v.client.Stream(ctx, task.TaskID, call, opts...)
	if err != nil {
		writeError(w, err)
		return
	}
	var video string
	for _, a := range task.Outputs {
		if a.Kind == runtime.ArtifactVideo {
			video = a.ArtifactID
			break
		}
	}
	id := newID(16)
	s.sessions.Store(id, &session{model: m, s: sess})
	defer s.sessions.Delete(id)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event string, data any) error {
		b, err := marshal(data)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	info := oip.SessionInfo{ID: id, ControlsURL: "/v2/models/" + m.oip.Spec.ModelFamilyID + "/sessions/" + id, Realtime: sess.Spec().ToPayload()}
	if send(oip.EventSession, info) != nil {
		return
	}
	for c, err := range sess.Chunks(ctx) {
		if err != nil {
			if r.Context().Err() == nil { // someone is still listening
				msg := err.Error()
				if s.streamCtx.Err() != nil {
					msg = "the server is shutting down: " + msg
				}
				send(oip.EventError, oip.ErrorResponse{Error: msg})
			}
			return
		}
		out, err := oip.EncodeOutputs(task, map[string]any{video: c.Video.Frames}, nil)
		if err != nil {
			send(oip.EventError, oip.ErrorResponse{Error: err.Error()})
			return
		}
		resp := oip.InferenceResponse{
			ModelName: m.oip.Spec.ModelFamilyID, ModelVersion: v.id, ID: req.ID, Outputs: out,
			Parameters: oip.Parameters{
				"task":              task.TaskID,
				oip.ChunkIndex:      c.Index,
				oip.ChunkFirstFrame: c.FirstFrame,
				oip.ChunkLatencyMS:  float64(c.Latency.Microseconds()) / 1000,
				oip.ChunkRealtime:   sess.Spec().ToPayload(),
			},
		}
		if send(oip.EventChunk, &resp) != nil {
			return // the client went away; ctx ends with the request
		}
	}
	send(oip.EventEnd, struct{}{})
}

// streamOptions reads the stream parameters of a request.
func streamOptions(p oip.Parameters) ([]stream.Option, error) {
	var opts []stream.Option
	if paced, ok, err := p.BoolParam("paced"); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, stream.WithPacing(paced))
	}
	if n, ok, err := p.IntParam("max_chunks"); err != nil {
		return nil, err
	} else if ok {
		if n < 0 || n > 1<<31 {
			return nil, withStatus(http.StatusBadRequest, "parameter \"max_chunks\" is %d, want 0 (no limit) or more", n)
		}
		opts = append(opts, stream.WithMaxChunks(int(n)))
	}
	if c, ok, err := p.FloatsParam("controls"); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, stream.WithControls(c))
	}
	return opts, nil
}

// control answers POST /v2/models/{name}/sessions/{id}: it sets the
// controls of an open session of the model, from its next chunk. The
// session ends when its stream's client goes away.
func (s *Server) control(w http.ResponseWriter, r *http.Request, m *model, id string) {
	if !method(w, r, http.MethodPost) {
		return
	}
	v, ok := s.sessions.Load(id)
	if !ok || v.(*session).model != m {
		writeError(w, withStatus(http.StatusNotFound, "no open session %q of model %q", id, m.oip.Spec.ModelFamilyID))
		return
	}
	sess := v.(*session).s
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, err)
		return
	}
	var req oip.ControlsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, withStatus(http.StatusBadRequest, "malformed controls body: %v (want {\"controls\": {\"NAME\": NUMBER, ...}})", err))
		return
	}
	if req.Controls == nil {
		writeError(w, withStatus(http.StatusBadRequest, "the body has no \"controls\" object"))
		return
	}
	if err := sess.SetControls(req.Controls); err != nil {
		writeError(w, &statusError{status: http.StatusBadRequest, err: err})
		return
	}
	writeJSON(w, http.StatusOK, oip.ControlsRequest{Controls: sess.Controls()})
}
