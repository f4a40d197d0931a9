package serve

// Snapshots of realtime sessions over the wire (issue 45 §2): a client
// asks for a snapshot of its open session (oip.ControlsRequest.Snapshot)
// and gets a token sealed with Config.SessionKey; the infer request that
// opens a session restores one (parameter oip.SessionSnapshot) and/or
// replays a controls log (oip.SessionReplay). docs/serving.md,
// "Snapshots over the wire".

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// LoadSessionKey reads a session key file (wfserve -session-key-file):
// the key is the file's bytes with surrounding white space trimmed, at
// least stream.MinKeyBytes of them — any bytes, such as 32 random bytes
// as base64 text (head -c 32 /dev/urandom | base64). Replicas that restore
// each other's sessions read the same file.
func LoadSessionKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	key := bytes.TrimSpace(b)
	if err := checkSessionKey(key); err != nil {
		return nil, fmt.Errorf("session key file %s: %w", path, err)
	}
	return key, nil
}

// checkSessionKey refuses a key that is set but too short.
func checkSessionKey(key []byte) error {
	if key != nil && len(key) < stream.MinKeyBytes {
		return fmt.Errorf("serve: the session key has %d bytes, want at least %d", len(key), stream.MinKeyBytes)
	}
	return nil
}

// errNoSessionKey refuses a snapshot or restore on a server without a key.
var errNoSessionKey = withStatus(http.StatusNotImplemented, "this server takes no snapshots: it has no session key (start wfserve with -session-key-file)")

// restoreOptions reads the snapshot and replay parameters of the request
// that opens a session: the options that restore the token (opened with
// the server's key) and replay the log, and the index of the session's
// first chunk.
func (s *Server) restoreOptions(p oip.Parameters) (opts []stream.Option, first int, err error) {
	text, ok, err := p.StringParam(oip.SessionSnapshot)
	if err != nil {
		return nil, 0, err
	}
	if ok {
		if s.cfg.SessionKey == nil {
			return nil, 0, errNoSessionKey
		}
		snap, err := openToken(text, s.cfg.SessionKey)
		if err != nil {
			return nil, 0, err
		}
		opts, first = append(opts, stream.FromSnapshot(snap)), snap.Next
	}
	text, ok, err = p.StringParam(oip.SessionReplay)
	if err != nil {
		return nil, 0, err
	}
	if ok {
		log, err := parseReplay(text)
		if err != nil {
			return nil, 0, err
		}
		opts = append(opts, stream.WithReplay(log))
	}
	return opts, first, nil
}

// maxTokenText bounds the base64 text of a token.
var maxTokenText = base64.StdEncoding.EncodedLen(stream.MaxTokenBytes)

// openToken decodes a token parameter (base64 text) and opens it with
// key: a malformed, truncated, tampered or foreign-key token is a 400, one
// over the size bound a 413.
func openToken(text string, key []byte) (stream.Snapshot, error) {
	if len(text) > maxTokenText {
		return stream.Snapshot{}, withStatus(http.StatusRequestEntityTooLarge, "parameter %q: a token of %d characters, more than a snapshot of %d bytes takes", oip.SessionSnapshot, len(text), stream.MaxSnapshotBytes)
	}
	tok, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return stream.Snapshot{}, withStatus(http.StatusBadRequest, "parameter %q is not base64 text: %v", oip.SessionSnapshot, err)
	}
	snap, err := stream.Open(tok, key)
	if err != nil {
		return stream.Snapshot{}, &statusError{status: snapshotStatus(err), err: fmt.Errorf("parameter %q: %w", oip.SessionSnapshot, err)}
	}
	return snap, nil
}

// parseReplay decodes a replay parameter: a stream.ControlsLog as JSON
// text, well formed (ControlsLog.Check) and of at most
// stream.MaxLogChanges changes.
func parseReplay(text string) (stream.ControlsLog, error) {
	var log stream.ControlsLog
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&log); err != nil || dec.More() {
		if err == nil {
			err = errors.New("text after the log")
		}
		return stream.ControlsLog{}, withStatus(http.StatusBadRequest, "parameter %q must be a controls log as JSON text ({\"start\": N, \"end\": N, \"changes\": [{\"from\": N, \"controls\": {...}}, ...]}): %v", oip.SessionReplay, err)
	}
	if len(log.Changes) > stream.MaxLogChanges {
		return stream.ControlsLog{}, withStatus(http.StatusBadRequest, "parameter %q: %d changes, more than the %d a log keeps", oip.SessionReplay, len(log.Changes), stream.MaxLogChanges)
	}
	if err := log.Check(); err != nil {
		return stream.ControlsLog{}, withStatus(http.StatusBadRequest, "parameter %q: %v", oip.SessionReplay, err)
	}
	return log, nil
}

// snapshotStatus is the HTTP status of a snapshot's, token's or replay's
// error: 409 for a snapshot of another model or version (variant,
// checkpoint, task, params) or of a finished session — a well-formed
// request the server's state refuses — 413 for one too large, 400 for
// anything else wrong with the token or log, and the error's own status
// otherwise.
func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, stream.ErrForeignModel), errors.Is(err, stream.ErrFinished):
		return http.StatusConflict
	case errors.Is(err, stream.ErrSnapshotTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, stream.ErrTokenFormat), errors.Is(err, stream.ErrTokenTruncated),
		errors.Is(err, stream.ErrTokenTampered), errors.Is(err, stream.ErrTokenForeignKey),
		errors.Is(err, stream.ErrSnapshotFormat), errors.Is(err, stream.ErrSnapshotValue),
		errors.Is(err, stream.ErrLogOrder), errors.Is(err, stream.ErrLogTruncated):
		return http.StatusBadRequest
	}
	return status(err)
}

// restoreError gives an error of opening a session its snapshot status.
func restoreError(err error) error {
	var se *statusError
	if errors.As(err, &se) {
		return err
	}
	if code := snapshotStatus(err); code != status(err) {
		return &statusError{status: code, err: err}
	}
	return err
}

// snapshot seals a snapshot of the session at its chunk boundary with
// key.
func (se *session) snapshot(key []byte) (*oip.SnapshotInfo, error) {
	if key == nil {
		return nil, errNoSessionKey
	}
	snap, err := se.s.Snapshot()
	if err != nil {
		return nil, &statusError{status: snapshotStatus(err), err: err}
	}
	tok, err := stream.Seal(snap, key)
	if err != nil {
		// A state too large to carry, or not made of engine values.
		return nil, &statusError{status: http.StatusConflict, err: fmt.Errorf("snapshot: %w", err)}
	}
	return &oip.SnapshotInfo{Token: tok, Next: int64(snap.Next)}, nil
}
