package remote

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// CallStream starts a realtime session of a streaming task (a task of
// Spec) with the one item of in on the server and returns it as a local
// *stream.Session, as client.Client.CallStream does: its
// chunks are the server's, in order, checked like local ones. The session's
// options apply where the work is: pacing and the chunk limit are sent to
// the server (which releases chunks at playback time; the local session
// does not wait again), and SetControls sends the controls to the running
// server session before they apply locally (an error from the server
// leaves them unchanged).
//
// The server session opens when the first chunk is asked for and ends when
// the local one ends: ctx is done, a step's context is cancelled (a
// stopped Chunks loop whose context is cancelled), the chunk limit is
// reached, or an error. Cancel ctx to release a session that is left
// unfinished.
//
// Snapshots are the server's (docs/serving.md, "Snapshots over the
// wire"): the session's Snapshot asks the server for one at its chunk
// boundary, sealed with the server's key (stream.Snapshot.Token; the
// other fields are read from it with stream.Peek). stream.FromSnapshot
// among opts restores such a snapshot on the server — any server with the
// same session key — and stream.WithReplay replays a controls log there;
// the chunks equal the in-process session's bit for bit.
func (c *Client) CallStream(ctx context.Context, task *spec.InferenceTaskProfile, in client.Inputs, opts ...stream.Option) (*stream.Session, error) {
	if err := client.OneItem(in); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	if !task.Stream {
		return nil, fmt.Errorf("%s: task is not a streaming task (stream: true)", c.where(task.TaskID))
	}
	var video string
	for _, a := range task.Outputs {
		if a.Kind.Picture() == spec.PictureVideo {
			video = a.ArtifactID
			break
		}
	}
	if video == "" {
		return nil, fmt.Errorf("%s: a streaming task needs a video artifact", c.where(task.TaskID))
	}
	call := client.CallKwargs(task, in, 0)
	req, err := c.t.sessionRequest(task, call)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	s := &session{c: c, ctx: ctx, task: task, video: video, req: req, resume: c.resume}
	var own []stream.Option
	snap, replay := stream.Pending(opts...)
	if snap != nil {
		if snap.Token == nil {
			return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), ErrUnsealed)
		}
		// The local session checks what it can — family, variant, task,
		// params — and the server the rest: the checkpoint, and that the
		// token is its own and untouched.
		if len(call) == 0 {
			call = nil
		}
		own = append(own, stream.WithOrigin(stream.Origin{Family: c.spec.ModelFamilyID, Variant: c.vspec.VariantID,
			Checkpoint: snap.Origin.Checkpoint, Task: task.TaskID, Params: call}))
		s.token, s.first = snap.Token, snap.Next
	}
	if replay != nil {
		s.resume = 0 // a replay takes no controls: it replays again from its start
		if s.replay, err = json.Marshal(replay); err != nil {
			return nil, fmt.Errorf("%s: replay: %w", c.where(task.TaskID), err)
		}
	}
	// A probe session reads the options the caller gave.
	probe, err := stream.New(c.spec.Realtime, func(context.Context, stream.StepRequest) (stream.StepResult, error) {
		return stream.StepResult{}, errors.New("probe")
	}, slices.Concat(own, opts)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	s.paced, s.maxChunks = probe.Paced(), probe.MaxChunks()
	all := slices.Concat(own, opts, []stream.Option{stream.WithPacing(false), stream.WithControlsHook(s.sendControls), stream.WithSnapshotHook(s.snapshot)})
	return stream.New(c.spec.Realtime, s.step, all...)
}

// ErrUnsealed is matched (errors.Is) by the error of restoring, on a
// remote backend, a snapshot without a token (stream.Snapshot.Token): one
// taken in process, whose state the server would have to trust. Restore a
// remote session's snapshot, or seal an in-process one with the server's
// session key and read it with stream.Peek.
var ErrUnsealed = errors.New("remote: the snapshot holds no sealed token: a server restores only the tokens it can verify (a remote session's snapshot, or stream.Peek of a token sealed with its session key)")

