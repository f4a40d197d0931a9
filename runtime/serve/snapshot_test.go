package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// sessionKey is the test servers' session key.
var sessionKey = []byte("the replicas' session key, 32 B.")

// worldScript is the controls a player sets before chunk i (nil: none),
// as runtime/client's snapshot test plays them.
func worldScript(i int) stream.Controls {
	switch i {
	case 0:
		return stream.Controls{"right": 1}
	case 2:
		return stream.Controls{"forward": 1}
	case 5:
		return stream.Controls{"left": 1, "backward": 0.5}
	case 7:
		return stream.Controls{}
	}
	return nil
}

// playChunks plays s from chunk from, n chunks or to its end (n < 0), one
// Chunks call per chunk so that sc's controls change between chunks, and
// returns the frames by chunk index.
func playChunks(t *testing.T, s *stream.Session, from, n int, sc func(int) stream.Controls) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	for next := from; n < 0 || next < from+n; next++ {
		if sc != nil {
			if c := sc(next); c != nil {
				if err := s.SetControls(c); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := false
		for c, err := range s.Chunks(context.Background()) {
			if err != nil {
				t.Fatalf("chunk %d: %v", next, err)
			}
			if c.Index != next {
				t.Fatalf("chunk %d, want %d", c.Index, next)
			}
			out[c.Index] = bytes.Clone(c.Video.Frames.Data)
			got = true
			break
		}
		if !got {
			break
		}
	}
	return out
}

// sameChunks fails unless got holds chunks from to to-1, each equal to
// want's bit for bit.
func sameChunks(t *testing.T, what string, want, got map[int][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("%s: %d chunks, want %d (%d to %d)", what, len(got), to-from, from, to-1)
	}
	for i := from; i < to; i++ {
		if want[i] == nil || !bytes.Equal(want[i], got[i]) {
			t.Fatalf("%s: chunk %d differs from the in-process session's", what, i)
		}
	}
}

// firstChunkErr returns the error of a session's first chunk (nil when it
// came).
func firstChunkErr(s *stream.Session) error {
	for _, err := range s.Chunks(context.Background()) {
		return err
	}
	return errors.New("the session ended without a chunk")
}

// TestRemoteSnapshotRestoreFork plays the tiny world through wfserve on
// each of the remote client's session transports (a WebSocket, gRPC):
// a snapshot of the live session at chunk 3 is the server's, sealed; it
// restores in new sessions (RestoreStream, the generated StepStream with
// stream.FromSnapshot) whose chunks 3 to 9 equal an uninterrupted
// in-process session's bit for bit; forks with their own controls equal
// in-process sessions that pressed the same; a replay of its log gives
// chunks 0 to 2 again; tokens of another key, tampered with, or of
// another checkpoint are refused with their statuses, the session going
// on.
func TestRemoteSnapshotRestoreFork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{SessionKey: sessionKey}))
	in := tinyworld.NewClient(inProcess(t, "tiny-world"))
	params := tinyworld.StepParams{Speed: 3}
	unpaced := stream.WithPacing(false)

	// The in-process references: the uninterrupted run, and a run per fork.
	ref, err := in.StepStream(ctx, params, unpaced, stream.WithMaxChunks(10))
	if err != nil {
		t.Fatal(err)
	}
	full := playChunks(t, ref, 0, -1, worldScript)
	dirs := []stream.Controls{{"left": 1}, {"right": 1}, {"forward": 1, "left": 0.5}}
	forkRefs := make([]map[int][]byte, len(dirs))
	for i, d := range dirs {
		alone, err := in.StepStream(ctx, params, unpaced, stream.WithMaxChunks(7))
		if err != nil {
			t.Fatal(err)
		}
		forkRefs[i] = playChunks(t, alone, 0, -1, func(k int) stream.Controls {
			switch {
			case k < 3:
				return worldScript(k)
			case k == 3:
				return d
			}
			return nil
		})
	}

	for _, tr := range []struct {
		name string
		rc   *remote.Client
	}{
		{"websocket", remoteClient(t, s.started, "tiny-world")},
		{"grpc", grpcRemote(t, s, "tiny-world")},
	} {
		t.Run(tr.name, func(t *testing.T) {
			re := tinyworld.NewClient(tr.rc)
			live, err := re.StepStream(ctx, params, unpaced)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := live.Snapshot(); err == nil || !strings.Contains(err.Error(), "opens with the first chunk") {
				t.Fatalf("a snapshot before the first chunk: %v", err)
			}
			sameChunks(t, "the live session", full, playChunks(t, live, 0, 3, worldScript), 0, 3)
			snap, err := live.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Next != 3 || snap.Token == nil || snap.Origin.Task != "step" || snap.Origin.Params["speed"] != 3.0 || snap.State == nil {
				t.Fatalf("snapshot at chunk %d of %+v (token %d bytes)", snap.Next, snap.Origin, len(snap.Token))
			}
			if _, err := stream.Open(snap.Token, sessionKey); err != nil {
				t.Fatalf("the server's token does not open with its key: %v", err)
			}
			// The live session goes on after its snapshot, as it would have.
			sameChunks(t, "the live session after its snapshot", full, playChunks(t, live, 3, 2, worldScript), 3, 5)

			// Restored: chunks 3.. equal the uninterrupted run's.
			r1, err := tr.rc.RestoreStream(ctx, snap, unpaced, stream.WithMaxChunks(7))
			if err != nil {
				t.Fatal(err)
			}
			sameChunks(t, "RestoreStream", full, playChunks(t, r1, 3, -1, worldScript), 3, 10)
			r2, err := re.StepStream(ctx, params, unpaced, stream.WithMaxChunks(7), stream.FromSnapshot(snap))
			if err != nil {
				t.Fatal(err)
			}
			sameChunks(t, "StepStream with FromSnapshot", full, playChunks(t, r2, 3, -1, worldScript), 3, 10)

			// Forks with their own controls.
			var b client.Backend = tr.rc // generic code finds the capability
			forks, err := b.(client.Restorer).ForkStream(ctx, snap, len(dirs), func(i int) []stream.Option {
				return []stream.Option{unpaced, stream.WithMaxChunks(4), stream.WithControls(dirs[i])}
			})
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range forks {
				sameChunks(t, fmt.Sprintf("fork %v", dirs[i]), forkRefs[i], playChunks(t, f, 3, -1, nil), 3, 7)
			}

			// A replay of the snapshot's log: chunks 0 to 2 again, and a
			// replay from the snapshot of a longer log.
			rp, err := re.StepStream(ctx, params, unpaced, stream.WithReplay(snap.Log))
			if err != nil {
				t.Fatal(err)
			}
			sameChunks(t, "a replay", full, playChunks(t, rp, 0, -1, nil), 0, 3)
			if err := rp.SetControls(stream.Controls{"left": 1}); !errors.Is(err, stream.ErrReplaying) {
				t.Fatalf("controls of a replay: %v", err)
			}
			later, err := r1.Snapshot()
			if err == nil {
				t.Fatalf("a snapshot of a session past its chunk limit: %+v", later.Next)
			}

			// Refused tokens: the session that tries one fails at its first
			// chunk with the status; the live one goes on.
			other, err := stream.Seal(snap, []byte("another server's key, 32 bytes."))
			if err != nil {
				t.Fatal(err)
			}
			foreignKey, err := stream.Peek(other)
			if err != nil {
				t.Fatal(err)
			}
			tampered := snap
			tampered.Token = bytes.Clone(snap.Token)
			tampered.Token[len(tampered.Token)-1] ^= 1
			moved := snap
			moved.Origin.Checkpoint = "sha256:" + strings.Repeat("0", 64)
			moved.Token = nil
			tok, err := stream.Seal(moved, sessionKey)
			if err != nil {
				t.Fatal(err)
			}
			if moved, err = stream.Peek(tok); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name   string
				snap   stream.Snapshot
				status int
				text   string
			}{
				{"another key", foreignKey, 400, "sealed with another key"},
				{"tampered", tampered, 400, "tampered"},
				{"another checkpoint", moved, 409, "its checkpoint is"},
			} {
				r, err := tr.rc.RestoreStream(ctx, c.snap, unpaced)
				if err != nil {
					t.Fatal(err)
				}
				err = firstChunkErr(r)
				var se *remote.StatusError
				if !errors.As(err, &se) || se.Status != c.status || !strings.Contains(err.Error(), c.text) {
					t.Errorf("%s: %v, want status %d and %q", c.name, err, c.status, c.text)
				}
			}
			// An in-process snapshot has no token: refused before anything
			// is sent; so is another family's.
			plain := snap
			plain.Token = nil
			if _, err := tr.rc.RestoreStream(ctx, plain); !errors.Is(err, remote.ErrUnsealed) {
				t.Errorf("a snapshot without a token: %v", err)
			}
			fam := snap
			fam.Origin.Family = "tiny-encoder"
			if _, err := tr.rc.RestoreStream(ctx, fam); !errors.Is(err, stream.ErrForeignModel) {
				t.Errorf("another family's snapshot: %v", err)
			}
			sameChunks(t, "the live session after the refusals", full, playChunks(t, live, 5, 2, worldScript), 5, 7)
		})
	}
}

