package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// statusError is an error with the HTTP status it is answered with.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func withStatus(status int, format string, args ...any) error {
	return &statusError{status: status, err: fmt.Errorf(format, args...)}
}

// Errors every handler may answer with.
var (
	// errDraining answers a request that arrives while the server shuts down.
	errDraining = &statusError{status: http.StatusServiceUnavailable, err: errors.New("the server is shutting down")}
	// errQueueFull answers a request that finds MaxQueue requests admitted.
	errQueueFull = &statusError{status: http.StatusTooManyRequests, err: errors.New("too many requests queued; retry later")}
)

// status returns the HTTP status an error is answered with. Whatever a
// request's content causes is a 4xx; only the server's own failures are
// 500.
func status(err error) int {
	var se *statusError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &se):
		return se.status
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, oip.ErrBadRequest), errors.Is(err, stream.ErrBadOption):
		return http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, spec.ErrUnknownID):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"cannot encode the response"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

// marshal encodes a response body: an inference response through its
// AppendJSON, anything else through json.Marshal.
func marshal(v any) ([]byte, error) {
	if r, ok := v.(*oip.InferenceResponse); ok {
		return r.AppendJSON(nil)
	}
	return json.Marshal(v)
}

// errorAnswer returns the status and text an error is answered with, and
// sets the headers that go with it (Retry-After for 429 and 503, the
// rate-limited key's wait; Connection: close for 413 and 408): every error
// body's writer (writeError, writeOpenAIError) answers through it.
func errorAnswer(w http.ResponseWriter, err error) (int, string) {
	code := status(err)
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("request body larger than the limit of %d bytes", mbe.Limit)
	}
	var rl *rateLimited
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(rl.retryAfter()))
	case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case code == http.StatusRequestEntityTooLarge, code == http.StatusRequestTimeout:
		w.Header().Set("Connection", "close")
	}
	return code, msg
}

// writeError writes the protocol's error body, and gives the access log
// the error's text.
func writeError(w http.ResponseWriter, err error) {
	code, msg := errorAnswer(w, err)
	if rec, ok := w.(*recorder); ok {
		rec.err = msg
	}
	writeJSON(w, code, oip.ErrorResponse{Error: msg})
}

// refuse answers a request with err before its body is read: the
// connection closes after the answer, so that net/http does not first read
// (or wait for) the rest of a body nobody will use.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	writeError(w, err)
}
