package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

const embedBody = `{"id":"req-1","inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"data":[1,2,3,4]}]}`

// TestEndpoints checks every endpoint with plain HTTP requests, as curl
// would send them: statuses, bodies and the protocol's error bodies.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	u := s.url
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string // a substring of the body
	}{
		{"GET", "/v2/health/live", "", 200, `{"live":true}`},
		{"GET", "/v2/health/ready", "", 200, `{"ready":true}`},
		{"GET", "/v2", "", 200, `"extensions":["sessions","binary_tensor_data"]`},
		{"GET", "/v2/", "", 200, `"name":"wfserve"`},
		{"GET", "/v2/models/tiny-encoder", "", 200, `"versions":["default"]`},
		{"GET", "/v2/models/tiny-world/versions/default", "", 200, `"default_task":"generate"`},
		{"GET", "/v2/models/tiny-world/ready", "", 200, `"ready":true`},
		{"GET", "/v2/models/tiny-world/versions/default/ready", "", 200, `"version":"default"`},
		{"POST", "/v2/models/tiny-encoder/infer", embedBody, 200, `"model_name":"tiny-encoder","model_version":"default@1","id":"req-1","parameters":{"task":"embed"},"outputs":[{"name":"embedding","shape":[64],"datatype":"FP32"`},
		{"POST", "/v2/models/tiny-encoder/versions/default/infer", embedBody, 200, `"datatype":"FP32"`},
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"text-to-video"},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["hi"]},{"name":"num_frames","datatype":"INT32","shape":[1],"data":[5]}],"outputs":[{"name":"video"}]}`, 200, `"shape":[5,32,32,3],"datatype":"UINT8"`},
		{"GET", "/openapi.json", "", 200, `"openapi": "3.1.0"`},
		{"GET", "/v2/models/tiny-world/openapi.json", "", 200, `"/v2/models/tiny-world/sessions/{session}"`},
		{"GET", "/v2/models/tiny-world/openapi.json", "", 200, `"/v2/models/tiny-world/sessions"`},
		{"GET", "/v2/models/tiny-world/sessions", "", 200, `{"open":0,"limit":16,"snapshots":false}`},
		{"POST", "/v2/models/tiny-world/sessions", "", 405, "use GET"},
		// Errors: the protocol's {"error": "..."} body.
		{"GET", "/v2/models/nope", "", 404, `no model \"nope\" (served: tiny-encoder, tiny-world)`},
		{"GET", "/v2/models/tiny-world/versions/v9", "", 404, `has no variant \"v9\"`},
		{"POST", "/v2/models/tiny-world/versions/v9/infer", embedBody, 404, `has no variant \"v9\"`},
		{"GET", "/v2/models/tiny-world/versions/v9/ready", "", 404, `has no variant`},
		{"GET", "/v2/models/tiny-world/infer", "", 405, "use POST"},
		{"POST", "/v2/health/live", "", 405, "use GET"},
		{"DELETE", "/v2/models/tiny-world", "", 405, "use GET"},
		{"GET", "/v3", "", 404, "under /v2"},
		{"GET", "/v2/repository/index", "", 405, "use POST"}, // the repository extension (repository.go) takes POST
		{"GET", "/v2/models/tiny-world/frobnicate", "", 404, "no endpoint"},
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[`, 400, "malformed request body"},
		{"POST", "/v2/models/tiny-encoder/infer", ``, 400, "empty body"},
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"data":[1,2,3]}]}`, 400, "data has 3 elements, shape [4] holds 4"},
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[{"name":"tokens","datatype":"FP64","shape":[1],"data":[1]}]}`, 400, "datatype FP64 has no runtime dtype"},
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[{"name":"normalize","datatype":"INT64","shape":[1],"data":[1]}]}`, 400, `input \"normalize\": datatype INT64, but field kind bool takes BOOL`},
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[]}`, 400, "missing required input(s) tokens"},
		{"POST", "/v2/models/tiny-encoder/infer", `{"parameters":{"task":"nope"},"inputs":[]}`, 400, `no task \"nope\"`},
		{"POST", "/v2/models/tiny-encoder/infer", `{"parameters":{"variant":"v2"},"inputs":[]}`, 400, `no variant \"v2\"`},
		{"POST", "/v2/models/tiny-encoder/infer", strings.Replace(embedBody, `"id"`, `"outputs":[{"name":"logits"}],"id"`, 1), 400, `output \"logits\" is not an artifact`},
		{"POST", "/v2/models/tiny-world/sessions/0123", `{"controls":{}}`, 404, "no open session"},
		{"GET", "/v2/models/tiny-world/sessions/0123", ``, 405, "use POST"},
		// Stream parameters are never ignored: stream=true on a task that
		// does not stream, stream settings without a stream, a stream
		// flag that is not a boolean.
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"generate","stream":true},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]}]}`, 400, `task \"generate\" is not a streaming task`},
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"generate","controls":{"right":1}},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]}]}`, 400, `parameter \"controls\" configures a stream`},
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"step","stream":"yes"},"inputs":[]}`, 400, `parameter \"stream\" must be a boolean`},
		// An unknown initial control is the client's error.
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"step","stream":true,"controls":{"up":1}},"inputs":[]}`, 400, `unknown control \"up\"`},
		// An empty token sequence is refused, not embedded into NaNs.
		{"POST", "/v2/models/tiny-encoder/infer", `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[0],"data":[]}]}`, 400, "dimension L is 0"},
		{"POST", "/v2/models/tiny-world/infer", `{"parameters":{"task":"step","stream":true,"max_chunks":-1},"inputs":[]}`, 400, `max_chunks`},
	} {
		code, h, body := call(t, c.method, u+c.path, c.body)
		if code != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %.300s\nwant %d and %q", c.method, c.path, code, body, c.status, c.want)
			continue
		}
		if code >= 400 {
			errorBody(t, body)
		}
		if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: Content-Type %q", c.method, c.path, ct)
		}
		if h.Get("X-Request-ID") == "" {
			t.Errorf("%s %s: no X-Request-ID", c.method, c.path)
		}
	}

	// The access log has one record per request, with its correlation id.
	code, h, _ := call(t, "GET", u+"/v2/models/tiny-encoder", "", "X-Request-ID", "trace-42")
	if code != 200 || h.Get("X-Request-ID") != "trace-42" {
		t.Errorf("X-Request-ID not echoed: %d %v", code, h)
	}
	found := false
	for _, r := range s.logs.all() {
		if r["request_id"] == "trace-42" && r["path"] == "/v2/models/tiny-encoder" && r["status"] == 200.0 && r["msg"] == "http request" {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log record for trace-42 in %v", s.logs.all())
	}
}

