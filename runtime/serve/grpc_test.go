package serve_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// grpcStarted is a started server also serving gRPC on loopback, and a
// client connection to it.
type grpcStarted struct {
	*started
	addr string
	conn *grpc.ClientConn
	oip  oippb.GRPCInferenceServiceClient
	rt   oippb.RealtimeInferenceServiceClient
}

// withGRPC serves s's server over gRPC too, on a loopback port.
func withGRPC(t testing.TB, s *started) *grpcStarted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.srv.GRPCServer()
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &grpcStarted{started: s, addr: ln.Addr().String(), conn: conn,
		oip: oippb.NewGRPCInferenceServiceClient(conn), rt: oippb.NewRealtimeInferenceServiceClient(conn)}
}

// withToken is a context whose calls carry the bearer token.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// rawInt64 is the raw contents of int64 elements.
func rawInt64(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// rawString is the raw contents of one BYTES element.
func rawString(s string) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// embedRequest asks the tiny encoder to embed tokens, raw.
func embedRequest(tokens ...int64) *oippb.ModelInferRequest {
	return &oippb.ModelInferRequest{ModelName: "tiny-encoder", Id: "req-1",
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{int64(len(tokens))}}},
		RawInputContents: [][]byte{rawInt64(tokens...)}}
}

// code is the gRPC code of err.
func code(err error) codes.Code { return status.Code(err) }

