package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// writeGrace is how long after a request's deadline its answer may take to
// reach a slow client before the connection is closed.
const writeGrace = 10 * time.Second

// infer answers POST /v2/models/{model}[/versions/{version}]/infer. From
// the request's arrival: its body must arrive by the deadline (408 if not),
// with its bytes counted against the in-flight budget as they are read
// (429 when the budget is spent); then it is decoded, admitted (429 beyond
// MaxQueue), run on one of its variant's engine slots or through its task's
// batcher, and answered by the deadline (504 if not).
func (s *Server) infer(w http.ResponseWriter, r *http.Request) {
	if !s.inflight.enter(false) {
		refuse(w, r, errDraining)
		return
	}
	defer s.inflight.leave()
	s.active.Add(1)
	defer s.active.Add(-1)
	m := modelOf(r)
	ctx := r.Context()
	var deadline time.Time
	if s.cfg.Timeout > 0 {
		deadline = arrival(r).Add(s.cfg.Timeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	rc := http.NewResponseController(w)
	hold := &holding{a: &s.adm}
	defer hold.done()
	body, err := s.readBody(w, r, rc, hold)
	if err != nil {
		writeError(w, err)
		return
	}
	req, binary, err := decodeBody(r, body, s.lim)
	if err != nil {
		writeError(w, err)
		return
	}
	version := ""
	if pv := pathVariant(r); pv != nil {
		version = pv.id
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
	setObs(ctx, s.tel.obs(m, task.TaskID))
	if err := oip.CheckOutputs(task, req.Outputs); err != nil {
		writeError(w, err)
		return
	}
	streaming, err := wantsStream(r, req, task)
	if err != nil {
		writeError(w, err)
		return
	}
	batched, _, err := req.Parameters.BoolParam(oip.BatchParameter)
	if err != nil {
		writeError(w, err)
		return
	}
	if batched {
		if streaming {
			writeError(w, withStatus(http.StatusBadRequest, "parameter %q: a stream is not a batch", oip.BatchParameter))
			return
		}
		s.inferBatch(w, r, ctx, rc, deadline, hold, m, v, task, req, binary)
		return
	}
	if _, ok := req.Parameters[oip.ItemErrorsParameter]; ok {
		writeError(w, withStatus(http.StatusBadRequest, "parameter %q applies to a batch request (parameter %q: true)", oip.ItemErrorsParameter, oip.BatchParameter))
		return
	}
	call, load, err := m.oip.Args(task, req.Inputs, s.lim)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := hold.add(tensorBytes(call) + tensorBytes(load)); err != nil {
		writeError(w, err)
		return
	}
	if streaming && binary != nil {
		writeError(w, errBinaryStream)
		return
	}
	if streaming {
		hold.done() // the session holds its inputs; it counts against MaxSessions
		markStream(ctx)
		s.stream(w, r, rc, m, v, task, call, req)
		return
	}
	release, err := s.adm.admit()
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	if !deadline.IsZero() {
		rc.SetWriteDeadline(deadline.Add(writeGrace))
	}
	out, err := s.run(ctx, v, task, call, load)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			return // the client went away: nobody to answer
		case ctx.Err() != nil:
			err = &statusError{status: http.StatusGatewayTimeout, err: fmt.Errorf("the request's deadline (%v from its arrival) passed before it finished: %w", s.cfg.Timeout, ctx.Err())}
		}
		writeError(w, err)
		return
	}
	outs, err := oip.EncodeOutputsBinary(task, out, req.Outputs, binary)
	if err != nil {
		writeError(w, err)
		return
	}
	writeInfer(w, &oip.InferenceResponse{
		ModelName:    m.oip.Spec.ModelFamilyID,
		ModelVersion: v.id,
		ID:           req.ID,
		Parameters:   oip.Parameters{"task": task.TaskID},
		Outputs:      outs,
	})
}

// inferBatch answers a batch request (oip.BatchParameter): its items run
// through the client's CallBatch on one of the variant's engine slots — the
// batches and padding of the in-process batch executor, so each item's
// answer is the in-process client's — never merged with other requests.
func (s *Server) inferBatch(w http.ResponseWriter, r *http.Request, ctx context.Context, rc *http.ResponseController, deadline time.Time, hold *holding, m *model, v *variant, task *spec.InferenceTaskProfile, req *oip.InferenceRequest, binary func(string) bool) {
	perItem, _, err := req.Parameters.BoolParam(oip.ItemErrorsParameter)
	if err != nil {
		writeError(w, err)
		return
	}
	items, _, err := m.oip.BatchArgs(task, req.Inputs, s.lim)
	if err != nil {
		writeError(w, err)
		return
	}
	var n int64
	for _, it := range items {
		n += tensorBytes(it)
	}
	if err := hold.add(n); err != nil {
		writeError(w, err)
		return
	}
	release, err := s.adm.admit()
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	if !deadline.IsZero() {
		rc.SetWriteDeadline(deadline.Add(writeGrace))
	}
	var opts []batch.Option
	if perItem {
		opts = append(opts, batch.WithPerItemErrors())
	}
	out, err := onSlot(ctx, s, v, func() ([]map[string]any, error) {
		return client.CollectBatch(ctx, v.client, task, client.Kwargs(task, items...), opts...)
	})
	var itemErrs batch.ItemErrors
	if out != nil && (err == nil || errors.As(err, &itemErrs)) {
		s.answerBatch(w, m, v, task, req, out, itemErrs, binary)
		return
	}
	switch {
	case r.Context().Err() != nil:
		return // the client went away: nobody to answer
	case ctx.Err() != nil:
		err = &statusError{status: http.StatusGatewayTimeout, err: fmt.Errorf("the request's deadline (%v from its arrival) passed before it finished: %w", s.cfg.Timeout, ctx.Err())}
	}
	writeError(w, err)
}

// answerBatch writes a batch's outputs, listing its failed items.
func (s *Server) answerBatch(w http.ResponseWriter, m *model, v *variant, task *spec.InferenceTaskProfile, req *oip.InferenceRequest, outs []map[string]any, itemErrs batch.ItemErrors, binary func(string) bool) {
	if outs == nil {
		writeError(w, fmt.Errorf("the batch returned no outputs"))
		return
	}
	encoded, err := oip.EncodeBatchOutputsBinary(task, outs, req.Outputs, binary)
	if err != nil {
		writeError(w, err)
		return
	}
	p := oip.Parameters{"task": task.TaskID, oip.BatchParameter: true}
	if len(itemErrs) > 0 {
		list := make([]oip.ItemError, len(itemErrs))
		for i, e := range itemErrs {
			list[i] = oip.ItemError{Index: e.Index, Error: e.Err.Error()}
		}
		b, err := json.Marshal(list)
		if err != nil {
			writeError(w, err)
			return
		}
		p[oip.ItemErrorsParameter] = string(b)
	}
	writeInfer(w, &oip.InferenceResponse{ModelName: m.oip.Spec.ModelFamilyID, ModelVersion: v.id, ID: req.ID, Parameters: p, Outputs: encoded})
}

// bodyCost is how many bytes of the in-flight budget one byte of a body
// takes while its request is in flight.
const bodyCost = 2

// bodyStep is how many bytes of a body of unknown length are reserved at a
// time while it is read.
const bodyStep = 64 << 10

// readBody reads a request body, reserving its bytes in hold before they
// are read: the declared Content-Length at once (refused 413 beyond
// MaxBodyBytes and 429 beyond the in-flight budget, the body unread), a
// chunked body as its buffer grows. A body that has not arrived within the
// read limit from the request's arrival is 408.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, hold *holding) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, withStatus(http.StatusRequestEntityTooLarge, "request body larger than the limit of %d bytes (Content-Length %d)", s.cfg.MaxBodyBytes, r.ContentLength)
	}
	reserve := r.ContentLength
	if reserve < 0 {
		reserve = min(bodyStep, s.cfg.MaxBodyBytes)
	}
	// Twice the body: as read, and its tensors' data as decoding keeps it
	// (oip.Tensor.Data) until they are parsed.
	if err := hold.add(bodyCost * reserve); err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	// observe set the read deadline (the read limit from arrival). The
	// rest of the request (a stream, the wait for the engine) is
	// bounded by its context; the connection's background read must not
	// time out under it.
	defer rc.SetReadDeadline(time.Time{})
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	readErr := func(err error) error {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.Is(err, os.ErrDeadlineExceeded):
			return withStatus(http.StatusRequestTimeout, "the request body did not arrive within the request's deadline (%v from its arrival)", s.readLimit())
		}
		w.Header().Set("Connection", "close")
		return withStatus(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if r.ContentLength >= 0 {
		// net/http ends the body after Content-Length bytes.
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, buf); err != nil {
			return nil, readErr(err)
		}
		return buf, nil
	}
	// A chunked body: the buffer doubles as it fills, each growth reserved
	// before it is made.
	buf := make([]byte, 0, reserve)
	for {
		if len(buf) == cap(buf) {
			grow := min(int64(cap(buf)), s.cfg.MaxBodyBytes+1-int64(cap(buf)))
			if grow <= 0 {
				grow = 1 // one byte past the limit makes the reader say so
			}
			if err := hold.add(bodyCost * grow); err != nil {
				w.Header().Set("Connection", "close")
				return nil, err
			}
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, readErr(err)
		}
	}
}

