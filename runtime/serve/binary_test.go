package serve_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/imagemodel"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

var (
	imageOnce sync.Once
	imageErr  error
)

// imageSpec returns the image classifier's spec, its checkpoint built
// beside the tiny ones.
func imageSpec(t testing.TB) *spec.ModelInferenceSpec {
	t.Helper()
	dir := tiny.Dir(t)
	imageOnce.Do(func() { imageErr = imagemodel.Build(dir) })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	f, diags, err := validate.File(imagemodel.Manifest())
	if err != nil || len(diags) > 0 {
		t.Fatalf("image classifier manifest: %v %v", err, diags)
	}
	return f.Spec
}

// startWithImage serves the demo families and the image classifier.
func startWithImage(t testing.TB, cfg serve.Config) *started {
	t.Helper()
	spec := imageSpec(t)
	logs := &logSink{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	srv, err := serve.New(cfg,
		serve.Family{Spec: loadSpec(t, "tiny-encoder"), Options: clientOptions(t)},
		serve.Family{Spec: loadSpec(t, "tiny-world"), Options: clientOptions(t)},
		serve.Family{Spec: spec, Options: clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	s := serveOn(t, srv)
	s.logs = logs
	return s
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serveOn serves srv on a loopback port.
func serveOn(t testing.TB, srv *serve.Server) *started {
	t.Helper()
	hs := srv.HTTPServer()
	ln := listen(t)
	go hs.Serve(ln)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &started{srv: srv, http: hs, url: "http://" + ln.Addr().String()}
}

// binaryBody returns the body of a request with the binary tensor data
// extension: the JSON part, then the parts, and the JSON part's length.
func binaryBody(header string, parts ...[]byte) (string, string) {
	return header + string(bytes.Join(parts, nil)), strconv.Itoa(len(header))
}

// bytesElems encodes BYTES elements in the extension's form.
func bytesElems(elems ...string) []byte {
	var b []byte
	for _, e := range elems {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	return b
}

func int64s(vals ...int64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// post sends a body with headers and returns the status, headers and body.
func post(t testing.TB, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	return call(t, "POST", url, body, header...)
}

// decodeAnswer decodes a 200 answer, binary or JSON.
func decodeAnswer(t testing.TB, h http.Header, b []byte) *oip.InferenceResponse {
	t.Helper()
	if hl := h.Get(oip.HeaderContentLength); hl != "" {
		n, err := strconv.ParseInt(hl, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := oip.DecodeBinaryResponse(b, n)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var resp oip.InferenceResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return &resp
}

// TestBinaryTensorData sends infer requests with the binary tensor data
// extension over HTTP, as curl or any OIP client would: binary inputs of
// every kind the demo families take (an INT64 tensor, a BOOL, BYTES, INT32
// scalars, a float32 image) alone or beside JSON ones, binary outputs asked
// for all at once or per output. The answers carry the extension's headers
// and equal the in-process client's outputs bit for bit, as the JSON
// answers do.
func TestBinaryTensorData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startWithImage(t, serve.Config{})
	enc, world := inProcess(t, "tiny-encoder"), inProcess(t, "tiny-world")
	img, err := client.New(imageSpec(t), clientOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()

	// Server metadata lists the extension.
	if code, _, b := call(t, "GET", s.url+"/v2", ""); code != 200 || !strings.Contains(string(b), `"`+oip.BinaryExtension+`"`) {
		t.Errorf("server metadata: %d %s", code, b)
	}

	// The tiny encoder: tokens and normalize binary, the embedding binary.
	want, err := enc.Run(ctx, "embed", map[string]any{"tokens": tensor.FromInt64([]int64{5, 6, 7, 8}, 4), "normalize": false}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, hl := binaryBody(`{"parameters":{"binary_data_output":true},"inputs":[`+
		`{"name":"tokens","datatype":"INT64","shape":[4],"parameters":{"binary_data_size":32}},`+
		`{"name":"normalize","datatype":"BOOL","shape":[1],"parameters":{"binary_data_size":1}}]}`,
		int64s(5, 6, 7, 8), []byte{0})
	code, h, b := post(t, s.url+"/v2/models/tiny-encoder/infer", body, oip.HeaderContentLength, hl, "Content-Type", oip.BinaryContentType)
	if code != 200 {
		t.Fatalf("binary embed: %d %s", code, b)
	}
	if h.Get("Content-Type") != oip.BinaryContentType || h.Get("Content-Length") != strconv.Itoa(len(b)) {
		t.Errorf("binary answer headers: %v", h)
	}
	resp := decodeAnswer(t, h, b)
	if n, _ := strconv.Atoi(h.Get(oip.HeaderContentLength)); len(b)-n != 64*4 || fmt.Sprint(resp.Outputs[0].Parameters[oip.BinaryDataSize]) != "256" || resp.Outputs[0].Data != nil {
		t.Errorf("binary embedding: %d bytes after the JSON part %s", len(b)-n, b[:n])
	}
	embed, _ := enc.Spec().Task("embed")
	got, err := oip.DecodeOutputs(embed, resp.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if !tensorsEqual(want["embedding"].(*tensor.Tensor), got["embedding"].(*tensor.Tensor)) {
		t.Error("binary embedding differs from in-process")
	}

	// The tiny world: a BYTES prompt and INT32 scalars binary beside a
	// JSON height; the video binary.
	wantVid, err := world.Run(ctx, "generate", map[string]any{"prompt": "a harbour at dusk", "seed": int64(3), "num_frames": int64(17), "height": int64(16)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seed := binary.LittleEndian.AppendUint32(nil, 3)
	frames := binary.LittleEndian.AppendUint32(nil, 17)
	prompt := bytesElems("a harbour at dusk")
	body, hl = binaryBody(fmt.Sprintf(`{"inputs":[`+
		`{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":%d}},`+
		`{"name":"seed","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}},`+
		`{"name":"height","datatype":"INT64","shape":[1],"data":[16]},`+
		`{"name":"num_frames","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}}],`+
		`"outputs":[{"name":"video","parameters":{"binary_data":true}}]}`, len(prompt)),
		prompt, seed, frames)
	code, h, b = post(t, s.url+"/v2/models/tiny-world/infer", body, oip.HeaderContentLength, hl)
	if code != 200 {
		t.Fatalf("binary generate: %d %s", code, b)
	}
	resp = decodeAnswer(t, h, b)
	gen, _ := world.Spec().Task("generate")
	got, err = oip.DecodeOutputs(gen, resp.Outputs)
	if err != nil {
		t.Fatal(err)
	}
	if v := got["video"].(*tensor.Tensor); !tensorsEqual(wantVid["video"].(*tensor.Tensor), v) || v.Shape[0] != 17 {
		t.Errorf("binary video differs from in-process: %v", v.Shape)
	}

	// binary_data false on the output overrides binary_data_output: a JSON
	// answer, equal all the same.
	body, hl = binaryBody(fmt.Sprintf(`{"parameters":{"binary_data_output":true},"inputs":[`+
		`{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":%d}},`+
		`{"name":"seed","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}},`+
		`{"name":"height","datatype":"INT64","shape":[1],"data":[16]},`+
		`{"name":"num_frames","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}}],`+
		`"outputs":[{"name":"video","parameters":{"binary_data":false}}]}`, len(prompt)),
		prompt, seed, frames)
	code, h, b = post(t, s.url+"/v2/models/tiny-world/infer", body, oip.HeaderContentLength, hl)
	if code != 200 || h.Get(oip.HeaderContentLength) != "" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("binary request, JSON answer: %d %v", code, h)
	}
	got, err = oip.DecodeOutputs(gen, decodeAnswer(t, h, b).Outputs)
	if err != nil || !tensorsEqual(wantVid["video"].(*tensor.Tensor), got["video"].(*tensor.Tensor)) {
		t.Errorf("JSON video differs from in-process: %v", err)
	}

	// The image classifier: a float32 [3, 224, 224] image, sent binary and
	// as JSON, gives the in-process logits bit for bit either way.
	classify, _ := img.Spec().Task("classify")
	image := imagemodel.Image(1)
	wantLogits, err := img.Run(ctx, "classify", map[string]any{"image": image}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []bool{true, false} {
		encode := oip.EncodeInputs
		if bin {
			encode = oip.EncodeInputsBinary
		}
		inputs, err := encode(classify, map[string]any{"image": image}, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := &oip.InferenceRequest{Inputs: inputs, Parameters: oip.Parameters{oip.BinaryDataOutput: bin}}
		header, data, err := req.EncodeBody()
		if err != nil {
			t.Fatal(err)
		}
		var hdr []string
		if bin {
			hdr = []string{oip.HeaderContentLength, strconv.Itoa(len(header))}
		}
		body, _ := binaryBody(string(header), data...)
		code, h, b := post(t, s.url+"/v2/models/image-classifier/infer", body, hdr...)
		if code != 200 {
			t.Fatalf("binary %v: %d %s", bin, code, b)
		}
		if bin && len(body) > 3*224*224*4+500 || !bin && len(body) < 3*224*224*8 {
			t.Errorf("binary %v: a body of %d bytes", bin, len(body))
		}
		got, err := oip.DecodeOutputs(classify, decodeAnswer(t, h, b).Outputs)
		if err != nil {
			t.Fatal(err)
		}
		if !tensorsEqual(wantLogits["logits"].(*tensor.Tensor), got["logits"].(*tensor.Tensor)) {
			t.Errorf("binary %v: logits differ from in-process", bin)
		}
	}
}

// TestBinaryTensorDataRefusals sends malformed bodies of the extension:
// each is a 400 with the protocol's error body saying what is wrong and
// where, never a 500.
func TestBinaryTensorDataRefusals(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	tokens := `{"name":"tokens","datatype":"INT64","shape":[4],"parameters":{"binary_data_size":%d}}`
	req := func(size int, more string) string {
		return `{"inputs":[` + fmt.Sprintf(tokens, size) + more + `]}`
	}
	four := int64s(1, 2, 3, 4)
	type c struct {
		model, header string // header: the JSON part; "" sends body as is
		parts         [][]byte
		hl            string // Inference-Header-Content-Length; "auto": the JSON part's length
		extra         []string
		want          string
	}
	for i, c := range []c{
		{"tiny-encoder", req(32, ""), [][]byte{four}, "abc", nil, `"abc" is not a length in bytes`},
		{"tiny-encoder", req(32, ""), [][]byte{four}, "-3", nil, `"-3" is not a length in bytes`},
		{"tiny-encoder", req(32, ""), [][]byte{four}, "0", nil, "raw binary request"},
		{"tiny-encoder", req(32, ""), [][]byte{four}, "9999", nil, "Inference-Header-Content-Length is 9999, past the end of the"},
		{"tiny-encoder", req(32, ""), [][]byte{four, {9}}, "auto", nil, "the inputs' binary_data_size add up to 32"},
		{"tiny-encoder", req(40, ""), [][]byte{four}, "auto", nil, `input "tokens": binary_data_size 40 runs past the body: 32 bytes`},
		{"tiny-encoder", req(24, ""), [][]byte{four[:24]}, "auto", nil, `input "tokens": binary_data_size 24, but INT64[4] takes 32 bytes`},
		{"tiny-encoder", req(-1, ""), [][]byte{four}, "auto", nil, `input "tokens": parameter binary_data_size must be a whole number of bytes, 0 or more, got the number -1`},
		{"tiny-encoder", `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"parameters":{"binary_data_size":"32"}}]}`, [][]byte{four}, "auto", nil, `got the string "32"`},
		{"tiny-encoder", `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"data":[1,2,3,4],"parameters":{"binary_data_size":32}}]}`, [][]byte{four}, "auto", nil, `input "tokens": it has both data and parameter binary_data_size`},
		{"tiny-encoder", req(32, ""), nil, "", nil, `input "tokens": parameter binary_data_size says its data are binary, but the request has no Inference-Header-Content-Length header`},
		{"tiny-encoder", req(32, ""), [][]byte{four}, "", []string{"Content-Type", oip.BinaryContentType}, "data after the JSON object (a body of type application/octet-stream carries binary tensor data after its JSON part, whose length goes in the Inference-Header-Content-Length header"},
		{"tiny-encoder", req(32, `,{"name":"normalize","datatype":"BOOL","shape":[1],"parameters":{"binary_data_size":1}}`), [][]byte{four, {2}}, "auto", nil, `input "normalize": element 0 is 2 (binary BOOL elements are 0 or 1)`},
		{"tiny-encoder", `{"inputs":[{"name":"tokens","datatype":"UINT64","shape":[1],"parameters":{"binary_data_size":8}}]}`, [][]byte{int64s(-1)}, "auto", nil, `input "tokens": datatype UINT64 has no runtime dtype`},
		{"tiny-world", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}}]}`, [][]byte{{100, 0, 0, 0, 'a', 'b', 'c'}}, "auto", nil, `input "prompt": BYTES element 0 is 100 bytes long, and 3 bytes of the binary data are left`},
		{"tiny-world", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":6}}]}`, [][]byte{bytesElems("ab")}, "auto", nil, `input "prompt": binary_data_size 6 cannot hold 2 BYTES elements`},
		{"tiny-world", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":6}}]}`, [][]byte{bytesElems("\xff\xfe")}, "auto", nil, `input "prompt": element 0 is not UTF-8 text`},
		{"tiny-world", `{"inputs":[{"name":"seed","datatype":"UINT64","shape":[1],"parameters":{"binary_data_size":8}},{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]}]}`, [][]byte{int64s(-1)}, "auto", nil, `input "seed": element 0 (18446744073709551615) is above the int64 range`},
		{"tiny-world", `{"parameters":{"binary_data_output":"yes"},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]}]}`, nil, "", nil, `parameter "binary_data_output" must be a boolean, got the string "yes"`},
		{"tiny-world", `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["x"]}],"outputs":[{"name":"video","parameters":{"binary_data":1}}]}`, nil, "", nil, `output "video": parameter "binary_data" must be a boolean, got the number 1`},
		{"tiny-world", `{"parameters":{"task":"step","stream":true,"binary_data_output":true},"inputs":[]}`, nil, "", nil, "binary outputs (parameters \"binary_data_output\", \"binary_data\") are not available in a stream"},
	} {
		body, hl := binaryBody(c.header, c.parts...)
		var hdr []string
		switch c.hl {
		case "":
		case "auto":
			hdr = append(hdr, oip.HeaderContentLength, hl)
		default:
			hdr = append(hdr, oip.HeaderContentLength, c.hl)
		}
		code, _, b := post(t, s.url+"/v2/models/"+c.model+"/infer", body, append(hdr, c.extra...)...)
		if code != 400 {
			t.Errorf("case %d: %d %s, want 400 %q", i, code, b, c.want)
			continue
		}
		if msg := errorBody(t, b); !strings.Contains(msg, c.want) {
			t.Errorf("case %d: %q, want %q", i, msg, c.want)
		}
	}
	// The header given twice.
	body, hl := binaryBody(req(32, ""), four)
	code, _, b := rawPost(t, s.url+"/v2/models/tiny-encoder/infer", body, http.Header{oip.HeaderContentLength: {hl, "3"}})
	if code != 400 || !strings.Contains(errorBody(t, b), "header Inference-Header-Content-Length is given 2 times") {
		t.Errorf("the header twice: %d %s", code, b)
	}
}

// rawPost posts a body with the headers h (values kept as given).
func rawPost(t testing.TB, url, body string, h http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// TestBinaryTensorDataLimits: a binary body is bounded and counted like a
// JSON one — over -max-body it is 413 before it is read, a tensor over
// -max-tensor is 400 before it is copied, and its bytes are reserved in
// the in-flight budget from its Content-Length, so a body that does not
// fit beside one being read is 429 at once.
func TestBinaryTensorDataLimits(t *testing.T) {
	t.Parallel()
	spec := imageSpec(t)
	image := imagemodel.Image(2)
	classify, _ := spec.Task("classify")
	inputs, err := oip.EncodeInputsBinary(classify, map[string]any{"image": image}, nil)
	if err != nil {
		t.Fatal(err)
	}
	header, data, err := (&oip.InferenceRequest{Inputs: inputs}).EncodeBody()
	if err != nil {
		t.Fatal(err)
	}
	body, hl := binaryBody(string(header), data...) // about 588 KiB
	newServer := func(cfg serve.Config) *started {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
		srv, err := serve.New(cfg, serve.Family{Spec: spec, Options: clientOptions(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Load(); err != nil {
			t.Fatal(err)
		}
		return serveOn(t, srv)
	}
	u := "/v2/models/image-classifier/infer"

	s := newServer(serve.Config{MaxBodyBytes: 512 << 10})
	if code, h, b := post(t, s.url+u, body, oip.HeaderContentLength, hl); code != 413 || !strings.Contains(errorBody(t, b), "larger than the limit of 524288 bytes") {
		t.Errorf("body over -max-body: %d %v %s", code, h, b)
	}
	s = newServer(serve.Config{MaxTensorBytes: 512 << 10})
	if code, _, b := post(t, s.url+u, body, oip.HeaderContentLength, hl); code != 400 || !strings.Contains(errorBody(t, b), `input "image": FP32[3 224 224] is 602112 bytes, above the limit of 524288 bytes per tensor`) {
		t.Errorf("tensor over -max-tensor: %d %s", code, b)
	}

	// In-flight bytes: 1 MiB bodies, a budget of 3 MiB. A 1 MiB body
	// being read holds 2 MiB; the image's ~0.6 MiB body needs 1.2 MiB more.
	s = newServer(serve.Config{MaxBodyBytes: 1 << 20, MaxInflightBytes: 3 << 20})
	conn := rawRequest(t, s.url, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%s: 10\r\nContent-Length: %d\r\n\r\n{\"inputs\"", u, oip.HeaderContentLength, 1<<20))
	enginetest.WaitFor(t, "the first body to be reserved", func() bool { return s.srv.Stats().InflightBytes >= 2<<20 })
	if code, h, b := post(t, s.url+u, body, oip.HeaderContentLength, hl); code != 429 || h.Get("Retry-After") == "" || !strings.Contains(errorBody(t, b), "the requests in flight hold") {
		t.Errorf("binary body beside one being read: %d %v %s", code, h, b)
	}
	conn.Close()
	enginetest.WaitFor(t, "the in-flight bytes to return", func() bool { return s.srv.Stats().InflightBytes == 0 })
	if code, _, b := post(t, s.url+u, body, oip.HeaderContentLength, hl); code != 200 {
		t.Errorf("binary body alone: %d %s", code, b)
	}
	enginetest.WaitFor(t, "the in-flight bytes to return", func() bool { return s.srv.Stats().InflightBytes == 0 })
}

// countingTransport records the requests a client sends and the answers
// it gets: content types and body sizes.
type countingTransport struct {
	mu                  sync.Mutex
	sent, got           []string // Content-Type of each request and answer
	sentBytes, gotBytes int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, r.Header.Get("Content-Type"))
	c.got = append(c.got, resp.Header.Get("Content-Type"))
	c.sentBytes += r.ContentLength
	c.gotBytes += resp.ContentLength
	return resp, nil
}

// TestRemoteBinaryTensors: the remote client sends tensor inputs binary
// and asks for binary outputs by default, and JSON with WithJSONTensors;
// the results are the in-process client's bit for bit either way, the
// binary bodies several times smaller.
func TestRemoteBinaryTensors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := startWithImage(t, serve.Config{})
	spec := imageSpec(t)
	img, err := client.New(spec, clientOptions(t)...)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	world := inProcess(t, "tiny-world")
	image := imagemodel.Image(3)
	wantLogits, err := img.Run(ctx, "classify", map[string]any{"image": image}, nil)
	if err != nil {
		t.Fatal(err)
	}
	genCall := map[string]any{"prompt": "lighthouse", "num_frames": int64(33), "height": int64(128), "width": int64(128)}
	wantVid, err := world.Run(ctx, "generate", genCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := inProcess(t, "tiny-encoder")
	items := make([]map[string]any, 11)
	for i := range items {
		items[i] = map[string]any{"tokens": tokens(i, 6), "normalize": true}
	}
	wantBatch, err := enc.RunBatch(ctx, "embed", items)
	if err != nil {
		t.Fatal(err)
	}
	var sizes [2][2]int64
	for j, opts := range [][]remote.Option{nil, {remote.WithJSONTensors()}} {
		ct := &countingTransport{}
		opts = append(opts, remote.WithHTTPClient(&http.Client{Transport: ct}))
		rimg, err := remote.New(spec, s.url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rworld := remoteClient(t, s, "tiny-world", opts...)
		logits, err := rimg.Run(ctx, "classify", map[string]any{"image": image}, nil)
		if err != nil {
			t.Fatal(err)
		}
		vid, err := rworld.Run(ctx, "generate", genCall, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !tensorsEqual(wantLogits["logits"].(*tensor.Tensor), logits["logits"].(*tensor.Tensor)) {
			t.Errorf("options %d: logits differ from in-process", j)
		}
		if !tensorsEqual(wantVid["video"].(*tensor.Tensor), vid["video"].(*tensor.Tensor)) {
			t.Errorf("options %d: video differs from in-process", j)
		}

		want := []string{oip.BinaryContentType, "application/json"}
		if j == 1 {
			want = []string{"application/json", "application/json"}
		}
		// The image request carries a tensor; the video request only
		// scalars, which stay JSON; both answers carry a tensor.
		if ct.sent[0] != want[0] || ct.sent[1] != "application/json" || ct.got[0] != want[0] || ct.got[1] != want[0] {
			t.Errorf("options %d: sent %v, got %v", j, ct.sent, ct.got)
		}
		sizes[j] = [2]int64{ct.sentBytes, ct.gotBytes}

		// A batch request (RunBatch: one request of 11 items) carries its
		// stacked tensors binary too.
		batchOut, err := remoteClient(t, s, "tiny-encoder", opts...).RunBatch(ctx, "embed", items)
		if err != nil {
			t.Fatal(err)
		}
		for i := range items {
			if !tensorsEqual(wantBatch[i]["embedding"].(*tensor.Tensor), batchOut[i]["embedding"].(*tensor.Tensor)) {
				t.Errorf("options %d: batch item %d differs from in-process", j, i)
			}
		}
		if len(ct.sent) != 3 || ct.sent[2] != want[0] || ct.got[2] != want[0] {
			t.Errorf("options %d: batch request sent %v, got %v", j, ct.sent, ct.got)
		}
	}
	t.Logf("bytes sent, received: binary %v, JSON %v", sizes[0], sizes[1])
	if sizes[0][0]*2 > sizes[1][0] || sizes[0][1]*2 > sizes[1][1] {
		t.Errorf("binary bodies %v are not less than half the JSON ones %v", sizes[0], sizes[1])
	}
}
