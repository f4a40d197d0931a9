package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func encoderSpec() *spec.ModelInferenceSpec {
	return &spec.ModelInferenceSpec{
		ModelFamilyID: "enc", DefaultVariantID: "v1", DefaultTaskID: "embed",
		Variants: []spec.InferenceVariantSpec{{VariantID: "v1", Aliases: []string{"latest"}}},
		Tasks: []spec.InferenceTaskProfile{{TaskID: "embed",
			Inputs: []spec.InferenceFieldSpec{
				{FieldID: "tokens", Kind: spec.KindTensor, Target: spec.TargetCallKwargs, Required: true},
				{FieldID: "tag", Kind: spec.KindString, Target: spec.TargetCallKwargs},
			},
			Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "embedding", Kind: spec.ArtifactEmbedding, Required: true}, {ArtifactID: "note", Kind: spec.ArtifactText}},
		}},
	}
}

func TestNewRejectsBadArguments(t *testing.T) {
	spec := encoderSpec()
	for _, c := range []struct {
		url  string
		opts []remote.Option
		want string
	}{
		{"localhost:8080", nil, "want http://, https://, grpc:// or grpcs://"},
		{"ftp://host", nil, "want http://, https://, grpc:// or grpcs://"},
		{"http://", nil, "want http://, https://, grpc:// or grpcs://"},
		{"http://h", []remote.Option{remote.WithVariant("v9")}, `no variant "v9"`},
		{"http://h", []remote.Option{remote.WithHTTPClient(nil)}, "nil http client"},
		{"http://h", []remote.Option{remote.WithModelName("")}, "empty model name"},
	} {
		if _, err := remote.New(spec, c.url, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q): %v, want %q", c.url, err, c.want)
		}
	}
	if _, err := remote.New(nil, "http://h"); err == nil {
		t.Error("nil spec accepted")
	}
	rc, err := remote.New(spec, "http://h/", remote.WithVariant("latest"))
	if err != nil || rc.Variant().VariantID != "v1" {
		t.Errorf("alias: %v %v", rc, err)
	}
}

