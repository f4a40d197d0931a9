package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// Calls without the token, each declaring an 8 MB message and sending part
// of it, are refused from their headers: the server answers Unauthenticated
// while their messages are still arriving, never opens their windows to
// take the rest, and logs and counts each refusal. (Before, grpc-go read
// and decoded a call's whole message before the token was checked: 128
// such calls held 1 GB for as long as their clients wished.)
func TestGrpcUnauthenticatedMessageIsNotRead(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token, MaxBodyBytes: 8 << 20}))
	c := enginetest.DialH2(t, s.addr)
	const method = "/inference.GRPCInferenceService/ModelInfer"
	var ids []uint32
	for range 16 {
		id := c.Open(method)
		c.Send(id, append(enginetest.GRPCPrefix(8_000_000), make([]byte, 32<<10)...))
		ids = append(ids, id)
	}
	wrong := c.Open(method, "authorization", "Bearer nope")
	c.Send(wrong, append(enginetest.GRPCPrefix(8_000_000), make([]byte, 32<<10)...))
	ids = append(ids, wrong)
	for _, id := range ids {
		if st, msg := c.WaitStatus(id); st != fmt.Sprint(int(codes.Unauthenticated)) || !strings.Contains(msg, "bearer token") {
			t.Errorf("stream %d: grpc-status %s %q, want Unauthenticated", id, st, msg)
		}
		if w := c.Window(id); w > 0 {
			t.Errorf("stream %d: the server opened its window by %d bytes to read its message", id, w)
		}
	}
	if n := s.srv.Stats().InflightBytes; n != 0 {
		t.Errorf("refused calls hold %d bytes of the budget", n)
	}
	waitMetrics(t, s.url, token, check(
		want{"wfserve_grpc_requests_total", map[string]string{"method": method, "code": "Unauthenticated"}, float64(len(ids))}))
	var logged int
	for _, r := range s.logs.all() {
		if r["msg"] == "grpc request" && r["method"] == method && r["code"] == "Unauthenticated" {
			logged++
		}
	}
	if logged != len(ids) {
		t.Errorf("%d access log records of the %d refused calls", logged, len(ids))
	}
}

// A call may carry one authorization value: twenty thousand, one of them
// right, is refused (before, any value that matched let the call in).
func TestGrpcOneAuthorizationValue(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token}))
	md := metadata.MD{"authorization": make([]string, 0, 20_001)}
	for range 20_000 {
		md["authorization"] = append(md["authorization"], "Bearer guess")
	}
	md["authorization"] = append(md["authorization"], "Bearer "+token)
	ctx := metadata.NewOutgoingContext(context.Background(), md)
	if _, err := s.oip.ModelInfer(ctx, embedRequest(1, 2, 3)); code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "send one") {
		t.Errorf("20,001 authorization values: %v", err)
	}
	if _, err := s.oip.ModelInfer(withToken(context.Background(), token), embedRequest(1, 2, 3)); err != nil {
		t.Errorf("the token alone: %v", err)
	}
}