// RestoreStream opens a session on the server from snap, a snapshot of a
// remote session (its Snapshot) or one read from a token with
// stream.Peek, of the snapshot's task and params: its chunks continue
// snap bit for bit, given the same controls, as client.Client's
// RestoreStream does in process. The server checks the token (its key,
// its bytes) and the model (family, variant, checkpoint, task, params):
// a refusal is a *StatusError (400 a bad token, 409 another model's
// snapshot or a finished session's, 501 a server without a session key)
// that the first chunk returns; the family, variant and task are checked
// here (stream.ErrForeignModel).
func (c *Client) RestoreStream(ctx context.Context, snap stream.Snapshot, opts ...stream.Option) (*stream.Session, error) {
	task, in, err := client.RestoreCall(ctx, c.spec, c.vspec.VariantID, snap)
	if err != nil {
		id := ""
		if task != nil {
			id = task.TaskID
		}
		return nil, fmt.Errorf("%s: %w", c.where(id), err)
	}
	return c.CallStream(ctx, task, in, append(opts, stream.FromSnapshot(snap))...)
}

// ForkStream restores snap into n independent server sessions
// (RestoreStream, client.Fork); opts(i), when not nil, gives session i's
// options (its controls, say).
func (c *Client) ForkStream(ctx context.Context, snap stream.Snapshot, n int, opts func(i int) []stream.Option) ([]*stream.Session, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: fork into %d sessions, want ≥ 0", c.where(snap.Origin.Task), n)
	}
	return client.Fork(ctx, c.RestoreStream, snap, n, opts)
}

// Stream starts a realtime session of task taskID with untyped call
// kwargs: CallStream with them as Inputs (client.KwargsOf).
func (c *Client) Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, []map[string]any{call}, nil)
	if err != nil {
		return nil, err
	}
	return c.CallStream(ctx, task, in, opts...)
}

// session is the server side of a local session, on one session
// connection of the client's transport (oip.SessionConn): chunks come in,
// controls and acks go out. It runs in lockstep: the server makes each
// chunk after the first only once this side acked the one before, which
// it does when the local session asks for the next — so controls set in
// between reach the server first and apply to it, as they do in-process.
// Controls apply locally only once the server took them.
type session struct {
	c         *Client
	ctx       context.Context
	task      *spec.InferenceTaskProfile
	video     string
	req       *oip.InferenceRequest // without the stream parameters
	paced     bool
	maxChunks int
	token     []byte // the snapshot the server session restores (nil: none)
	first     int    // the index of its first chunk (the snapshot's next)
	replay    []byte // the controls log it replays, as JSON (nil: none)
	resume    int    // WithResume: a snapshot every resume chunks, reopen after a break (0: off)

	mu      sync.Mutex // guards the fields below
	opened  bool       // the server session was opened (it may be reopening)
	conn    oip.SessionConn
	keep    func()                  // gives conn back for another session (transport.openSession)
	events  chan received           // the session's messages, in order, from read
	answers chan oip.SessionMessage // answers to controls messages, in order
	done    chan struct{}           // closed when the session is over: read stops delivering
	unwatch func() bool             // stops the watch of ctx (open's)
	pending stream.Controls         // controls set before it opened
	closed  error                   // why the session is over
	resumed resumePoint             // where a broken session reopens (resume.go)
	noSnap  bool                    // the server refused a snapshot: resume from the start

	snapPending bool // askSnapshot's answer is due (guarded by ctl)

	send  sync.Mutex // one Send at a time (oip.SessionConn); guards acked
	acked int        // the last chunk acked on the connection, first-1 before any
	ctl   sync.Mutex // one controls message at a time: answers come in order
}

// received is one message of the session, or why the connection broke.
type received struct {
	msg oip.SessionMessage
	err error
}

// endWait bounds the wait for a session's end event after its last chunk,
// before its connection is kept (a variable for the tests).
var endWait = 5 * time.Second

// errEnded is the error of a session used after its last chunk.
var errEnded = errors.New("the session has ended")

// open starts the server session with the controls the first step has,
// and returns once the session event came.
func (s *session) open(controls stream.Controls) error {
	conn, keep, err := s.dial(s.ctx, s.token, s.first, s.maxChunks, controls)
	if err != nil {
		return err
	}
	s.opened = true
	s.acked = s.first - 1
	s.resumed = resumePoint{token: s.token, next: s.first, log: []controlsChange{{from: s.first, controls: controls}}}
	s.attachLocked(conn, keep)
	return nil
}