// TestRunAgainstAnotherOIPServer runs against a minimal OIP server that is
// not wfserve and has no binary tensor data extension (so the client sends
// JSON tensors, WithJSONTensors): it names the model otherwise, answers
// nested data and an extra output, and sees exactly the protocol's request.
func TestRunAgainstAnotherOIPServer(t *testing.T) {
	var got oip.InferenceRequest
	var path, auth string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.URL.Path, r.Header.Get("Authorization")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, `{"error":"bad json"}`, 400)
			return
		}
		if len(got.Inputs) == 1 {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"tag is required here"}`)
			return
		}
		io.WriteString(w, `{"model_name":"encoder-v1","outputs":[
			{"name":"embedding","datatype":"FP32","shape":[2,2],"data":[[0.5,1],[-2,"NaN"]]},
			{"name":"note","datatype":"BYTES","shape":[1],"data":["ok"]},
			{"name":"debug","datatype":"INT64","shape":[1],"data":[7]}]}`)
	}))
	defer hs.Close()
	rc, err := remote.New(encoderSpec(), hs.URL+"/prefix", remote.WithModelName("encoder"), remote.WithVariant("v1"), remote.WithToken("t0k"), remote.WithJSONTensors())
	if err != nil {
		t.Fatal(err)
	}
	out, err := rc.Run(context.Background(), "embed", map[string]any{"tokens": tensor.FromInt64([]int64{4, 5}, 2), "tag": "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if path != "/prefix/v2/models/encoder/versions/v1/infer" || auth != "Bearer t0k" {
		t.Errorf("path %q auth %q", path, auth)
	}
	if got.Parameters["task"] != "embed" || len(got.Inputs) != 2 || got.Inputs[0].Datatype != oip.Int64 || string(got.Inputs[0].Data) != "[4,5]" || string(got.Inputs[1].Data) != `["x"]` {
		t.Errorf("request %+v", got)
	}
	emb := out["embedding"].(*tensor.Tensor)
	if v, _ := emb.Float32s(); len(v) != 4 || v[2] != -2 || v[3] == v[3] || out["note"] != "ok" || len(out) != 2 {
		t.Errorf("outputs %v %v", v, out)
	}
	_, err = rc.Run(context.Background(), "embed", map[string]any{"tokens": tensor.FromInt64([]int64{4}, 1)}, nil)
	var se *remote.StatusError
	if !errors.As(err, &se) || se.Status != 400 || se.Message != "tag is required here" || !strings.Contains(err.Error(), "enc/v1 embed (remote)") {
		t.Errorf("error answer: %v", err)
	}
	if _, err := rc.Run(context.Background(), "embed", map[string]any{"tokens": tensor.FromInt64([]int64{4}, 1), "extra": 1}, nil); err == nil || !strings.Contains(err.Error(), `kwarg "extra" is not a field`) {
		t.Errorf("unknown kwarg: %v", err)
	}
	if _, err := rc.RunBatch(context.Background(), "embed", nil); err == nil || !strings.Contains(err.Error(), "not batchable") {
		t.Errorf("RunBatch of a task without batching: %v", err)
	}
}

func worldSpec() *spec.ModelInferenceSpec {
	rt := spec.DefaultRealtimeSpec()
	rt.FPS, rt.FirstChunkFrames, rt.SteadyChunkFrames = 100, 1, 1
	return &spec.ModelInferenceSpec{
		ModelFamilyID: "w", DefaultVariantID: "v", DefaultTaskID: "step", Realtime: &rt,
		Variants: []spec.InferenceVariantSpec{{VariantID: "v"}},
		Tasks: []spec.InferenceTaskProfile{{TaskID: "step", Stream: true,
			Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "frames", Kind: spec.ArtifactVideo, Required: true}}}},
	}
}

// fakeSession is a WebSocket session server that plays a script of
// messages after the session event, recording what the client sends.
type fakeSession struct {
	*httptest.Server
	mu     sync.Mutex
	sent   []string      // the client's messages after its request
	ended  chan struct{} // closed when the session's handler returned
	params oip.Parameters
}

// msg is one scripted message: text, or binary data; in lockstep, sent
// once the client acked chunk ackBefore.
type msg struct {
	text      string
	binary    []byte
	ackBefore int
}

func wsServer(t *testing.T, script ...msg) *fakeSession {
	f := &fakeSession{ended: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(f.ended)
		if r.URL.Path != "/v2/models/w/stream" {
			t.Errorf("session at %s", r.URL.Path)
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{oip.SessionsSubprotocol}})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		var req oip.InferenceRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Error(err)
		}
		f.params = req.Parameters
		read := make(chan struct{})
		acks := make(chan int, 16)
		go func() {
			defer close(read)
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				f.mu.Lock()
				f.sent = append(f.sent, string(b))
				f.mu.Unlock()
				var cr oip.ControlsRequest
				if json.Unmarshal(b, &cr) == nil && cr.Ack != nil {
					acks <- int(*cr.Ack)
				}
				if strings.Contains(string(b), `"controls":{`) {
					c.Write(ctx, websocket.MessageText, []byte(`{"event":"controls","data":`+string(b)+`}`))
				}
			}
		}()
		c.Write(ctx, websocket.MessageText, []byte(`{"event":"session","data":{"id":"s1","controls_url":"/v2/models/w/sessions/s1"}}`))
		acked := -1
		for _, m := range script {
			for acked < m.ackBefore {
				select {
				case acked = <-acks:
				case <-read:
					return
				}
			}
			if m.binary != nil {
				c.Write(ctx, websocket.MessageBinary, m.binary)
			} else {
				c.Write(ctx, websocket.MessageText, []byte(m.text))
			}
		}
		c.Close(websocket.StatusNormalClosure, "")
		<-read
	}))
	return f
}

// chunk is the two messages of chunk i: its header and a frame of one
// pixel (i, 0, 0) per frame.
func chunk(i, frames int) []msg {
	data := make([]byte, 3*frames)
	for f := range frames {
		data[3*f] = byte(i)
	}
	header := fmt.Sprintf(`{"event":"chunk","data":{"model_name":"w","parameters":{"index":%d},"outputs":[{"name":"frames","datatype":"UINT8","shape":[%d,1,1,3],"parameters":{"binary_data_size":%d}}]}}`, i, frames, len(data))
	return []msg{{text: header, ackBefore: i - 1}, {binary: data, ackBefore: -1}}
}

func script(parts ...[]msg) []msg {
	var all []msg
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func TestStreamMessages(t *testing.T) {
	f := wsServer(t, script(chunk(0, 1), chunk(1, 1), chunk(2, 1), []msg{{text: `{"event":"end","data":{}}`, ackBefore: 2}})...)
	defer f.Close()
	rc, _ := remote.New(worldSpec(), f.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := rc.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for c, err := range sess.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Video.Frames.Data[0] != byte(n) {
			t.Errorf("chunk %d has frames of chunk %d", n, c.Video.Frames.Data[0])
		}
		if n == 0 {
			if err := sess.SetControls(stream.Controls{"left": 1}); err != nil {
				t.Error(err)
			}
		}
		n++
	}
	<-f.ended
	p := f.params
	if _, ok := p["stream"]; ok || p["paced"] != false || p["max_chunks"] != json.Number("3") || p["controls"] != "{}" || p["lockstep"] != true {
		t.Errorf("stream parameters %v", p)
	}
	// The controls go when they are set; each chunk after the first is
	// asked for by acking the one before (lockstep).
	if want := []string{`{"controls":{"left":1}}`, `{"controls":null,"ack":0}`, `{"controls":null,"ack":1}`}; n != 3 || !slices.Equal(f.sent, want) {
		t.Errorf("%d chunks, controls sent %v, want %v", n, f.sent, want)
	}

	// A server that fails, closes the session without ending it, or
	// sends what a session does not hold.
	for _, c := range []struct {
		script []msg
		want   string
	}{
		{script(chunk(0, 1), []msg{{text: `{"event":"error","data":{"error":"boom"}}`, ackBefore: 0}}), "server: boom"},
		{chunk(0, 1), "closed the session without ending it"},
		{script(chunk(0, 1), []msg{{text: `{"event":"odd","data":{}}`, ackBefore: 0}}), `unexpected event "odd"`},
		{chunk(0, 2), "2 frames, 1 were asked for"},
		{[]msg{{text: chunk(0, 1)[0].text, ackBefore: -1}, {text: "{}", ackBefore: -1}}, "a chunk's data is not a binary message"},
		{[]msg{{binary: []byte{1}, ackBefore: -1}}, "a binary message where an event was expected"},
	} {
		f := wsServer(t, c.script...)
		rc, _ := remote.New(worldSpec(), f.URL)
		sess, err := rc.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3))
		if err != nil {
			t.Fatal(err)
		}
		var last error
		for _, err := range sess.Chunks(ctx) {
			last = err
		}
		if last == nil || !strings.Contains(last.Error(), c.want) {
			t.Errorf("script %v: %v, want %q", c.script, last, c.want)
		}
		f.Close()
	}
}

// A server that keeps connections (oip.KeepAliveSessionsSubprotocol) but
// sends no end after a session's last chunk: the client has the chunk all
// the same, and keeps no connection it cannot trust — each session dials
// its own.
func TestStreamLastChunkWithoutEnd(t *testing.T) {
	defer remote.SetEndWait(time.Millisecond)()
	var conns atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns.Add(1)
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{oip.KeepAliveSessionsSubprotocol}})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		if _, _, err := c.Read(ctx); err != nil { // the request
			return
		}
		c.Write(ctx, websocket.MessageText, []byte(`{"event":"session","data":{"id":"s1","controls_url":"/v2/models/w/sessions/s1"}}`))
		for i := range 2 {
			if i > 0 {
				if _, _, err := c.Read(ctx); err != nil { // the ack
					return
				}
			}
			for _, m := range chunk(i, 1) {
				if m.binary != nil {
					c.Write(ctx, websocket.MessageBinary, m.binary)
				} else {
					c.Write(ctx, websocket.MessageText, []byte(m.text))
				}
			}
		}
		for { // no end; wait for the client to go
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}))
	defer hs.Close()
	rc, _ := remote.New(worldSpec(), hs.URL)
	defer rc.Close()
	// A connection kept without its end would leave the next session
	// waiting for a session event that never comes.
	ctx, cancel := context.WithTimeout(context.Background(), enginetest.Patience)
	defer cancel()
	for s := range 2 {
		sess, err := rc.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(2))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range sess.Chunks(ctx) {
			if err != nil {
				t.Fatalf("session %d, chunk %d: %v", s, n, err)
			}
			n++
		}
		if n != 2 {
			t.Errorf("session %d: %d chunks, want 2", s, n)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections for two sessions, want 2: one was kept without its end", n)
	}
}