// TestGrpcEveryRPC calls every RPC of the protocol's gRPC API on a server
// with a bearer token: the health probes without it, the others refused
// without it and answered with it; ModelInfer's outputs are the REST
// answer's and the in-process client's, bit for bit, with raw and typed
// input contents.
func TestGrpcEveryRPC(t *testing.T) {
	t.Parallel()
	s := withGRPC(t, start(t, serve.Config{Token: "sesame"}))
	ctx := context.Background()
	auth := withToken(ctx, "sesame")

	live, err := s.oip.ServerLive(ctx, &oippb.ServerLiveRequest{})
	if err != nil || !live.Live {
		t.Errorf("ServerLive without a token: %v %v", live, err)
	}
	ready, err := s.oip.ServerReady(ctx, &oippb.ServerReadyRequest{})
	if err != nil || !ready.Ready {
		t.Errorf("ServerReady without a token: %v %v", ready, err)
	}
	for name, call := range map[string]func(context.Context) error{
		"ServerMetadata": func(ctx context.Context) error {
			_, err := s.oip.ServerMetadata(ctx, &oippb.ServerMetadataRequest{})
			return err
		},
		"ModelReady": func(ctx context.Context) error {
			_, err := s.oip.ModelReady(ctx, &oippb.ModelReadyRequest{Name: "tiny-encoder"})
			return err
		},
		"ModelMetadata": func(ctx context.Context) error {
			_, err := s.oip.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "tiny-encoder"})
			return err
		},
		"ModelInfer": func(ctx context.Context) error {
			_, err := s.oip.ModelInfer(ctx, embedRequest(1, 2, 3, 4))
			return err
		},
		"ModelStreamInfer": func(ctx context.Context) error {
			st, err := s.rt.ModelStreamInfer(ctx)
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		},
	} {
		if err := call(ctx); code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "bearer token") {
			t.Errorf("%s without a token: %v", name, err)
		}
		if err := call(withToken(ctx, "wrong")); code(err) != codes.Unauthenticated {
			t.Errorf("%s with a wrong token: %v", name, err)
		}
	}

	md, err := s.oip.ServerMetadata(auth, &oippb.ServerMetadataRequest{})
	if err != nil || md.Name != "wfserve" || !strings.Contains(strings.Join(md.Extensions, ","), serve.RealtimeExtension) {
		t.Errorf("ServerMetadata: %v %v", md, err)
	}
	mr, err := s.oip.ModelReady(auth, &oippb.ModelReadyRequest{Name: "tiny-encoder", Version: "default"})
	if err != nil || !mr.Ready {
		t.Errorf("ModelReady: %v %v", mr, err)
	}
	if _, err := s.oip.ModelReady(auth, &oippb.ModelReadyRequest{Name: "nope"}); code(err) != codes.NotFound || !strings.Contains(err.Error(), `no model "nope"`) {
		t.Errorf("ModelReady of an unknown model: %v", err)
	}
	if _, err := s.oip.ModelReady(auth, &oippb.ModelReadyRequest{Name: "tiny-encoder", Version: "v9"}); code(err) != codes.NotFound {
		t.Errorf("ModelReady of an unknown version: %v", err)
	}

	// ModelMetadata is GET /v2/models/tiny-encoder's.
	mm, err := s.oip.ModelMetadata(auth, &oippb.ModelMetadataRequest{Name: "tiny-encoder"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, b := call(t, "GET", s.url+"/v2/models/tiny-encoder", "", "Authorization", "Bearer sesame")
	var rest oip.ModelMetadata
	if err := json.Unmarshal(b, &rest); err != nil {
		t.Fatal(err)
	}
	if mm.Name != rest.Name || mm.Platform != rest.Platform || strings.Join(mm.Versions, ",") != strings.Join(rest.Versions, ",") ||
		len(mm.Inputs) != len(rest.Inputs) || len(mm.Outputs) != len(rest.Outputs) {
		t.Errorf("ModelMetadata %v, REST %s", mm, b)
	}
	for i, in := range rest.Inputs {
		if g := mm.Inputs[i]; g.Name != in.Name || g.Datatype != string(in.Datatype) || !slicesEqual(g.Shape, in.Shape) {
			t.Errorf("input %d: %v, REST %v", i, g, in)
		}
	}
	var params map[string]any
	if err := json.Unmarshal([]byte(mm.Properties["parameters"]), &params); err != nil || params["tasks"] == nil {
		t.Errorf("ModelMetadata properties: %v", mm.Properties)
	}

	// ModelInfer, raw: the REST answer and the in-process client's.
	enc := inProcess(t, "tiny-encoder")
	want, err := enc.Run(ctx, "embed", map[string]any{"tokens": tensor.FromInt64([]int64{1, 2, 3, 4}, 4)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantVec := want["embedding"].(*tensor.Tensor)
	resp, err := s.oip.ModelInfer(auth, embedRequest(1, 2, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ModelName != "tiny-encoder" || resp.ModelVersion != "default@1" || resp.Id != "req-1" || resp.Parameters["task"].GetStringParam() != "embed" ||
		len(resp.Outputs) != 1 || resp.Outputs[0].Name != "embedding" || resp.Outputs[0].Datatype != "FP32" || len(resp.RawOutputContents) != 1 {
		t.Fatalf("ModelInfer: %v", resp)
	}
	if !slicesEqual(resp.Outputs[0].Shape, wantVec.Shape) || string(resp.RawOutputContents[0]) != string(wantVec.Data) {
		t.Errorf("ModelInfer's embedding %v differs from in-process %v", resp.Outputs[0].Shape, wantVec.Shape)
	}
	_, _, b = call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[4],"data":[1,2,3,4]}],"parameters":{"binary_data_output":true}}`,
		"Authorization", "Bearer sesame")
	if !strings.HasSuffix(string(b), string(resp.RawOutputContents[0])) {
		t.Errorf("ModelInfer's embedding differs from REST's binary one")
	}

	// Typed contents give the same answer; so does a version and a
	// "task" parameter.
	typed := &oippb.ModelInferRequest{ModelName: "tiny-encoder", ModelVersion: "default",
		Parameters: map[string]*oippb.InferParameter{"task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "embed"}}},
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{4},
			Contents: &oippb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4}}}}}
	resp2, err := s.oip.ModelInfer(auth, typed)
	if err != nil || string(resp2.RawOutputContents[0]) != string(wantVec.Data) {
		t.Errorf("typed contents: %v", err)
	}

	// The tiny world: a BYTES input and scalars, its video.
	world := inProcess(t, "tiny-world")
	wantW, err := world.Run(ctx, "generate", map[string]any{"prompt": "a red fox", "seed": int64(3), "num_frames": int64(5), "height": int64(16), "width": int64(16)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := s.oip.ModelInfer(auth, &oippb.ModelInferRequest{ModelName: "tiny-world",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "prompt", Datatype: "BYTES", Shape: []int64{1}},
			{Name: "seed", Datatype: "INT64", Shape: []int64{1}},
			{Name: "num_frames", Datatype: "INT64", Shape: []int64{1}},
			{Name: "height", Datatype: "INT64", Shape: []int64{1}},
			{Name: "width", Datatype: "INT64", Shape: []int64{1}},
		},
		RawInputContents: [][]byte{rawString("a red fox"), rawInt64(3), rawInt64(5), rawInt64(16), rawInt64(16)}})
	if err != nil {
		t.Fatal(err)
	}
	video := videoTensor(t, wantW["video"])
	if len(rw.Outputs) != 1 || !slicesEqual(rw.Outputs[0].Shape, video.Shape) || string(rw.RawOutputContents[0]) != string(video.Data) {
		t.Errorf("the tiny world's video differs from in-process: %v", rw.Outputs)
	}

	// Refusals: the REST statuses' codes.
	for _, c := range []struct {
		name string
		req  *oippb.ModelInferRequest
		code codes.Code
		msg  string
	}{
		{"unknown model", &oippb.ModelInferRequest{ModelName: "nope"}, codes.NotFound, `no model "nope"`},
		{"unknown version", &oippb.ModelInferRequest{ModelName: "tiny-encoder", ModelVersion: "v9"}, codes.NotFound, "v9"},
		{"unknown input", &oippb.ModelInferRequest{ModelName: "tiny-encoder",
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokenz", Datatype: "INT64", Shape: []int64{1}}}, RawInputContents: [][]byte{rawInt64(1)}}, codes.InvalidArgument, "tokenz"},
		{"raw size", &oippb.ModelInferRequest{ModelName: "tiny-encoder",
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{3}}}, RawInputContents: [][]byte{rawInt64(1)}}, codes.InvalidArgument, "takes 24 bytes"},
		{"raw count", &oippb.ModelInferRequest{ModelName: "tiny-encoder",
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{1}}}, RawInputContents: [][]byte{rawInt64(1), rawInt64(1)}}, codes.InvalidArgument, "one per input"},
		{"wrong contents", &oippb.ModelInferRequest{ModelName: "tiny-encoder",
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "INT64", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}}, codes.InvalidArgument, "int64_contents"},
		{"a stream", &oippb.ModelInferRequest{ModelName: "tiny-world",
			Parameters: map[string]*oippb.InferParameter{"task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "step"}}, "stream": {ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: true}}}}, codes.InvalidArgument, "ModelStreamInfer"},
	} {
		_, err := s.oip.ModelInfer(auth, c.req)
		if code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v naming %q", c.name, err, c.code, c.msg)
		}
	}
}

// videoTensor returns the tensor of a video output.
func videoTensor(t testing.TB, v any) *tensor.Tensor {
	t.Helper()
	switch x := v.(type) {
	case *tensor.Video:
		return x.Frames
	case *tensor.Tensor:
		return x
	}
	t.Fatalf("not a video: %T", v)
	return nil
}

// TestGrpcLimits checks the server's bounds over gRPC: a tensor above
// MaxTensorBytes is InvalidArgument, a message above MaxBodyBytes and a
// request beyond the in-flight budget or the queue ResourceExhausted, a
// call past the server's deadline or the client's DeadlineExceeded.
func TestGrpcLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := withGRPC(t, start(t, serve.Config{MaxTensorBytes: 64}))
	tokens := make([]int64, 9) // 72 bytes: above MaxTensorBytes
	if _, err := s.oip.ModelInfer(ctx, embedRequest(tokens...)); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a tensor above MaxTensorBytes: %v", err)
	}
	if _, err := s.oip.ModelInfer(ctx, embedRequest(1, 2, 3)); err != nil {
		t.Errorf("a request within the limits: %v", err)
	}
	b := withGRPC(t, start(t, serve.Config{MaxBodyBytes: 4 << 10, MaxInflightBytes: 8 << 10}))
	if _, err := b.oip.ModelInfer(ctx, embedRequest(make([]int64, 600)...)); code(err) != codes.ResourceExhausted {
		t.Errorf("a message above MaxBodyBytes (4.8 KB): %v", err)
	}
	// 2 × its 4 KB message and its 4 KB tensor: beyond the 8 KiB budget.
	if _, err := b.oip.ModelInfer(ctx, embedRequest(make([]int64, 500)...)); code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("a request beyond the in-flight budget: %v", err)
	}
	if _, err := b.oip.ModelInfer(ctx, embedRequest(make([]int64, 100)...)); err != nil {
		t.Errorf("a request within the budget: %v", err)
	}

	// The server's deadline passes while a call is held in the engine.
	world, gate := gated(t)
	defer gate.Open()
	const timeout = 50 * time.Millisecond
	g := withGRPC(t, serveFamilies(t, serve.Config{Timeout: timeout}, onEngine(t, "tiny-world", world), plain(t, "tiny-encoder")))
	worldReq := &oippb.ModelInferRequest{ModelName: "tiny-world",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "prompt", Datatype: "BYTES", Shape: []int64{1}}, {Name: "num_frames", Datatype: "INT64", Shape: []int64{1}},
			{Name: "height", Datatype: "INT64", Shape: []int64{1}}, {Name: "width", Datatype: "INT64", Shape: []int64{1}}},
		RawInputContents: [][]byte{rawString("a red fox"), rawInt64(1), rawInt64(16), rawInt64(16)}}
	if _, err := g.oip.ModelInfer(ctx, worldReq); code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "deadline (50ms from its arrival) passed") {
		t.Errorf("past the server's deadline: %v", err)
	}
	gate.Open()

	// The client giving up, then the queue, the engine held again:
	// the abandoned call holds the engine slot; the next call is
	// admitted and waits for it, holding the one place in the queue; the
	// one after is refused at once.
	world2, gate2 := gated(t)
	defer gate2.Open()
	g2 := withGRPC(t, serveFamilies(t, serve.Config{MaxQueue: 1}, onEngine(t, "tiny-world", world2), plain(t, "tiny-encoder")))
	// The client gives up once its call is in the engine (a 20 ms
	// deadline could pass before the call got there on a loaded machine,
	// and then nothing would hold the engine).
	cctx, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, err := g2.oip.ModelInfer(cctx, worldReq)
		abandoned <- err
	}()
	gate2.Entered(t)
	cancel()
	if err := enginetest.Receive(t, "the abandoned call's answer", abandoned); code(err) != codes.Canceled {
		t.Errorf("a call the client gave up on: %v", err)
	}
	enginetest.WaitFor(t, "the abandoned call to leave the queue", func() bool { return g2.srv.Stats().Admitted == 0 })
	queued := make(chan error, 1)
	go func() {
		_, err := g2.oip.ModelInfer(ctx, worldReq)
		queued <- err
	}()
	enginetest.WaitFor(t, "a call to be admitted", func() bool { return g2.srv.Stats().Admitted == 1 })
	if _, err := g2.oip.ModelInfer(ctx, worldReq); code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "too many requests") {
		t.Errorf("beyond MaxQueue: %v", err)
	}
	gate2.Open()
	if err := enginetest.Receive(t, "the queued call", queued); err != nil {
		t.Errorf("the queued call: %v", err)
	}
}

// TestGrpcMetricsAndLogs checks that gRPC calls show in the metrics — per
// method and gRPC code, and ModelInfer per model, task and the status its
// answer would have over REST — and in the access log.
func TestGrpcMetricsAndLogs(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token}))
	ctx := withToken(context.Background(), token)
	for range 3 {
		if _, err := s.oip.ModelInfer(ctx, embedRequest(1, 2, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.oip.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "tiny-encoder",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "tokens", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}}); code(err) != codes.InvalidArgument {
		t.Fatalf("a bad request: %v", err)
	}
	if _, err := s.oip.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "nope"}); code(err) != codes.NotFound {
		t.Fatalf("an unknown model: %v", err)
	}
	if _, err := s.oip.ModelInfer(context.Background(), embedRequest(1)); code(err) != codes.Unauthenticated {
		t.Fatalf("without the token: %v", err)
	}
	const infer = "/inference.GRPCInferenceService/ModelInfer"
	waitMetrics(t, s.url, token, check(
		want{"wfserve_grpc_requests_total", map[string]string{"method": infer, "code": "OK"}, 3},
		want{"wfserve_grpc_requests_total", map[string]string{"method": infer, "code": "InvalidArgument"}, 1},
		want{"wfserve_grpc_requests_total", map[string]string{"method": infer, "code": "NotFound"}, 1},
		want{"wfserve_grpc_requests_total", map[string]string{"method": infer, "code": "Unauthenticated"}, 1},
		want{"wfserve_requests_total", mtc("tiny-encoder", "embed", "200"), 3},
		want{"wfserve_requests_total", mtc("tiny-encoder", "embed", "400"), 1},
		want{"wfserve_requests_total", mtc("_unknown", "_unknown", "404"), 1},
	))
	var found bool
	for _, r := range s.logs.all() {
		if r["msg"] == "grpc request" && r["method"] == infer && r["code"] == "NotFound" && strings.Contains(r["error"].(string), `no model "nope"`) && r["request_id"] != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log record of the refused call: %v", s.logs.all())
	}
}

// GRPCServer starts its stream workers with the server, so their number is
// bounded whatever -max-queue an operator sets: 20,000 admitted requests do
// not start 20,000 goroutines.
func TestGRPCServerWorkersBounded(t *testing.T) {
	s, err := serve.New(serve.Config{MaxQueue: 20_000}, plain(t, "tiny-encoder"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := runtime.NumGoroutine()
	gs := s.GRPCServer()
	defer gs.Stop()
	if n := runtime.NumGoroutine() - before; n > 300 {
		t.Errorf("GRPCServer with MaxQueue 20,000 started %d goroutines, want at most 300", n)
	}
}
