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
	a, err := s.arrive(false)
	if err != nil {
		refuse(w, r, err)
		return
	}
	defer a.done()
	m := modelOf(r)
	ctx := r.Context()
	var deadline time.Time
	if s.cfg.Timeout > 0 {
		deadline = arrivedAt(r).Add(s.cfg.Timeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	rc := http.NewResponseController(w)
	body, err := s.readBody(w, r, rc, &a.hold)
	if err != nil {
		writeError(w, err)
		return
	}
	req, binary, err := decodeBody(r, body, s.limits(&a.hold))
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := s.resolve(ctx, m, pathVariant(r), req, strings.Contains(r.Header.Get("Accept"), "text/event-stream"), &a.hold)
	if err != nil {
		writeError(w, err)
		return
	}
	if c.stream && binary != nil {
		writeError(w, errBinaryStream)
		return
	}
	if c.stream {
		a.hold.done() // the session holds its inputs; it counts against MaxSessions
		markStream(ctx)
		s.stream(w, r, rc, m, c.v, c.task, c.call, req)
		return
	}
	if !deadline.IsZero() {
		rc.SetWriteDeadline(deadline.Add(writeGrace))
	}
	resp, err := s.answer(ctx, c, binary)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away: nobody to answer
		}
		writeError(w, err)
		return
	}
	writeInfer(w, resp)
}

// inferCall is an infer request resolved against its model, whatever the
// transport it came by (REST, gRPC): the variant and task that run it,
// what it asks for, and its decoded inputs.
type inferCall struct {
	m       *model
	v       *variant
	task    *spec.InferenceTaskProfile
	req     *oip.InferenceRequest
	stream  bool // answered with a realtime session
	batch   bool // a batch request (oip.BatchParameter)
	perItem bool // a batch's failed items are listed, not the batch failed

	call, load map[string]any   // a request's inputs (not a batch)
	items      []map[string]any // a batch's items
	hold       *holding         // the request's bytes in the in-flight budget
	place      place            // its priority level and queue deadline (priority.go)
	version    string           // the revision that ran it (revision.go), once run
}

// resolve resolves a decoded infer request to model m: its variant (pv,
// the one the path names, else the default or the "variant" parameter's),
// its task (the "task" parameter's or the default), the outputs it asks
// for, whether it asks for a stream (accept: it takes one when it does not
// say, as REST's Accept: text/event-stream does) or is a batch, and its
// inputs decoded and checked against the task, their bytes held in hold.
// Every refusal is the REST status's error (400, 404, 429).
func (s *Server) resolve(ctx context.Context, m *model, pv *variant, req *oip.InferenceRequest, accept bool, hold *holding) (*inferCall, error) {
	if err := oip.CheckParameters(req.Parameters); err != nil {
		return nil, err
	}
	arrived := time.Now()
	if ri := requestInfo(ctx); ri != nil {
		arrived = ri.arrived
	}
	def := s.cfg.DefaultPriority
	if p := m.oip.Spec.DefaultPriority; p > 0 {
		def = p // the family's default_priority
	}
	place, err := requestPlace(req.Parameters, def, arrived)
	if err != nil {
		return nil, err
	}
	version := ""
	if pv != nil {
		version = pv.id
	}
	vs, err := m.oip.Variant(version, req.Parameters)
	if err != nil {
		return nil, err
	}
	c := &inferCall{m: m, v: m.variants[vs.VariantID], req: req, hold: hold, place: place}
	if err := s.notLoaded(m, c.v); err != nil {
		return nil, err
	}
	c.task, err = m.oip.Task(req.Parameters)
	if err != nil {
		return nil, err
	}
	setObs(ctx, s.tel.obs(m, c.task.TaskID))
	if err := oip.CheckOutputs(c.task, req.Outputs); err != nil {
		return nil, err
	}
	if c.stream, err = wantsStream(accept, req, c.task); err != nil {
		return nil, err
	}
	if c.batch, _, err = req.Parameters.BoolParam(oip.BatchParameter); err != nil {
		return nil, err
	}
	if c.batch {
		if c.stream {
			return nil, withStatus(http.StatusBadRequest, "parameter %q: a stream is not a batch", oip.BatchParameter)
		}
		if c.perItem, _, err = req.Parameters.BoolParam(oip.ItemErrorsParameter); err != nil {
			return nil, err
		}
		if c.items, _, err = m.oip.BatchArgs(c.task, req.Inputs, s.lim); err != nil {
			return nil, err
		}
		var n int64
		for _, it := range c.items {
			n += tensorBytes(it)
		}
		if err := hold.add(n); err != nil {
			return nil, err
		}
		return c, nil
	}
	if _, ok := req.Parameters[oip.ItemErrorsParameter]; ok {
		return nil, withStatus(http.StatusBadRequest, "parameter %q applies to a batch request (parameter %q: true)", oip.ItemErrorsParameter, oip.BatchParameter)
	}
	if c.call, c.load, err = m.oip.Args(c.task, req.Inputs, s.lim); err != nil {
		return nil, err
	}
	if err := hold.add(tensorBytes(c.call) + tensorBytes(c.load)); err != nil {
		return nil, err
	}
	return c, nil
}