// TestStreamOverSSE opens a realtime session with plain HTTP, reads its
// events, sends controls to it and checks that it ends, and its controls
// URL with it, when the client goes away.
func TestStreamOverSSE(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	body := `{"parameters":{"task":"step","paced":false,"controls":{"right":1}},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[2.5]}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v2/models/tiny-world/infer", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	rd := bufio.NewReaderSize(resp.Body, 1<<20)
	next := func() (string, []byte) {
		var name string
		var data []byte
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				t.Fatalf("reading events: %v", err)
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
	name, data := next()
	var info oip.SessionInfo
	if name != oip.EventSession || json.Unmarshal(data, &info) != nil || len(info.ID) != 32 || info.Realtime["fps"] != 8.0 {
		t.Fatalf("first event %q %s", name, data)
	}
	for i := range 3 {
		name, data = next()
		var chunk oip.InferenceResponse
		if name != oip.EventChunk || json.Unmarshal(data, &chunk) != nil {
			t.Fatalf("event %q %.200s", name, data)
		}
		frames := 4
		if i > 0 {
			frames = 2
		}
		if chunk.Parameters[oip.ChunkIndex] != json.Number(fmt.Sprint(i)) || len(chunk.Outputs) != 1 || chunk.Outputs[0].Name != "frames" || chunk.Outputs[0].Shape[0] != int64(frames) {
			t.Errorf("chunk %d: %v %v", i, chunk.Parameters, chunk.Outputs[0].Shape)
		}
	}
	code, _, b := call(t, "POST", s.url+info.ControlsURL, `{"controls":{"forward":1}}`)
	if code != 200 || !strings.Contains(string(b), `"forward":1`) {
		t.Errorf("controls: %d %s", code, b)
	}
	code, _, b = call(t, "POST", s.url+info.ControlsURL, `{"controls":{"up":1}}`)
	if code != 400 || !strings.Contains(errorBody(t, b), `unknown control "up"`) {
		t.Errorf("bad control: %d %s", code, b)
	}
	code, _, b = call(t, "POST", s.url+info.ControlsURL, `{"controls":`)
	if code != 400 || !strings.Contains(errorBody(t, b), "malformed controls") {
		t.Errorf("malformed controls: %d %s", code, b)
	}
	code, _, _ = call(t, "POST", s.url+strings.Replace(info.ControlsURL, "tiny-world", "tiny-encoder", 1), `{"controls":{}}`)
	if code != 404 {
		t.Errorf("session under another model: %d", code)
	}
	// The client goes away: the session ends and its URL with it.
	cancel()
	enginetest.WaitFor(t, "the session to end after its client went away", func() bool {
		code, _, _ := call(t, "POST", s.url+info.ControlsURL, `{"controls":{}}`)
		return code == 404
	})
}

// TestBearerToken checks that every endpoint but the health probes needs
// the token.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Token: "s3cret"})
	for _, p := range []string{"/v2/health/live", "/v2/health/ready"} {
		if code, _, _ := call(t, "GET", s.url+p, ""); code != 200 {
			t.Errorf("%s without token: %d", p, code)
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v2", ""}, {"GET", "/v2/models/tiny-world", ""}, {"GET", "/openapi.json", ""},
		{"POST", "/v2/models/tiny-encoder/infer", embedBody}, {"POST", "/v2/models/tiny-world/sessions/x", "{}"},
	} {
		for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret", "Bearer", "Bearers3cret"} {
			code, h, b := call(t, c.method, s.url+c.path, c.body, "Authorization", auth)
			if code != 401 || h.Get("WWW-Authenticate") == "" || !strings.Contains(errorBody(t, b), "bearer token") {
				t.Errorf("%s %s with %q: %d %s", c.method, c.path, auth, code, b)
			}
		}
		// The scheme's name is case-insensitive (RFC 7235).
		for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER  s3cret"} {
			if code, _, b := call(t, c.method, s.url+c.path, c.body, "Authorization", auth); code == 401 {
				t.Errorf("%s %s with %q: %d %s", c.method, c.path, auth, code, b)
			}
		}
	}
}