// TestRemoteSnapshotEqualsInProcess: the server's snapshot of a session
// is the in-process client's snapshot of the same session, byte for byte
// (both clients load the same checkpoint file).
func TestRemoteSnapshotEqualsInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := start(t, serve.Config{SessionKey: sessionKey})
	params := tinyworld.StepParams{Speed: 3}
	var enc [2][]byte
	for i, b := range []client.Backend{inProcess(t, "tiny-world"), remoteClient(t, s, "tiny-world")} {
		live, err := tinyworld.NewClient(b).StepStream(ctx, params, stream.WithPacing(false))
		if err != nil {
			t.Fatal(err)
		}
		playChunks(t, live, 0, 4, worldScript)
		snap, err := live.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if enc[i], err = snap.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(enc[0], enc[1]) {
		t.Fatalf("the server's snapshot (%d bytes) differs from the in-process one (%d bytes)", len(enc[1]), len(enc[0]))
	}
}

// TestRemoteSnapshotWithoutKey: a server without a session key refuses a
// snapshot (the session goes on) and a restore (501).
func TestRemoteSnapshotWithoutKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{}))
	keyed := start(t, serve.Config{SessionKey: sessionKey})
	live, err := remoteClient(t, keyed, "tiny-world").Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false))
	if err != nil {
		t.Fatal(err)
	}
	playChunks(t, live, 0, 2, worldScript)
	snap, err := live.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range []*remote.Client{remoteClient(t, s.started, "tiny-world"), grpcRemote(t, s, "tiny-world")} {
		sess, err := rc.Stream(ctx, "step", map[string]any{"speed": 3.0}, stream.WithPacing(false))
		if err != nil {
			t.Fatal(err)
		}
		playChunks(t, sess, 0, 1, nil)
		if _, err := sess.Snapshot(); err == nil || !strings.Contains(err.Error(), "no session key") {
			t.Errorf("a snapshot on a server without a key: %v", err)
		}
		playChunks(t, sess, 1, 1, nil)
		r, err := rc.RestoreStream(ctx, snap, stream.WithPacing(false))
		if err != nil {
			t.Fatal(err)
		}
		var se *remote.StatusError
		if err := firstChunkErr(r); !errors.As(err, &se) || se.Status != 501 || !strings.Contains(err.Error(), "-session-key-file") {
			t.Errorf("a restore on a server without a key: %v", err)
		}
	}
}