// execute runs a resolved request (neither a stream nor a batch): it is
// admitted (429 beyond MaxQueue), then runs on one of its variant's engine
// slots or through its task's batcher until ctx ends (504: ctx carries the
// request's deadline).
func (s *Server) execute(ctx context.Context, c *inferCall) (map[string]any, error) {
	ctx = withPriority(ctx, c.place.level, c.place.by)
	release, err := s.adm.admit()
	if err != nil {
		return nil, err
	}
	defer release()
	unlease, err := s.lease(ctx, c.v, false)
	if err != nil {
		return nil, err
	}
	defer unlease()
	if b := c.v.batchers[c.task]; b != nil {
		// A batch is stacked padded (to max_batch_size in invariant
		// mode): in the worst case, a request alone, its inputs are
		// copied that many times over.
		if err := c.hold.add(int64(b.max-1) * tensorBytes(c.call)); err != nil {
			return nil, err
		}
	}
	out, version, err := s.run(ctx, c.v, c.task, c.call, c.load)
	c.version = version
	if err != nil && ctx.Err() != nil {
		err = s.deadlinePassed(ctx)
	}
	return out, err
}

// executeBatch runs a resolved batch request: its items run through the
// client's CallBatch on one of the variant's engine slots — the batches
// and padding of the in-process batch executor, so each item's answer is
// the in-process client's — never merged with other requests. With
// perItem, the items that failed are returned in itemErrs and the others
// answered.
func (s *Server) executeBatch(ctx context.Context, c *inferCall) (outs []map[string]any, itemErrs batch.ItemErrors, err error) {
	ctx = withPriority(ctx, c.place.level, c.place.by)
	release, err := s.adm.admit()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	unlease, err := s.lease(ctx, c.v, false)
	if err != nil {
		return nil, nil, err
	}
	defer unlease()
	var opts []batch.Option
	if c.perItem {
		opts = append(opts, batch.WithPerItemErrors())
	}
	out, version, err := onSlot(ctx, s, c.v, true, func(rev *revision) ([]map[string]any, error) {
		return client.CollectBatch(ctx, rev.client, c.task, client.Kwargs(c.task, c.items...), opts...)
	})
	c.version = version
	if out != nil && (err == nil || errors.As(err, &itemErrs)) {
		return out, itemErrs, nil
	}
	if err == nil {
		err = fmt.Errorf("the batch returned no outputs")
	}
	if ctx.Err() != nil {
		err = s.deadlinePassed(ctx)
	}
	return nil, nil, err
}

// deadlinePassed is the error of a request whose context ended before it
// finished (504).
func (s *Server) deadlinePassed(ctx context.Context) error {
	return &statusError{status: http.StatusGatewayTimeout, err: fmt.Errorf("the request's deadline (%v from its arrival) passed before it finished: %w", s.cfg.Timeout, ctx.Err())}
}

// response is the answer to a request: its outputs (those it asked for,
// binary where binary says; a tensor_list as its elements and their count,
// oip.EncodeResponse), the variant and task that ran.
func (c *inferCall) response(out map[string]any, binary func(string) bool) (*oip.InferenceResponse, error) {
	resp := &oip.InferenceResponse{
		ModelName:    c.m.oip.Spec.ModelFamilyID,
		ModelVersion: c.version,
		ID:           c.req.ID,
		Parameters:   oip.Parameters{"task": c.task.TaskID},
	}
	if err := oip.EncodeResponse(resp, c.task, out, c.req.Outputs, binary); err != nil {
		return nil, err
	}
	return resp, nil
}

