package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/oip"
)

// errQueueFull answers a request that finds the queue full.
var errQueueFull = &statusError{status: http.StatusTooManyRequests, err: errors.New("too many requests queued; retry later")}

// errDraining answers a request that arrives while the server shuts down.
var errDraining = &statusError{status: http.StatusServiceUnavailable, err: errors.New("the server is shutting down")}

// admit counts an infer request in, or refuses it: 503 while draining, 429
// when MaxQueue requests are already admitted. release must be called when
// it has been answered.
func (s *Server) admit() (release func(), err error) {
	if s.draining.Load() {
		return nil, errDraining
	}
	if s.admitted.Add(1) > int64(s.cfg.MaxQueue) {
		s.admitted.Add(-1)
		return nil, errQueueFull
	}
	if !s.inflight.enter(false) { // Shutdown began in between
		s.admitted.Add(-1)
		return nil, errDraining
	}
	return func() { s.admitted.Add(-1); s.inflight.leave() }, nil
}

// infer answers POST .../infer.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, m *model, version string) {
	release, err := s.admit()
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() {
		if release != nil {
			release()
		}
	}()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	req, err := oip.DecodeRequest(body, s.lim)
	if err != nil {
		writeError(w, err)
		return
	}
	vs, err := m.oip.Variant(version, req.Parameters)
	if err != nil {
		writeError(w, err)
		return
	}
	v := m.variants[vs.VariantID]
	task, err := m.oip.Task(req.Parameters)
	if err != nil {
		writeError(w, err)
		return
	}
	call, load, err := m.oip.Args(task, req.Inputs, s.lim)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := oip.CheckOutputs(task, req.Outputs); err != nil {
		writeError(w, err)
		return
	}
	if task.Stream && wantsStream(r, req) {
		release() // a stream counts against MaxSessions, not the queue
		release = nil
		s.stream(w, r, m, v, task, call, req)
		return
	}
	ctx := r.Context()
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	out, err := s.run(ctx, v, task, call, load)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			return // the client went away: nobody to answer
		case ctx.Err() != nil:
			err = &statusError{status: http.StatusGatewayTimeout, err: fmt.Errorf("the request's deadline (%v) passed before it finished: %w", s.cfg.Timeout, ctx.Err())}
		}
		writeError(w, err)
		return
	}
	outs, err := oip.EncodeOutputs(task, out, req.Outputs)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &oip.InferenceResponse{
		ModelName:    m.oip.Spec.ModelFamilyID,
		ModelVersion: v.id,
		ID:           req.ID,
		Parameters:   oip.Parameters{"task": task.TaskID},
		Outputs:      outs,
	})
}

// wantsStream reports whether a request to a streaming task asks for the
// stream (Accept: text/event-stream, or the parameter "stream": true);
// otherwise the task runs once and answers its first chunk.
func wantsStream(r *http.Request, req *oip.InferenceRequest) bool {
	if b, ok, _ := req.Parameters.BoolParam("stream"); ok {
		return b
	}
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// run runs one request: through the task's batcher when it has one, else
// directly on one of the engine slots.
func (s *Server) run(ctx context.Context, v *variant, task *runtime.InferenceTaskProfile, call, load map[string]any) (map[string]any, error) {
	if b := v.batchers[task.TaskID]; b != nil {
		return b.submit(ctx, call)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// A call that has entered the engine runs to completion; the request
	// is answered at its deadline all the same, and Shutdown waits for the
	// call.
	res := make(chan result, 1)
	s.inflight.enter(true)
	go func() {
		defer s.inflight.leave()
		defer func() { <-s.slots }()
		out, err := v.client.Run(ctx, task.TaskID, call, load)
		res <- result{out, err}
	}()
	select {
	case r := <-res:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
