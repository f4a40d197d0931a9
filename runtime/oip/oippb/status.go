package oippb

import (
	"net/http"

	"google.golang.org/grpc/codes"
)

// statusClientGone is the status a request whose client went away has
// (nginx's 499).
const statusClientGone = 499

// Code is the gRPC code of a status of the protocol's REST API: 400
// InvalidArgument, 401 Unauthenticated, 404 NotFound, 408 and 504
// DeadlineExceeded, 413, 429 and 507 (a model larger than the memory
// budget) ResourceExhausted, 499 (the client went
// away) Canceled, 409 (a conflict with the server's state: a snapshot of
// another model) FailedPrecondition, 501 Unimplemented, 503 Unavailable,
// 500 and any other Internal.
func Code(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusOK:
		return codes.OK
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.FailedPrecondition
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return codes.ResourceExhausted
	case statusClientGone:
		return codes.Canceled
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return codes.Unimplemented
	}
	if httpStatus >= 400 && httpStatus < 500 {
		return codes.InvalidArgument
	}
	return codes.Internal
}

// HTTPStatus is the REST status a gRPC code stands for (Code's inverse,
// where it has one; Canceled is 499, the client went away).
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.FailedPrecondition:
		return http.StatusConflict
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return statusClientGone
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.Unimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}
