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
	"testing"

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
		{"localhost:8080", nil, "want http:// or https://"},
		{"ftp://host", nil, "want http:// or https://"},
		{"http://", nil, "want http:// or https://"},
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

// sseServer answers a stream with the given event text after the session
// event.
func sseServer(t *testing.T, events string, controls *[]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/sessions/") {
			b, _ := io.ReadAll(r.Body)
			*controls = append(*controls, string(b))
			io.WriteString(w, string(b))
			return
		}
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("stream request without Accept: text/event-stream")
		}
		var req oip.InferenceRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Parameters["stream"] != true || req.Parameters["paced"] != false || req.Parameters["max_chunks"] != json.Number("3") ||
			req.Parameters["controls"] != "{}" || req.Parameters["lockstep"] != true {
			t.Errorf("stream parameters %v", req.Parameters)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": a comment\r\nevent: session\r\ndata: {\"id\":\"s1\",\"controls_url\":\"/v2/models/w/sessions/s1\"}\r\n\r\n")
		io.WriteString(w, events)
	}))
}

func chunkEvent(i int) string {
	return fmt.Sprintf("event: chunk\ndata: {\"model_name\":\"w\",\"parameters\":{\"index\":%d},\"outputs\":[{\"name\":\"frames\",\"datatype\":\"UINT8\",\"shape\":[1,1,1,3],\"data\":[%d,0,0]}]}\n\n", i, i)
}

func TestStreamEvents(t *testing.T) {
	var controls []string
	hs := sseServer(t, chunkEvent(0)+chunkEvent(1)+chunkEvent(2)+"event: end\ndata: {}\n\n", &controls)
	defer hs.Close()
	rc, _ := remote.New(worldSpec(), hs.URL)
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
	// The controls go when they are set; each chunk after the first is
	// asked for by acking the one before (lockstep).
	if want := []string{`{"controls":{"left":1}}`, `{"controls":null,"ack":0}`, `{"controls":null,"ack":1}`}; n != 3 || !slices.Equal(controls, want) {
		t.Errorf("%d chunks, controls sent %v, want %v", n, controls, want)
	}

	// A server that fails, or closes the stream without ending it.
	for events, want := range map[string]string{
		chunkEvent(0) + "event: error\ndata: {\"error\":\"boom\"}\n\n": "server: boom",
		chunkEvent(0):                    "closed the stream without ending it",
		chunkEvent(0) + "event: odd\n\n": `unexpected event "odd"`,
		"event: chunk\ndata: {\"outputs\":[{\"name\":\"frames\",\"datatype\":\"UINT8\",\"shape\":[2,1,1,3],\"data\":[0,0,0,0,0,0]}]}\n\n": "2 frames, 1 were asked for",
	} {
		hs := sseServer(t, events, &controls)
		rc, _ := remote.New(worldSpec(), hs.URL)
		sess, err := rc.Stream(ctx, "step", nil, stream.WithPacing(false), stream.WithMaxChunks(3))
		if err != nil {
			t.Fatal(err)
		}
		var last error
		for _, err := range sess.Chunks(ctx) {
			last = err
		}
		if last == nil || !strings.Contains(last.Error(), want) {
			t.Errorf("events %q: %v, want %q", events, last, want)
		}
		hs.Close()
	}
}