// sseSession is a session streamed as Server-Sent Events.
type sseSession struct {
	t      *testing.T
	rd     *bufio.Reader
	cancel context.CancelFunc
	info   oip.SessionInfo
}

// openSSE posts an infer request that asks for a stream; a refusal is
// returned as its status and error text.
func openSSE(t *testing.T, s *started, body string) (*sseSession, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v2/models/tiny-world/infer", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := patientClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, errorBody(t, b)
	}
	se := &sseSession{t: t, rd: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}
	name, data := se.next()
	if name != oip.EventSession || json.Unmarshal(data, &se.info) != nil {
		t.Fatalf("first event %q %s", name, data)
	}
	return se, 200, ""
}

// next reads the next event.
func (se *sseSession) next() (string, []byte) {
	se.t.Helper()
	var name string
	var data []byte
	for {
		line, err := se.rd.ReadBytes('\n')
		if err != nil {
			se.t.Fatalf("reading events: %v", err)
		}
		l := strings.TrimRight(string(line), "\n")
		switch {
		case l == "":
			return name, data
		case strings.HasPrefix(l, "event: "):
			name = l[len("event: "):]
		case strings.HasPrefix(l, "data: "):
			data = []byte(l[len("data: "):])
		}
	}
}

// chunk reads chunk i's frames.
func (se *sseSession) chunk(i int) []byte {
	se.t.Helper()
	name, data := se.next()
	var resp oip.InferenceResponse
	if name != oip.EventChunk || json.Unmarshal(data, &resp) != nil {
		se.t.Fatalf("event %q %.300s, want chunk %d", name, data, i)
	}
	if resp.Parameters[oip.ChunkIndex] != json.Number(fmt.Sprint(i)) {
		se.t.Fatalf("chunk %v, want %d", resp.Parameters[oip.ChunkIndex], i)
	}
	var nums []int
	if err := json.Unmarshal(resp.Outputs[0].Data, &nums); err != nil {
		se.t.Fatalf("chunk %d's frames: %v", i, err)
	}
	b := make([]byte, len(nums))
	for j, n := range nums {
		b[j] = byte(n)
	}
	return b
}

