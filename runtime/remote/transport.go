package remote

import (
	"context"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// transport carries a Client's calls to the server: REST (rest.go: JSON
// or binary tensors, sessions on a WebSocket) or gRPC (grpc.go: ModelInfer,
// sessions on ModelStreamInfer). It is the client's side of the protocol's
// two exchanges — oip.Unary and a session connection, which session.go
// runs — and of the two reads; the credentials, the trace context, spans
// and retries are its own, as its wire carries them. Its errors are the
// server's (*StatusError) or the connection's, without the family's name,
// which the Client adds. A new transport is one more implementation.
type transport interface {
	oip.Unary

	// request builds the infer request of a task as Infer sends it.
	request(task *spec.InferenceTaskProfile, call, load map[string]any) (*oip.InferenceRequest, error)
	// sessionRequest builds the infer request that opens a session of a
	// streaming task, as openSession sends it (the session adds its
	// stream parameters).
	sessionRequest(task *spec.InferenceTaskProfile, call map[string]any) (*oip.InferenceRequest, error)
	// openSession opens a session connection and sends start, the request
	// that opens the session, as its first message. keep, when not nil,
	// gives the connection back to the transport for the client's next
	// session once this one ended by itself (its oip.EventEnd received);
	// when nil, the connection ends with the session (conn.Close).
	openSession(ctx context.Context, start *oip.InferenceRequest) (conn oip.SessionConn, keep func(), err error)
	// metadata returns the server's metadata of the model.
	metadata(ctx context.Context) (*oip.ModelMetadata, error)
	// ready returns nil when the server reports the model ready.
	ready(ctx context.Context) error
	// close releases the transport's connections.
	close() error
}
