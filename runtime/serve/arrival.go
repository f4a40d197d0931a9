package serve

// The arrival path: what every transport does with a request before it
// reads, decodes or runs anything, so that each transport is an adapter
// that reads and decodes its own format around it (DESIGN.md, "One
// arrival path for every transport"):
//
//	transport   authentication, drain  payload read, reserved   decoded, measured first
//	REST JSON   auth, drainGuard       readBody                 oip.DecodeRequest
//	REST binary auth, drainGuard       readBody                 oip.DecodeBinaryRequest
//	gRPC        grpcTap                receive                  oippb.Unmarshal, oippb.Request
//	WebSocket   auth, drainGuard       readWS                   oip.DecodeRequest
//	SSE         (REST JSON)
//
// then, the same for all: arrive (counted for the drain and the batchers),
// the deadline from arrival, lookup of the model, resolve (variant, task,
// inputs checked against the task, their bytes held), and answer (a
// request) or openSession (a session). Every byte a request holds is in
// its arrival's hold from before it is read until it is answered:
// readBody and readWS reserve a body or message as it arrives, receive the
// largest gRPC message while it arrives; decoders reserve what decoding
// takes before they decode (oip.Limits.Reserve); resolve the decoded
// tensors; answer the padding of a batch.

import (
	"context"
	"errors"
	"io"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// arrival is one request on the arrival path, from before its payload is
// read until it is answered or its session opened.
type arrival struct {
	s       *Server
	session bool    // a session connection: it joins no batch
	hold    holding // the request's bytes in the in-flight budget
}

// arrive starts a request's arrival: refused (503) once the server
// drains; counted for the drain until done, and, unless it is a session
// connection (which holds no batch back), among the requests the batchers
// wait for.
func (s *Server) arrive(session bool) (*arrival, error) {
	if !s.inflight.enter(false) {
		return nil, errDraining
	}
	if !session {
		s.active.Add(1)
	}
	return &arrival{s: s, session: session, hold: holding{a: &s.adm}}, nil
}

// done ends the arrival: what the request holds is given back.
func (a *arrival) done() {
	a.hold.done()
	if !a.session {
		a.s.active.Add(-1)
	}
	a.s.inflight.leave()
}

// limits are the server's limits of a request, with what decoding it
// takes counted in hold before it is decoded.
func (s *Server) limits(hold *holding) oip.Limits {
	lim := s.lim
	lim.Reserve = hold.add
	return lim
}

// answer runs a resolved request that is not a session — one request, or
// a batch of items — and returns its response, its outputs binary where
// binary says.
func (s *Server) answer(ctx context.Context, c *inferCall, binary func(string) bool) (*oip.InferenceResponse, error) {
	if c.batch {
		outs, itemErrs, err := s.executeBatch(ctx, c)
		if err != nil {
			return nil, err
		}
		return c.batchResponse(outs, itemErrs, binary)
	}
	out, err := s.execute(ctx, c)
	if err != nil {
		return nil, err
	}
	return c.response(out, binary)
}

// readReserved reads r to its end, a body or message whose length is not
// declared, into a buffer that starts small (firstRead bytes) and doubles
// as it fills. Its first reserved bytes are already held; each growth past
// them is reserved in hold (bodyCost bytes a byte: the body, and its data
// as decoding holds it) before it is made: a refusal is a *statusError
// (429). Reading stops one byte past limit, which the reader
// (http.MaxBytesReader, a WebSocket's read limit) says is too much.
//
// The buffer starts small because most bodies of unknown length are small
// — a session's controls, a few dozen bytes a chunk on every WebSocket —
// and a buffer of the whole reservation for each made the collector clear
// and sweep 64 KiB a message.
func readReserved(r io.Reader, reserved, limit int64, hold *holding) ([]byte, error) {
	buf := make([]byte, 0, min(reserved, firstRead))
	for {
		if len(buf) == cap(buf) {
			grow := min(int64(cap(buf)), limit+1-int64(cap(buf)))
			if grow <= 0 {
				grow = 1 // one byte past the limit makes the reader say so
			}
			if more := int64(cap(buf)) + grow - reserved; more > 0 {
				if err := hold.add(bodyCost * more); err != nil {
					return nil, err
				}
				reserved += more
			}
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
