package oip

import "encoding/json"

// wfserve's realtime sessions extension: an infer request to a streaming
// task that asks for its stream (Accept: text/event-stream, or the
// parameter "stream": true) is answered with Server-Sent Events, in order:
// one EventSession, one EventChunk per chunk, then EventEnd when the
// session ended by itself (its max_chunks) or EventError when it failed or
// the server shut down. Controls are sent to the running session with POST
// SessionInfo.ControlsURL and a ControlsRequest body. The stream's request
// parameters are "paced" (default true), "max_chunks" (default 0: until the
// client goes away) and "controls" (the initial controls).
//
// The same session runs on one WebSocket (SessionsSubprotocol) at
// GET /v2/models/{name}[/versions/{version}]/stream: the client's first
// message is the infer request (JSON text, without "stream"); then the
// server sends each event as a Message (text) — a chunk's Message carries
// the InferenceResponse with its video as binary data (the binary tensor
// extension's "binary_data_size" parameter) and is followed by one binary
// message holding that data — while the client sends ControlsRequest
// messages, each answered by EventControls or EventRefused (a message with
// only an ack is answered only when refused). A session that
// fails, or a request refused before it opens, ends with EventError and a
// close code of CloseCodeBase plus the HTTP status it would have had.
const (
	// EventSession carries SessionInfo.
	EventSession = "session"
	// EventChunk carries an InferenceResponse with the chunk's frames as
	// the task's video output and the Chunk* parameters.
	EventChunk = "chunk"
	// EventEnd says the session ended by itself; its data is {}.
	EventEnd = "end"
	// EventError carries an ErrorResponse; the stream ends.
	EventError = "error"
	// EventControls answers a ControlsRequest message on a WebSocket
	// session with the controls in effect (a ControlsRequest).
	EventControls = "controls"
	// EventRefused answers a ControlsRequest message the session refused
	// with an ErrorResponse; the controls and the session go on unchanged.
	EventRefused = "refused"
	// EventSnapshot answers a ControlsRequest message that asks for a
	// snapshot (Snapshot: true) with a SnapshotInfo.
	EventSnapshot = "snapshot"
)

// Parameters of the infer request that opens a session, for snapshots
// (docs/serving.md, "Snapshots over the wire").
const (
	// SessionSnapshot is a sealed snapshot token (stream.Seal), base64
	// (standard, padded) text: the session restores it and continues it
	// from its next chunk. The request's inputs must be the snapshot's
	// params, its task the snapshot's.
	SessionSnapshot = "snapshot"
	// SessionReplay is a controls log (stream.ControlsLog) as JSON text:
	// the session takes each chunk's controls from it and ends after its
	// last chunk.
	SessionReplay = "replay"
)

// SnapshotInfo is the answer to a snapshot request: the sealed token of
// the session at its chunk boundary and the index of the next chunk it
// holds.
type SnapshotInfo struct {
	// Token is the sealed snapshot (base64 in JSON).
	Token []byte `json:"token"`
	// Next is the index of the snapshot's next chunk.
	Next int64 `json:"next"`
}

// SessionsSubprotocol is the WebSocket subprotocol of a session: a client
// offers it and the server selects it.
const SessionsSubprotocol = "wfgen.session.v1"

// KeepAliveSessionsSubprotocol is SessionsSubprotocol with the connection
// kept for more sessions: after a session's EventEnd the server leaves the
// connection open and takes the next message as the infer request of the
// next session, as the first one was; a ControlsRequest that comes then
// (late, for the session that ended) opens nothing: an ack is dropped,
// controls are answered with EventRefused. A connection that sends none within
// the server's idle timeout, or that waits for one when the server shuts
// down, is closed as an idle HTTP keep-alive connection is: with no event
// and no close frame (a client that was not reading would hold the close
// handshake); a client whose request meets that close has opened no
// session and sends it again on a new connection. A session that fails,
// is refused or that the client leaves closes the connection as in
// SessionsSubprotocol. A client that offers both subprotocols gets this
// one from a server that knows it.
const KeepAliveSessionsSubprotocol = "wfgen.session.v2"