// TestSnapshotOverSSE takes a snapshot of a lockstep SSE session through
// its controls URL, restores and replays it with the infer request's
// parameters: the frames are the in-process session's; bad tokens, logs
// and a server without a key are refused with JSON errors.
func TestSnapshotOverSSE(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := start(t, serve.Config{SessionKey: sessionKey})
	ref, err := tinyworld.NewClient(inProcess(t, "tiny-world")).StepStream(ctx, tinyworld.StepParams{Speed: 3}, stream.WithPacing(false), stream.WithMaxChunks(6))
	if err != nil {
		t.Fatal(err)
	}
	full := playChunks(t, ref, 0, -1, worldScript)
	input := `"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[3]}]`
	live, code, msg := openSSE(t, s, `{"parameters":{"task":"step","paced":false,"lockstep":true,"controls":{"right":1}},`+input+`}`)
	if code != 200 {
		t.Fatalf("open: %d %s", code, msg)
	}
	post := func(body string) (int, []byte) {
		code, _, b := call(t, "POST", s.url+live.info.ControlsURL, body)
		return code, b
	}
	got := map[int][]byte{}
	for i := range 3 {
		got[i] = live.chunk(i)
		if c := worldScript(i + 1); c != nil {
			b, _ := json.Marshal(oip.ControlsRequest{Controls: c})
			if code, b := post(string(b)); code != 200 {
				t.Fatalf("controls: %d %s", code, b)
			}
		}
		if i < 2 {
			if code, b := post(fmt.Sprintf(`{"ack":%d}`, i)); code != 200 {
				t.Fatalf("ack: %d %s", code, b)
			}
		}
	}
	sameChunks(t, "the live session", full, got, 0, 3)
	code, b := post(`{"snapshot":true}`)
	var ans oip.ControlsAnswer
	if code != 200 || json.Unmarshal(b, &ans) != nil || ans.Snapshot == nil || ans.Snapshot.Next != 3 || ans.Controls["forward"] != 1 {
		t.Fatalf("snapshot: %d %.300s", code, b)
	}
	snap, err := stream.Open(ans.Snapshot.Token, sessionKey)
	if err != nil {
		t.Fatal(err)
	}
	token := base64.StdEncoding.EncodeToString(ans.Snapshot.Token)

	// Restored: chunks 3 and 4 (no controls change there).
	r, code, msg := openSSE(t, s, `{"parameters":{"task":"step","paced":false,"max_chunks":2,"snapshot":"`+token+`"},`+input+`}`)
	if code != 200 {
		t.Fatalf("restore: %d %s", code, msg)
	}
	got = map[int][]byte{}
	for i := 3; i < 5; i++ {
		got[i] = r.chunk(i)
	}
	sameChunks(t, "the restored session", full, got, 3, 5)
	if name, _ := r.next(); name != oip.EventEnd {
		t.Fatalf("after the last chunk: %q", name)
	}
	// Two forks, each with its own controls from chunk 3 (the "controls"
	// parameter replaces the snapshot's): each equals an in-process
	// session that pressed the same.
	for _, d := range []string{`{"left":1}`, `{"backward":1,"right":0.5}`} {
		var dc stream.Controls
		json.Unmarshal([]byte(d), &dc)
		alone, err := tinyworld.NewClient(inProcess(t, "tiny-world")).StepStream(ctx, tinyworld.StepParams{Speed: 3}, stream.WithPacing(false), stream.WithMaxChunks(5))
		if err != nil {
			t.Fatal(err)
		}
		wantFork := playChunks(t, alone, 0, -1, func(k int) stream.Controls {
			if k == 3 {
				return dc
			}
			return worldScript(k)
		})
		f, code, msg := openSSE(t, s, `{"parameters":{"task":"step","paced":false,"max_chunks":2,"controls":`+d+`,"snapshot":"`+token+`"},`+input+`}`)
		if code != 200 {
			t.Fatalf("fork: %d %s", code, msg)
		}
		sameChunks(t, "fork "+d, wantFork, map[int][]byte{3: f.chunk(3), 4: f.chunk(4)}, 3, 5)
	}

	// Replayed from chunk 0 with its log.
	log, _ := json.Marshal(snap.Log)
	logText, _ := json.Marshal(string(log))
	rp, code, msg := openSSE(t, s, `{"parameters":{"task":"step","paced":false,"replay":`+string(logText)+`},`+input+`}`)
	if code != 200 {
		t.Fatalf("replay: %d %s", code, msg)
	}
	got = map[int][]byte{}
	for i := range 3 {
		got[i] = rp.chunk(i)
	}
	sameChunks(t, "the replay", full, got, 0, 3)

	other, _ := stream.Seal(snap, []byte("another server's key, 32 bytes."))
	moved := snap
	moved.Origin.Variant = "other"
	movedTok, _ := stream.Seal(moved, sessionKey)
	finished := snap
	finished.Done = true
	finishedTok, _ := stream.Seal(finished, sessionKey)
	enc := base64.StdEncoding.EncodeToString
	for _, c := range []struct {
		name, params string
		status       int
		text         string
	}{
		{"another key", `"snapshot":"` + enc(other) + `"`, 400, "sealed with another key"},
		{"truncated", `"snapshot":"` + enc(ans.Snapshot.Token[:40]) + `"`, 400, "truncated"},
		{"not base64", `"snapshot":"!!"`, 400, "not base64"},
		{"not a token", `"snapshot":"` + enc([]byte("hello, world")) + `"`, 400, "not a snapshot token"},
		{"another variant", `"snapshot":"` + enc(movedTok) + `"`, 409, "its variant is \"other\""},
		{"finished", `"snapshot":"` + enc(finishedTok) + `"`, 409, "has finished"},
		{"another task's params", `"snapshot":"` + token + `"`, 409, "its params is"},
		{"a log out of order", `"replay":"{\"start\":0,\"end\":3,\"changes\":[{\"from\":0,\"controls\":{}},{\"from\":2,\"controls\":{}},{\"from\":1,\"controls\":{}}]}"`, 400, "out of order"},
		{"a log with unknown fields", `"replay":"{\"start\":0,\"end\":1,\"changez\":[]}"`, 400, "controls log as JSON text"},
		{"a log after the snapshot", `"snapshot":"` + token + `","replay":"{\"start\":5,\"end\":6,\"changes\":[{\"from\":5,\"controls\":{}}]}"`, 400, "truncated"},
	} {
		in := input
		if c.name == "another task's params" {
			in = strings.Replace(input, "[3]", "[2]", 1)
		}
		_, code, msg := openSSE(t, s, `{"parameters":{"task":"step","paced":false,`+c.params+`},`+in+`}`)
		if code != c.status || !strings.Contains(msg, c.text) {
			t.Errorf("%s: %d %q, want %d and %q", c.name, code, msg, c.status, c.text)
		}
	}
	// Without a key: a snapshot request and a restore are refused (501),
	// the session goes on; the server metadata lists snapshots only with one.
	bare := start(t, serve.Config{})
	for _, c := range []struct {
		s    *started
		want bool
	}{{s, true}, {bare, false}} {
		_, _, b := call(t, "GET", c.s.url+"/v2", "")
		var md oip.ServerMetadata
		if err := json.Unmarshal(b, &md); err != nil || slices.Contains(md.Extensions, oip.SnapshotsExtension) != c.want {
			t.Errorf("server metadata %s, want %q listed: %v", b, oip.SnapshotsExtension, c.want)
		}
	}
	if _, code, msg := openSSE(t, bare, `{"parameters":{"task":"step","snapshot":"`+token+`"},`+input+`}`); code != 501 || !strings.Contains(msg, "-session-key-file") {
		t.Errorf("a restore without a key: %d %q", code, msg)
	}
	plain, code, msg := openSSE(t, bare, `{"parameters":{"task":"step","paced":false,"lockstep":true},`+input+`}`)
	if code != 200 {
		t.Fatal(code, msg)
	}
	plain.chunk(0)
	code, _, b = call(t, "POST", bare.url+plain.info.ControlsURL, `{"snapshot":true}`)
	if code != 501 || !strings.Contains(errorBody(t, b), "no session key") {
		t.Errorf("a snapshot without a key: %d %s", code, b)
	}
	if code, _, b = call(t, "POST", bare.url+plain.info.ControlsURL, `{"ack":0}`); code != 200 {
		t.Fatalf("ack: %d %s", code, b)
	}
	plain.chunk(1)
}