// tensorBytes returns the bytes of the tensors among kwargs.
func tensorBytes(kwargs map[string]any) int64 {
	var n int64
	for _, v := range kwargs {
		switch x := v.(type) {
		case *tensor.Tensor:
			n += int64(len(x.Data))
		case []*tensor.Tensor:
			for _, t := range x {
				n += int64(len(t.Data))
			}
		}
	}
	return n
}

// streamParameters are the request parameters that configure a stream.
var streamParameters = []string{"paced", "max_chunks", "controls", "lockstep"}

// wantsStream reports whether a request asks for a stream: the parameter
// "stream" (a boolean), else an Accept header that takes
// text/event-stream from a streaming task. stream: true on a task that
// does not stream, and stream parameters on a request that does not ask
// for one, are refused (400), never ignored.
func wantsStream(r *http.Request, req *oip.InferenceRequest, task *spec.InferenceTaskProfile) (bool, error) {
	want, given, err := req.Parameters.BoolParam("stream")
	if err != nil {
		return false, err
	}
	if !given {
		want = task.Stream && strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	}
	if want && !task.Stream {
		return false, withStatus(http.StatusBadRequest, "parameter \"stream\" is true, but task %q is not a streaming task", task.TaskID)
	}
	if !want {
		for _, k := range streamParameters {
			if _, ok := req.Parameters[k]; ok {
				return false, withStatus(http.StatusBadRequest, "parameter %q configures a stream, and this request asks for none (send \"stream\": true to a streaming task)", k)
			}
		}
	}
	return want, nil
}