// dial opens a server session — restoring token (nil: none) at chunk
// first, with maxChunks chunks of its own and controls — and returns its
// connection once the session event came.
func (s *session) dial(ctx context.Context, token []byte, first, maxChunks int, controls stream.Controls) (oip.SessionConn, func(), error) {
	ctl, err := json.Marshal(map[string]float64(controls))
	if err != nil {
		return nil, nil, err
	}
	// Parameters are scalars (the protocol's rule): the controls travel as
	// JSON text.
	req := *s.req
	req.Parameters = oip.Parameters{"task": s.task.TaskID, "paced": s.paced, "max_chunks": maxChunks,
		"lockstep": true}
	if s.replay != nil {
		req.Parameters[oip.SessionReplay] = string(s.replay) // the log gives the controls
	} else {
		req.Parameters["controls"] = string(ctl)
	}
	if token != nil {
		req.Parameters[oip.SessionSnapshot] = base64.StdEncoding.EncodeToString(token)
	}
	conn, keep, err := s.c.t.openSession(ctx, &req)
	if err != nil {
		return nil, nil, err
	}
	// The first message is read here and the reader started after it: the
	// session event reaches open without a hand-off between goroutines.
	first0, err := conn.Receive(ctx)
	switch {
	case err != nil:
	case first0.Event == oip.EventError:
		err = serverError(first0)
	case first0.Event != oip.EventSession:
		err = fmt.Errorf("the session began with event %q, want %q", first0.Event, oip.EventSession)
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, keep, nil
}

// attachLocked makes conn the session's connection and starts its
// reader (s.mu held).
func (s *session) attachLocked(conn oip.SessionConn, keep func()) {
	s.conn, s.keep = conn, keep
	s.events, s.answers, s.done = make(chan received, 4), make(chan oip.SessionMessage, 1), make(chan struct{})
	go s.read(conn, s.events, s.answers, s.done)
	// A session whose context ends is over, whether a step is under way
	// or none is (the local session stopped between two): its connection
	// closes, whatever the transport's Receive does with the context.
	s.unwatch = context.AfterFunc(s.ctx, func() { s.fail(s.ctx.Err()) })
}

// read takes the session's messages until its last (the end, an error,
// a broken connection) or until the session is over: answers to controls
// to s.answers (dropped when nobody waits for one: the server answers an
// ack only to refuse it), everything else to s.events. It reads nothing
// after the end: a kept connection's next message is the next session's.
func (s *session) read(conn oip.SessionConn, events chan<- received, answers chan<- oip.SessionMessage, done <-chan struct{}) {
	defer close(answers)
	defer close(events)
	for {
		m, err := conn.Receive(s.ctx)
		if err == nil && (m.Event == oip.EventControls || m.Event == oip.EventRefused || m.Event == oip.EventSnapshot) {
			select {
			case answers <- m:
			default:
			}
			continue
		}
		select {
		case events <- received{m, err}:
		case <-done:
			return
		}
		if err != nil || m.Event == oip.EventEnd || m.Event == oip.EventError {
			return
		}
	}
}

// step returns the server's next chunk.
func (s *session) step(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
	s.mu.Lock()
	if s.closed != nil {
		err := s.closed
		s.mu.Unlock()
		return stream.StepResult{}, err
	}
	if !s.opened {
		controls := req.Controls
		if s.pending != nil {
			controls = s.pending
		}
		if err := s.open(controls); err != nil {
			if s.ctx.Err() != nil {
				err = s.ctx.Err()
			}
			s.closed = err
			s.mu.Unlock()
			return stream.StepResult{}, err
		}
	}
	s.mu.Unlock()
	// A cancelled step ends the server session: the connection closes.
	stop := context.AfterFunc(ctx, func() { s.fail(ctx.Err()) })
	defer stop()
	if req.Index > s.first {
		// The consumer has taken the previous chunk (the local session
		// asks for this one only then), and any controls it set since
		// have reached the server: let the server make this one.
		// An ack that cannot be sent means the connection is gone: the
		// next message says why (the server's error, or how it closed).
		ack := int64(req.Index - 1)
		if err := s.write(ctx, oip.ControlsRequest{Ack: &ack}); err != nil && ctx.Err() != nil {
			s.fail(ctx.Err())
			return stream.StepResult{}, ctx.Err()
		}
	}
	var res stream.StepResult
	for breaks := 0; ; breaks++ {
		ev, ok := <-s.eventsNow()
		var err error
		res, err = s.chunk(ev, ok)
		if err != nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil && s.resume > 0 && breaks < maxResumes && ctx.Err() == nil && broken(ev, ok) {
			// The connection broke, not the model: reopen the session
			// (on whichever replica the URL reaches) and wait for this
			// chunk there.
			if err = s.reopen(ctx, req.Index, err); err == nil {
				continue
			}
		}
		if err != nil {
			s.fail(err)
			return stream.StepResult{}, err
		}
		break
	}
	if s.maxChunks > 0 && req.Index+1-s.first >= s.maxChunks { // a restored session counts its own chunks
		s.finish()
	} else {
		s.askSnapshot(ctx, req.Index)
	}
	return res, nil
}

// chunk is the step result of the session's next message, which must be
// a chunk (ok: read delivered it).
func (s *session) chunk(ev received, ok bool) (stream.StepResult, error) {
	switch {
	case !ok:
		return stream.StepResult{}, s.closedErr()
	case ev.err != nil:
		return stream.StepResult{}, ev.err
	}
	switch ev.msg.Event {
	case oip.EventChunk:
		return chunkResult(s.task, s.video, ev.msg.Chunk)
	case oip.EventError:
		return stream.StepResult{}, serverError(ev.msg)
	case oip.EventEnd:
		return stream.StepResult{}, errors.New("the server ended the session")
	}
	return stream.StepResult{}, fmt.Errorf("unexpected event %q", ev.msg.Event)
}

// serverError is the error of an EventError: a *StatusError when the
// transport carried its status.
func serverError(m oip.SessionMessage) error {
	if m.Status == 0 {
		return fmt.Errorf("server: %s", m.Error)
	}
	return &StatusError{Status: m.Status, Message: m.Error}
}

// chunkResult is the step result of a chunk's response: its video's
// frames and the realtime spec for the next chunk (malformed metadata is
// ignored, as in-process).
func chunkResult(task *spec.InferenceTaskProfile, video string, resp *oip.InferenceResponse) (stream.StepResult, error) {
	out, err := oip.DecodeOutputs(task, resp.Outputs)
	if err != nil {
		return stream.StepResult{}, err
	}
	res := stream.StepResult{Frames: out[video]}
	// The server's step time: the wait for the chunk here includes the
	// server's pacing (a paced chunk is sent at its playback time).
	switch ms := resp.Parameters[oip.ChunkLatencyMS].(type) {
	case float64:
		res.Latency = time.Duration(ms * float64(time.Millisecond))
	case int64:
		res.Latency = time.Duration(ms) * time.Millisecond
	case json.Number: // as parameters decode off the wire
		if f, err := ms.Float64(); err == nil {
			res.Latency = time.Duration(f * float64(time.Millisecond))
		}
	}
	if text, ok := resp.Parameters[oip.ChunkRealtime].(string); ok {
		var rt map[string]any
		if json.Unmarshal([]byte(text), &rt) == nil {
			res.Realtime = rt
		}
	}
	return res, nil
}

// finish ends the session after its last chunk. A connection the
// transport keeps (s.keep), with no controls message under way, goes back
// to it for the client's next session once the server's EventEnd has
// come; any other is closed.
func (s *session) finish() {
	if s.keep == nil || !s.ctl.TryLock() {
		s.fail(errEnded)
		return
	}
	defer s.ctl.Unlock()
	// The server sends the end right after the last chunk; one that does
	// not within endWait loses the connection, not the chunk.
	wait := time.NewTimer(endWait)
	defer wait.Stop()
	select {
	case ev, ok := <-s.eventsNow():
		if !ok || ev.err != nil || ev.msg.Event != oip.EventEnd {
			s.fail(errEnded)
			return
		}
	case <-wait.C:
		s.fail(errEnded)
		return
	}
	s.mu.Lock()
	first := s.closed == nil
	if first {
		s.closed = errEnded
		close(s.done)
	}
	s.mu.Unlock()
	if first {
		// The kept connection is the next session's: this one's context
		// no longer reaches it.
		s.unwatch()
		s.keep()
	}
}

// write sends one controls message; an ack is recorded (s.acked), and
// controls are logged for a reopen (resume.go) with the chunk they apply
// from: the server applies them from the chunk after the one it makes
// next, which is the chunk after the last acked.
func (s *session) write(ctx context.Context, m oip.ControlsRequest) error {
	s.send.Lock()
	defer s.send.Unlock()
	if m.Controls != nil && s.resume > 0 {
		s.mu.Lock()
		s.resumed.log = append(s.resumed.log, controlsChange{from: s.acked + 2, controls: m.Controls})
		s.mu.Unlock()
	}
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return errBroken
	}
	err := conn.Send(ctx, m)
	if err == nil && m.Ack != nil {
		s.acked = int(*m.Ack)
	}
	return err
}

