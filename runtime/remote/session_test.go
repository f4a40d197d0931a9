package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// scriptConn is a session connection that plays a script: each message
// once the client acked the chunk before it (lockstep), answering controls
// messages as they come; after the script it waits for Close.
type scriptConn struct {
	script  []scripted
	refuse  string // the refusal of every controls message; "": taken
	acked   int64  // Receive's
	acks    chan int64
	answers chan oip.SessionMessage
	closed  chan struct{}
	once    sync.Once

	mu   sync.Mutex
	sent []oip.ControlsRequest
}

// scripted is one message of a script, or a broken connection (err); sent
// once chunk ackBefore was acked.
type scripted struct {
	msg       oip.SessionMessage
	err       error
	ackBefore int64
}

func newScriptConn(script ...scripted) *scriptConn {
	return &scriptConn{script: script, acked: -1, acks: make(chan int64, 64), answers: make(chan oip.SessionMessage, 64), closed: make(chan struct{})}
}

func (f *scriptConn) Send(_ context.Context, m oip.ControlsRequest) error {
	select {
	case <-f.closed:
		return errors.New("send on a closed connection")
	default:
	}
	f.mu.Lock()
	f.sent = append(f.sent, m)
	f.mu.Unlock()
	if m.Controls != nil {
		if f.refuse != "" {
			f.answers <- oip.SessionMessage{Event: oip.EventRefused, Error: f.refuse}
		} else {
			f.answers <- oip.SessionMessage{Event: oip.EventControls, Controls: m.Controls}
		}
	}
	if m.Ack != nil {
		f.acks <- *m.Ack
	}
	return nil
}

func (f *scriptConn) Receive(context.Context) (oip.SessionMessage, error) {
	for {
		if len(f.script) > 0 && f.acked >= f.script[0].ackBefore {
			s := f.script[0]
			f.script = f.script[1:]
			return s.msg, s.err
		}
		select {
		case m := <-f.answers:
			return m, nil
		case f.acked = <-f.acks:
		case <-f.closed:
			return oip.SessionMessage{}, errors.New("use of a closed connection")
		}
	}
}

func (f *scriptConn) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *scriptConn) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

func (f *scriptConn) sentMessages() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.sent {
		s := ""
		if m.Controls != nil {
			s = "controls"
		}
		if m.Ack != nil {
			s += "ack " + string(rune('0'+*m.Ack))
		}
		out = append(out, s)
	}
	return out
}

// Messages of a script: the session event, chunk i (one frame whose first
// byte is i), the end, a failure.
var opened = scripted{msg: oip.SessionMessage{Event: oip.EventSession, Session: &oip.SessionInfo{ID: "s1"}}, ackBefore: -1}

func chunkMsg(i int64) scripted {
	return scripted{msg: oip.SessionMessage{Event: oip.EventChunk, Chunk: &oip.InferenceResponse{Outputs: []oip.Tensor{
		{Name: "frames", Datatype: oip.Uint8, Shape: []int64{1, 1, 1, 3}, Data: json.RawMessage(fmt.Sprintf("[%d,0,0]", i))}}}}, ackBefore: i - 1}
}

// ended is the end, sent with the last chunk: after the ack of the chunk
// before it.
func ended(after int64) scripted {
	return scripted{msg: oip.SessionMessage{Event: oip.EventEnd}, ackBefore: after}
}

// sessionOn returns a client whose sessions run on conn, and the requests
// that opened them; keep, when not nil, is the transport's.
func sessionOn(t *testing.T, conn *scriptConn, keep func()) (*remote.Client, *[]*oip.InferenceRequest) {
	rc, err := remote.New(worldSpec(), "http://unused.invalid")
	if err != nil {
		t.Fatal(err)
	}
	var starts []*oip.InferenceRequest
	remote.OpenSessionsWith(rc, func(_ context.Context, start *oip.InferenceRequest) (oip.SessionConn, func(), error) {
		starts = append(starts, start)
		return conn, keep, nil
	})
	return rc, &starts
}

// collect runs a session to its end and returns the first byte of each
// chunk's frames and the error it ended with; after chunk 0 it sets
// controls, when given, and records SetControls' error.
func collect(t *testing.T, sess *stream.Session, controls stream.Controls) (got []byte, setErr, last error) {
	t.Helper()
	ctx := context.Background()
	for c, err := range sess.Chunks(ctx) {
		if err != nil {
			return got, setErr, err
		}
		got = append(got, c.Video.Frames.Data[0])
		if len(got) == 1 && controls != nil {
			setErr = sess.SetControls(controls)
		}
	}
	return got, setErr, nil
}

