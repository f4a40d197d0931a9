package oip

import "context"

// The protocol's two exchanges, whatever carries them. A transport — REST
// with JSON or binary tensors, gRPC, a WebSocket — is an encoding of these:
//
//   - unary: one infer request, one response (Unary): POST .../infer over
//     REST, ModelInfer over gRPC;
//   - a session connection (SessionConn): the client's first message is
//     the infer request that opens a realtime session (a streaming task,
//     with the stream parameters "paced", "max_chunks", "controls",
//     "lockstep"); then it sends ControlsRequest messages — controls, acks
//     — while it receives SessionMessages: the session's SessionInfo, its
//     chunks, the answers to its controls (the controls in effect, or a
//     refusal), and last the end or the error that ended it. A WebSocket
//     (SessionsSubprotocol) and wfgen's ModelStreamInfer RPC carry it.
//
// A client written against these two runs on any transport that
// implements them; the events are those of the sessions extension
// (EventSession, EventChunk, ...).

// Unary is the protocol's unary exchange: one infer request, one response.
type Unary interface {
	// Infer sends req and returns its response. A refusal or a failure of
	// the model is an error (a transport says how it carries the status).
	Infer(ctx context.Context, req *InferenceRequest) (*InferenceResponse, error)
}

// SessionConn is the client's end of a session connection, opened by a
// transport with the session's infer request. Send may run while Receive
// waits (one goroutine sends, another receives), but not while another
// Send runs.
type SessionConn interface {
	// Send sends one controls message: new controls, an ack, or both.
	Send(ctx context.Context, m ControlsRequest) error
	// Receive returns the next message from the server. An error is a
	// connection that broke or carried what a session does not hold; a
	// session the server ended or failed is a message (EventEnd,
	// EventError), after which nothing more comes.
	Receive(ctx context.Context) (SessionMessage, error)
	// Close ends the connection, and with it the session on the server
	// when it is still running.
	Close() error
}

// SessionMessage is one message of a session connection from the server:
// an event (EventSession, EventChunk, EventControls, EventRefused,
// EventSnapshot, EventEnd, EventError) and what it carries.
type SessionMessage struct {
	// Event names the message.
	Event string
	// Session describes the session (EventSession): the first message.
	Session *SessionInfo
	// Chunk holds a chunk (EventChunk): the task's video output and the
	// Chunk* parameters.
	Chunk *InferenceResponse
	// Controls are the controls in effect (EventControls), answering a
	// controls message.
	Controls map[string]float64
	// Snapshot answers a snapshot request (EventSnapshot).
	Snapshot *SnapshotInfo
	// Error is why the session failed (EventError) or why a controls
	// message was refused (EventRefused; the session goes on).
	Error string
	// Status is the HTTP status the failure of an EventError stands for,
	// when the transport carries one (else 0).
	Status int
}