// batchResponse is the answer to a batch request, listing its failed
// items.
func (c *inferCall) batchResponse(outs []map[string]any, itemErrs batch.ItemErrors, binary func(string) bool) (*oip.InferenceResponse, error) {
	encoded, err := oip.EncodeBatchOutputsBinary(c.task, outs, c.req.Outputs, binary)
	if err != nil {
		return nil, err
	}
	p := oip.Parameters{"task": c.task.TaskID, oip.BatchParameter: true}
	if len(itemErrs) > 0 {
		list := make([]oip.ItemError, len(itemErrs))
		for i, e := range itemErrs {
			list[i] = oip.ItemError{Index: e.Index, Error: e.Err.Error()}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		p[oip.ItemErrorsParameter] = string(b)
	}
	return &oip.InferenceResponse{ModelName: c.m.oip.Spec.ModelFamilyID, ModelVersion: c.version, ID: c.req.ID, Parameters: p, Outputs: encoded}, nil
}

// bodyCost is how many bytes of the in-flight budget one byte of a body
// takes while its request is in flight.
const bodyCost = 2

// bodyStep is how many bytes of a body of unknown length are reserved
// before it is read (more as it grows).
const bodyStep = 64 << 10

// firstRead is the buffer a body of unknown length is first read into.
const firstRead = 512

// readBody reads a request body, reserving its bytes in hold before they
// are read: the declared Content-Length at once (refused 413 beyond
// MaxBodyBytes and 429 beyond the in-flight budget, the body unread), a
// chunked body as its buffer grows. A body that has not arrived within the
// read limit from the request's arrival is 408.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, hold *holding) ([]byte, error) {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		w.Header().Set("Connection", "close")
		w.Header().Set("Accept-Encoding", "identity")
		return nil, withStatus(http.StatusUnsupportedMediaType, "Content-Encoding %q: request bodies are read as sent, without a content encoding (send the body uncompressed)", ce)
	}
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
	defer s.whileReceiving(func() { rc.SetReadDeadline(time.Now()) })()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	readErr := func(err error) error {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.Is(err, os.ErrDeadlineExceeded) && s.draining.Load():
			w.Header().Set("Connection", "close")
			return errDrainingArriving
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
	// A chunked body: read as it arrives, its bytes reserved as it grows.
	buf, err := readReserved(body, reserve, s.cfg.MaxBodyBytes, hold)
	if err != nil {
		if _, budget := err.(*statusError); budget {
			w.Header().Set("Connection", "close")
			return nil, err
		}
		return nil, readErr(err)
	}
	return buf, nil
}

// tensorBytes returns the bytes of the tensors among kwargs, in lists,
// tuples and dicts too.
func tensorBytes(kwargs map[string]any) int64 {
	var n int64
	for _, v := range kwargs {
		n += valueTensorBytes(v)
	}
	return n
}

func valueTensorBytes(v any) int64 {
	var n int64
	switch x := v.(type) {
	case *tensor.Tensor:
		if x != nil {
			n += int64(len(x.Data))
		}
	case []*tensor.Tensor:
		for _, t := range x {
			n += valueTensorBytes(t)
		}
	case []any: // a list (params.List) or a tuple of tensors
		for _, e := range x {
			n += valueTensorBytes(e)
		}
	case map[string]any: // a dict of tensors
		for _, e := range x {
			n += valueTensorBytes(e)
		}
	}
	return n
}

// streamParameters are the request parameters that configure a stream.
var streamParameters = []string{"paced", "max_chunks", "controls", "lockstep", oip.SessionSnapshot, oip.SessionReplay}

// wantsStream reports whether a request asks for a stream: the parameter
// "stream" (a boolean), else accept (REST: an Accept header that takes
// text/event-stream) from a streaming task. stream: true on a task that
// does not stream, and stream parameters on a request that does not ask
// for one, are refused (400), never ignored.
func wantsStream(accept bool, req *oip.InferenceRequest, task *spec.InferenceTaskProfile) (bool, error) {
	want, given, err := req.Parameters.BoolParam("stream")
	if err != nil {
		return false, err
	}
	if !given {
		want = task.Stream && accept
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
// engine slots. It returns the version of the revision that ran it.
func (s *Server) run(ctx context.Context, v *variant, task *spec.InferenceTaskProfile, call, load map[string]any) (map[string]any, string, error) {
	if b := v.batchers[task]; b != nil {
		return b.submit(ctx, call)
	}
	// A session-batched task's call runs through its sessions' queue,
	// whose calls hold a slot each (client.WithSessionGate): holding one
	// here too would wait for itself.
	return onSlot(ctx, s, v, task.SessionBatching == nil, func(rev *revision) (map[string]any, error) {
		return rev.client.Call(ctx, task, client.Kwargs(task, withLoad(call, load)))
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

// onSlot runs fn on one of v's engine slots (when slot: fn's own calls
// hold one otherwise), on the revision v serves
// when the slot is got (pinned until fn returns: revision.go; the one
// ctx's request names, revisionOf, when it names one), and returns
// what it returns and that revision's version, or ctx's error when ctx
// ends first. A call that has entered the engine runs to completion and
// holds its slot and revision until then; the request is answered at its
// deadline all the same, and Shutdown waits for the call.
func onSlot[T any](ctx context.Context, s *Server, v *variant, slot bool, fn func(*revision) (T, error)) (T, string, error) {
	var zero T
	admitted := time.Now()
	release := func() {}
	if slot {
		var err error
		if release, err = v.slots.acquire(ctx); err != nil {
			return zero, "", err
		}
	}
	rev, err := v.pinAt(revisionOf(ctx)) // the newest, or the VARIANT@N the request names
	if err != nil {
		release()
		return zero, "", err
	}
	_, called := slotted(ctx, admitted) // queue wait, engine call (metrics.go)
	type answer struct {
		out T
		err error
	}
	res := make(chan answer, 1)
	s.inflight.enter(true)
	v.callers.run(func() {
		defer s.inflight.leave()
		defer release()
		defer rev.leave()
		out, err := fn(rev)
		called(err)
		res <- answer{out, err}
	})
	select {
	case a := <-res:
		return a.out, rev.version, a.err
	case <-ctx.Done():
		return zero, "", ctx.Err()
	}
}