// The state machine over a connection that does what the protocol says:
// lockstep acks, controls answered before they apply, the connection
// closed after the last chunk when the transport does not keep it.
func TestSessionOverAConnection(t *testing.T) {
	conn := newScriptConn(opened, chunkMsg(0), chunkMsg(1), chunkMsg(2), ended(1))
	rc, starts := sessionOn(t, conn, nil)
	sess, err := rc.Stream(context.Background(), "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3), stream.WithControls(stream.Controls{"left": 0.5}))
	if err != nil {
		t.Fatal(err)
	}
	got, setErr, last := collect(t, sess, stream.Controls{"left": 1})
	if last != nil || setErr != nil || !slices.Equal(got, []byte{0, 1, 2}) {
		t.Fatalf("chunks %v, SetControls %v, end %v", got, setErr, last)
	}
	if len(*starts) != 1 {
		t.Fatalf("%d sessions opened", len(*starts))
	}
	p := (*starts)[0].Parameters
	if p["task"] != "step" || p["paced"] != false || p["max_chunks"] != 3 || p["controls"] != `{"left":0.5}` || p["lockstep"] != true {
		t.Errorf("opening parameters %v", p)
	}
	if want := []string{"controls", "ack 0", "ack 1"}; !slices.Equal(conn.sentMessages(), want) {
		t.Errorf("sent %v, want %v", conn.sentMessages(), want)
	}
	if c := sess.Controls(); c["left"] != 1 {
		t.Errorf("controls %v after the server took them", c)
	}
	if !conn.isClosed() {
		t.Error("the connection is open after the last chunk")
	}
}

// The ways a session ends other than by its chunk limit, each with the
// error the caller sees.
func TestSessionEndings(t *testing.T) {
	for _, c := range []struct {
		name   string
		script []scripted
		chunks int
		want   string
		status int
	}{
		{"refused at opening", []scripted{{msg: oip.SessionMessage{Event: oip.EventError, Error: "too many sessions", Status: 429}, ackBefore: -1}}, 0, "too many sessions", 429},
		{"no session event", []scripted{chunkMsg(0)}, 0, `the session began with event "chunk", want "session"`, 0},
		{"error mid-stream", []scripted{opened, chunkMsg(0), {msg: oip.SessionMessage{Event: oip.EventError, Error: "boom", Status: 500}, ackBefore: 0}}, 1, "boom", 500},
		{"error without a status", []scripted{opened, chunkMsg(0), {msg: oip.SessionMessage{Event: oip.EventError, Error: "boom"}, ackBefore: 0}}, 1, "server: boom", 0},
		{"end before the limit", []scripted{opened, chunkMsg(0), ended(0)}, 1, "the server ended the session", 0},
		{"connection broken without an end", []scripted{opened, chunkMsg(0), {err: errors.New("connection reset by peer"), ackBefore: 0}}, 1, "connection reset by peer", 0},
		{"an event a session does not hold", []scripted{opened, chunkMsg(0), {msg: oip.SessionMessage{Event: "odd"}, ackBefore: 0}}, 1, `unexpected event "odd"`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := newScriptConn(c.script...)
			rc, _ := sessionOn(t, conn, nil)
			sess, err := rc.Stream(context.Background(), "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3))
			if err != nil {
				t.Fatal(err)
			}
			got, _, last := collect(t, sess, nil)
			if len(got) != c.chunks || last == nil || !strings.Contains(last.Error(), c.want) {
				t.Fatalf("%d chunks, then %v; want %d, then %q", len(got), last, c.chunks, c.want)
			}
			var se *remote.StatusError
			if errors.As(last, &se) != (c.status != 0) || c.status != 0 && se.Status != c.status {
				t.Errorf("%v: status error %v, want status %d", last, se, c.status)
			}
			if !conn.isClosed() {
				t.Error("the connection is open after the session failed")
			}
		})
	}
}

// Controls the server refuses are an error of SetControls and do not
// apply locally; the session goes on.
func TestSessionControlsRefused(t *testing.T) {
	conn := newScriptConn(opened, chunkMsg(0), chunkMsg(1), ended(0))
	conn.refuse = "left: out of range"
	rc, _ := sessionOn(t, conn, nil)
	sess, err := rc.Stream(context.Background(), "step", nil, stream.WithPacing(false), stream.WithMaxChunks(2))
	if err != nil {
		t.Fatal(err)
	}
	got, setErr, last := collect(t, sess, stream.Controls{"left": 1})
	if last != nil || !slices.Equal(got, []byte{0, 1}) {
		t.Fatalf("chunks %v, end %v", got, last)
	}
	var se *remote.StatusError
	if !errors.As(setErr, &se) || se.Status != 400 || se.Message != "left: out of range" || !strings.Contains(setErr.Error(), "w step (remote): controls:") {
		t.Errorf("SetControls: %v", setErr)
	}
	if c := sess.Controls(); c["left"] != 0 {
		t.Errorf("refused controls applied: %v", c)
	}
}

// A connection the transport keeps goes back to it once the end came
// after the last chunk, and is not closed; one whose end does not come is
// closed, not kept.
func TestSessionKeepsItsConnection(t *testing.T) {
	for _, c := range []struct {
		name  string
		after scripted
		kept  bool
	}{
		{"end", ended(0), true},
		{"no end", scripted{err: errors.New("connection reset by peer"), ackBefore: 0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := newScriptConn(opened, chunkMsg(0), chunkMsg(1), c.after)
			kept := make(chan struct{})
			rc, _ := sessionOn(t, conn, func() { close(kept) })
			sess, err := rc.Stream(context.Background(), "step", nil, stream.WithPacing(false), stream.WithMaxChunks(2))
			if err != nil {
				t.Fatal(err)
			}
			if got, _, last := collect(t, sess, nil); last != nil || len(got) != 2 {
				t.Fatalf("chunks %v, end %v", got, last)
			}
			select {
			case <-kept:
			default:
				if c.kept {
					t.Error("the connection was not kept")
				}
			}
			if conn.isClosed() == c.kept {
				t.Errorf("closed %v, want %v", conn.isClosed(), !c.kept)
			}
		})
	}
}

// A step whose context ends ends the session: the connection closes and
// the step's error is the context's.
func TestSessionCancelledStep(t *testing.T) {
	conn := newScriptConn(opened, chunkMsg(0)) // then nothing: chunk 1 never comes
	rc, _ := sessionOn(t, conn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := rc.Stream(ctx, "step", nil, stream.WithPacing(false))
	if err != nil {
		t.Fatal(err)
	}
	results := sess.Channel(ctx, 0)
	if r := enginetest.Receive(t, "chunk 0", results); r.Err != nil {
		t.Fatal(r.Err)
	}
	cancel()
	for r := range results {
		if r.Err != nil && !errors.Is(r.Err, context.Canceled) {
			t.Errorf("after cancel: %v", r.Err)
		}
	}
	enginetest.WaitFor(t, "the connection closed", conn.isClosed)
}

// A chunk's latency is the server's step time (its latency_ms parameter),
// not the wait for the chunk: a paced server sends each chunk at its
// playback time, so the wait was about one chunk's playback (250 ms for
// the tiny world) against a step of well under a millisecond.
func TestSessionChunkLatencyIsTheServers(t *testing.T) {
	c0, c1, c2 := chunkMsg(0), chunkMsg(1), chunkMsg(2)
	c0.msg.Chunk.Parameters = oip.Parameters{oip.ChunkLatencyMS: 0.75}
	c1.msg.Chunk.Parameters = oip.Parameters{oip.ChunkLatencyMS: int64(3)}
	// As a real connection decodes it (oip.Parameters keeps numbers as
	// json.Number): the server's latency was lost that way.
	c2.msg.Chunk.Parameters = oip.Parameters{oip.ChunkLatencyMS: json.Number("1.5")}
	conn := newScriptConn(opened, c0, c1, c2, ended(0))
	rc, _ := sessionOn(t, conn, nil)
	sess, err := rc.Stream(context.Background(), "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3))
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for c, err := range sess.Chunks(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Latency)
	}
	if !slices.Equal(got, []time.Duration{750 * time.Microsecond, 3 * time.Millisecond, 1500 * time.Microsecond}) {
		t.Errorf("chunk latencies %v, want the server's 750µs, 3ms and 1.5ms", got)
	}
}