// TestSnapshotOverRawWebSocket speaks the WebSocket protocol with no
// wfgen client code: {"snapshot": true} is answered by a snapshot event
// (after the controls event of a message that sets controls too); the
// token restores on a new connection; a refused token closes the
// connection with 4000 + its status and the reason's text; a snapshot
// refused on a server without a key leaves the session going.
func TestSnapshotOverRawWebSocket(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{SessionKey: sessionKey})
	w, _, err := dialWS(t, s, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.sendText(wsWorldRequest)
	w.must(oip.EventSession)
	w.must(oip.EventChunk)
	w.sendText(`{"controls":{"left":1},"snapshot":true}`)
	w.must(oip.EventControls)
	msg, _ := w.must(oip.EventSnapshot)
	var info oip.SnapshotInfo
	if err := json.Unmarshal(msg.Data, &info); err != nil || info.Next != 1 {
		t.Fatalf("snapshot event %.200s: %v", msg.Data, err)
	}
	snap, err := stream.Open(info.Token, sessionKey)
	if err != nil || snap.Controls["left"] != 1 {
		t.Fatalf("the token: %+v, %v", snap.Controls, err)
	}
	w.sendText(`{"ack":0}`)
	_, want := w.must(oip.EventChunk)

	restore := func(tok []byte) *wsSession {
		r, _, err := dialWS(t, s, "tiny-world", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.sendText(`{"parameters":{"task":"step","paced":false,"snapshot":"` + base64.StdEncoding.EncodeToString(tok) + `"},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[2.5]}]}`)
		return r
	}
	r := restore(info.Token)
	r.must(oip.EventSession)
	if _, got := r.must(oip.EventChunk); !bytes.Equal(got, want) {
		t.Fatal("the restored session's chunk 1 differs from the live one's")
	}
	other, _ := stream.Seal(snap, []byte("another server's key, 32 bytes."))
	restore(other).refusedWith(oip.CloseCodeBase+400, "sealed with another key")
	moved := snap
	moved.Origin.Checkpoint = "file:/elsewhere"
	movedTok, _ := stream.Seal(moved, sessionKey)
	restore(movedTok).refusedWith(oip.CloseCodeBase+409, "its checkpoint is \"file:/elsewhere\"")

	bare := start(t, serve.Config{})
	b, _, err := dialWS(t, bare, "tiny-world", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.sendText(wsWorldRequest)
	b.must(oip.EventSession)
	b.must(oip.EventChunk)
	b.sendText(`{"snapshot":true}`)
	if msg, _ := b.must(oip.EventRefused); !strings.Contains(string(msg.Data), "no session key") {
		t.Errorf("refusal %s", msg.Data)
	}
	b.sendText(`{"ack":0}`)
	b.must(oip.EventChunk)
}

// TestSnapshotOverRawGRPC speaks ModelStreamInfer with no wfgen client
// code: snapshot: true is answered by a snapshot message holding the
// token, clear_controls sets none, and a start request with another
// key's token or another checkpoint's ends with InvalidArgument and
// FailedPrecondition.
func TestSnapshotOverRawGRPC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{SessionKey: sessionKey}))
	param := func(v any) *oippb.InferParameter {
		if b, ok := v.(bool); ok {
			return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: b}}
		}
		return &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: v.(string)}}
	}
	speed := make([]byte, 4)
	binary.LittleEndian.PutUint32(speed, math.Float32bits(3))
	open := func(extra map[string]*oippb.InferParameter) oippb.RealtimeInferenceService_ModelStreamInferClient {
		st, err := s.rt.ModelStreamInfer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p := map[string]*oippb.InferParameter{"task": param("step"), "paced": param(false), "lockstep": param(true)}
		for k, v := range extra {
			p[k] = v
		}
		if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{
			ModelName: "tiny-world", Parameters: p,
			Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "speed", Datatype: "FP32", Shape: []int64{1}}},
			RawInputContents: [][]byte{speed},
		}}}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	recv := func(st oippb.RealtimeInferenceService_ModelStreamInferClient) *oippb.ModelStreamInferResponse {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	st := open(map[string]*oippb.InferParameter{"controls": param(`{"right":1}`)})
	if recv(st).GetSession() == nil || recv(st).GetChunk() == nil {
		t.Fatal("no session and chunk")
	}
	st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Controls{Controls: &oippb.SessionControls{ClearControls: true, Snapshot: true}}})
	if c := recv(st).GetControls(); c == nil || len(c.GetControls()) != 0 {
		t.Fatalf("clear_controls: %v", c)
	}
	m := recv(st).GetSnapshot()
	if m == nil || m.GetNext() != 1 {
		t.Fatalf("snapshot: %v", m)
	}
	snap, err := stream.Open(m.GetToken(), sessionKey)
	if err != nil || len(snap.Controls) != 0 {
		t.Fatalf("the token: %v %v", snap.Controls, err)
	}
	other, _ := stream.Seal(snap, []byte("another server's key, 32 bytes."))
	moved := snap
	moved.Origin.Checkpoint = "file:/elsewhere"
	movedTok, _ := stream.Seal(moved, sessionKey)
	for _, c := range []struct {
		tok  []byte
		code codes.Code
		text string
	}{{other, codes.InvalidArgument, "another key"}, {movedTok, codes.FailedPrecondition, "its checkpoint is"}} {
		r := open(map[string]*oippb.InferParameter{"snapshot": param(base64.StdEncoding.EncodeToString(c.tok))})
		_, err := r.Recv()
		if st, _ := grpcstatus.FromError(err); st.Code() != c.code || !strings.Contains(st.Message(), c.text) {
			t.Errorf("%v, want %v and %q", err, c.code, c.text)
		}
	}
}