// An authenticated call whose message stops arriving is answered
// DeadlineExceeded at the server's deadline from its arrival, and gives
// back what it held; while it arrives it holds the largest message's bytes
// (twice, as a REST body), so that calls whose messages arrive at once
// never hold more than the budget between them: with a budget of two such
// reservations, a third call's message is not taken until one of them is
// answered.
func TestGrpcMessagesArriveWithinTheBudget(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	const maxBody = 1 << 20
	s := withGRPC(t, start(t, serve.Config{Token: token, MaxBodyBytes: maxBody, MaxInflightBytes: 4 * maxBody, Timeout: time.Second}))
	c := enginetest.DialH2(t, s.addr)
	const method = "/inference.GRPCInferenceService/ModelInfer"
	auth := []string{"authorization", "Bearer " + token}
	var ids []uint32
	for range 3 {
		id := c.Open(method, auth...)
		c.Send(id, append(enginetest.GRPCPrefix(maxBody-100), make([]byte, 1024)...))
		ids = append(ids, id)
	}
	// Two calls reserve what their messages may take, and their windows
	// open; the third waits for the budget with its window closed.
	enginetest.WaitFor(t, "two calls to take their messages", func() bool {
		opened := 0
		for _, id := range ids {
			if c.Window(id) >= maxBody/2 {
				opened++
			}
		}
		return opened == 2
	})
	if n := s.srv.Stats().InflightBytes; n != 4*maxBody {
		t.Errorf("two arriving messages hold %d bytes, want %d", n, 4*maxBody)
	}
	// At the deadline the two are answered and the third takes its turn,
	// to be answered at its own deadline.
	for _, id := range ids {
		if st, msg := c.WaitStatus(id); st != fmt.Sprint(int(codes.DeadlineExceeded)) && st != fmt.Sprint(int(codes.ResourceExhausted)) {
			t.Errorf("stream %d: grpc-status %s %q, want DeadlineExceeded or ResourceExhausted", id, st, msg)
		}
	}
	enginetest.WaitFor(t, "the budget to be given back", func() bool { return s.srv.Stats().InflightBytes == 0 })
	// And the server answers as before.
	if _, err := s.oip.ModelInfer(withToken(context.Background(), token), embedRequest(1, 2, 3)); err != nil {
		t.Errorf("after the trickling calls: %v", err)
	}
}

// A malformed message is InvalidArgument, logged and counted (it was
// Internal, and neither); 8 MB of empty inputs entries is refused before
// it is decoded (it took 306 MB to decode).
func TestGrpcHostileMessages(t *testing.T) {
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token, MaxBodyBytes: 8 << 20, MaxInflightBytes: 32 << 20}))
	ctx := withToken(context.Background(), token)
	const method = "/inference.GRPCInferenceService/ModelInfer"
	call := func(msg []byte) error {
		var out []byte
		return s.conn.Invoke(ctx, method, &msg, &out, grpc.ForceCodecV2(enginetest.RawCodec{}))
	}
	if err := call([]byte{0x2a, 0x05, 0x0a}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a truncated message: %v", err)
	}
	// 4 M empty inputs entries: field 5, length 0.
	empty := bytes.Repeat(protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), nil), 4_000_000)
	var err error
	n := enginetest.Allocated(func() { err = call(empty) })
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "4000000 inputs") {
		t.Errorf("4,000,000 empty inputs: %v", err)
	}
	// The message itself, on both sides of the loopback connection and in
	// the server's copy: a few times its 8 MB, not the hundreds of MB its
	// inputs would have taken.
	if n > 64<<20 {
		t.Errorf("refusing 4,000,000 empty inputs allocated %d MB", n>>20)
	}
	waitMetrics(t, s.url, token, check(
		want{"wfserve_grpc_requests_total", map[string]string{"method": method, "code": "InvalidArgument"}, 2}))
	var logged bool
	for _, r := range s.logs.all() {
		if r["msg"] == "grpc request" && r["method"] == method && r["code"] == "InvalidArgument" && strings.Contains(fmt.Sprint(r["error"]), "malformed protobuf") {
			logged = true
		}
	}
	if !logged {
		t.Error("no access log record of the malformed message")
	}
}

// A request parameter the server does not read is refused, naming the
// ones it reads (an 8 MB "pad" parameter opened a session), over REST and
// gRPC alike.
func TestUnknownParameterRefused(t *testing.T) {
	t.Parallel()
	s := withGRPC(t, start(t, serve.Config{}))
	status, _, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer",
		`{"parameters":{"task":"step","stream":true,"pad":"xxxx"},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[1]}]}`)
	if msg := errorBody(t, b); status != 400 || !strings.Contains(msg, `unknown request parameter "pad"`) || !strings.Contains(msg, "max_chunks") {
		t.Errorf("REST: %d %s", status, msg)
	}
	r := embedRequest(1, 2, 3)
	r.Parameters = map[string]*oippb.InferParameter{"Task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "embed"}}}
	if _, err := s.oip.ModelInfer(context.Background(), r); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"Task"`) {
		t.Errorf("gRPC: %v", err)
	}
}