// BearerSubprotocol prefixes a second subprotocol a browser offers to
// carry the bearer token, which its WebSocket API cannot send as a header:
// BearerSubprotocol + base64url(token), without padding (Kubernetes' API
// server does the same). The server never selects it.
const BearerSubprotocol = "base64url.bearer.wfgen."

// CloseCodeBase plus an HTTP status is the close code of a WebSocket
// session refused or failed with that status (4400 a bad request, 4429
// too many sessions, 4503 the server shutting down).
const CloseCodeBase = 4000

// Message is one text message of a WebSocket session from the server: an
// event's name and its data, as the Server-Sent Event would carry them.
type Message struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// SessionsExtension is the extension name GET /v2 lists for sessions.
const SessionsExtension = "sessions"

// SnapshotsExtension is the extension name GET /v2 lists when the server
// takes and restores snapshots of sessions (it has a session key).
const SnapshotsExtension = "session_snapshots"

// SessionInfo is the data of the session event.
type SessionInfo struct {
	// ID names the session; it is unguessable and only the stream's
	// client learns it.
	ID string `json:"id"`
	// ControlsURL is the path to POST a ControlsRequest to.
	ControlsURL string `json:"controls_url"`
	// Realtime is the realtime spec in effect for the first chunk.
	Realtime map[string]any `json:"realtime"`
}

// ControlsRequest is the body of POST /v2/models/{name}/sessions/{id},
// and of its answer: the controls, by name, that apply from the next chunk
// the session generates.
type ControlsRequest struct {
	// Controls replace the session's controls (absent: unchanged).
	Controls map[string]float64 `json:"controls"`
	// Ack, in a lockstep session (request parameter "lockstep": true), is
	// the index of the last chunk the client has taken: the server
	// generates chunk Ack+1 only once it has it, with the controls in
	// effect then — so controls sent before the ack apply to that chunk,
	// as they do in-process between two iterations of a session.
	Ack *int64 `json:"ack,omitempty"`
	// Snapshot asks for a snapshot of the session at its chunk boundary
	// (after the last chunk it generated): answered by EventSnapshot on a
	// session connection, by a "snapshot" (SnapshotInfo) beside the
	// controls in the answer to the controls endpoint. The server needs a
	// session key (wfserve -session-key-file).
	Snapshot bool `json:"snapshot,omitempty"`
}

// SessionsInfo is the answer of GET /v2/models/{name}/sessions: how many
// realtime sessions of the model the server has open now, and what a
// session of it can do there. The playground shows it ("players on the
// server"). Its size does not depend on the sessions: it lists none.
type SessionsInfo struct {
	// Open is the realtime sessions of the model (every variant, every
	// transport) open now on this server.
	Open int64 `json:"open"`
	// Limit is the realtime sessions the server opens at once, over every
	// model (wfserve -max-sessions).
	Limit int `json:"limit"`
	// Snapshots says whether the server seals snapshots and restores
	// them (it has a session key: wfserve -session-key-file); without
	// one, snapshot and restore requests are refused with 501.
	Snapshots bool `json:"snapshots"`
}

// ControlsAnswer is the answer of POST /v2/models/{name}/sessions/{id}:
// the controls in effect, and the snapshot asked for.
type ControlsAnswer struct {
	// Controls are the controls in effect.
	Controls map[string]float64 `json:"controls"`
	// Snapshot is the snapshot the request asked for (absent when it
	// did not).
	Snapshot *SnapshotInfo `json:"snapshot,omitempty"`
}

// Parameters of a chunk event (InferenceResponse.Parameters).
const (
	// ChunkIndex is the chunk's position in the session, from 0.
	ChunkIndex = "index"
	// ChunkFirstFrame is the index of the chunk's first frame.
	ChunkFirstFrame = "first_frame"
	// ChunkLatencyMS is how long the chunk took to generate, in ms.
	ChunkLatencyMS = "latency_ms"
	// ChunkRealtime is the realtime spec in effect for the next chunk, as
	// JSON text (parameters are scalars).
	ChunkRealtime = "realtime"
)