// run runs one request, its decoded inputs in call and load: through the
// task's batcher when it has one, else directly on one of its variant's
// engine slots.
func (s *Server) run(ctx context.Context, v *variant, task *spec.InferenceTaskProfile, call, load map[string]any) (map[string]any, error) {
	if b := v.batchers[task]; b != nil {
		return b.submit(ctx, call)
	}
	return onSlot(ctx, s, v, func() (map[string]any, error) {
		return v.client.Call(ctx, task, client.Kwargs(task, withLoad(call, load)))
	})
}

// withLoad returns a request's call kwargs with its load kwargs, one map
// keyed by field id (call itself when there are none).
func withLoad(call, load map[string]any) map[string]any {
	if len(load) == 0 {
		return call
	}
	m := maps.Clone(call)
	maps.Copy(m, load)
	return m
}

// onSlot runs fn on one of v's engine slots and returns what it returns,
// or ctx's error when ctx ends first. A call that has entered the engine
// runs to completion and holds its slot until then; the request is
// answered at its deadline all the same, and Shutdown waits for the call.
func onSlot[T any](ctx context.Context, s *Server, v *variant, fn func() (T, error)) (T, error) {
	var zero T
	admitted := time.Now()
	release, err := v.slots.acquire(ctx)
	if err != nil {
		return zero, err
	}
	_, called := slotted(ctx, admitted) // queue wait, engine call (metrics.go)
	type answer struct {
		out T
		err error
	}
	res := make(chan answer, 1)
	s.inflight.enter(true)
	go func() {
		defer s.inflight.leave()
		defer release()
		out, err := fn()
		called(err)
		res <- answer{out, err}
	}()
	select {
	case a := <-res:
		return a.out, a.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