// closedErr is why the session is over.
func (s *session) closedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return s.closed
	}
	return errEnded
}

// fail ends the server session (closing the connection) for err.
func (s *session) fail(err error) {
	s.mu.Lock()
	first := s.closed == nil
	if first {
		s.closed = err
	}
	conn, unwatch, done := s.conn, s.unwatch, s.done
	s.mu.Unlock()
	if first && conn != nil {
		if unwatch != nil {
			unwatch()
		}
		close(done)
		conn.Close()
	}
}

// sendControls is the local session's controls hook: once the server
// session is open, the controls are sent to it and apply locally only when
// it took them. Before it opens they go with the request that opens it.
func (s *session) sendControls(c stream.Controls) error {
	s.mu.Lock()
	open, closed := s.opened, s.closed
	if !open {
		s.pending = c // open sends them
	}
	s.mu.Unlock()
	if !open || closed != nil {
		return nil
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.mu.Lock()
	closed = s.closed
	s.mu.Unlock()
	if closed != nil { // finish may have kept the connection for another session
		return nil
	}
	where := s.c.where(s.task.TaskID)
	answers := s.answersNow()
	s.takeSnapshot(answers)
	if err := s.write(s.ctx, oip.ControlsRequest{Controls: c}); err != nil {
		if s.resume > 0 && s.closedNow() == nil {
			return nil // logged: the reopened session applies them (resume.go)
		}
		return fmt.Errorf("%s: controls: %w", where, err)
	}
	m, ok := <-answers
	switch {
	case !ok && s.resume > 0 && s.closedNow() == nil:
		return nil // the connection broke: as above
	case !ok:
		return fmt.Errorf("%s: controls: %w", where, s.closedErr())
	case m.Event == oip.EventRefused:
		return fmt.Errorf("%s: controls: %w", where, &StatusError{Status: http.StatusBadRequest, Message: m.Error})
	}
	return nil
}

// snapshot is the local session's snapshot hook: the server seals the
// session at its chunk boundary — after the last chunk it generated,
// which is the last the local session released unless a step is under
// way — and the snapshot is read from the token (stream.Peek), which it
// holds to restore it. The server session must be open: a session that
// has not asked for its first chunk, or that has ended (its chunk limit
// reached), has none.
func (s *session) snapshot() (stream.Snapshot, error) {
	where := s.c.where(s.task.TaskID)
	s.mu.Lock()
	open, closed := s.opened, s.closed
	s.mu.Unlock()
	switch {
	case closed != nil:
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: %w", where, closed)
	case !open:
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: the server session opens with the first chunk: take a snapshot once a chunk has come", where)
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	if err := s.closedNow(); err != nil {
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: %w", where, err)
	}
	answers := s.answersNow()
	s.takeSnapshot(answers)
	if err := s.write(s.ctx, oip.ControlsRequest{Snapshot: true}); err != nil {
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: %w", where, err)
	}
	m, ok := <-answers
	switch {
	case !ok:
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: %w", where, s.closedErr())
	case m.Event == oip.EventRefused:
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: %w", where, &StatusError{Status: http.StatusBadRequest, Message: m.Error})
	case m.Event != oip.EventSnapshot || m.Snapshot == nil:
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: the server answered %q", where, m.Event)
	}
	snap, err := stream.Peek(m.Snapshot.Token)
	if err != nil {
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: the server's token: %w", where, err)
	}
	if int64(snap.Next) != m.Snapshot.Next {
		return stream.Snapshot{}, fmt.Errorf("%s: snapshot: the server says chunk %d, its token holds chunk %d", where, m.Snapshot.Next, snap.Next)
	}
	return snap, nil
}

// closedNow is why the session is over, nil while it is not.
func (s *session) closedNow() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
