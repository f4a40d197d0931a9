package serve_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// unpacedWorld is a tiny-world session of unpaced chunks until its client
// goes away, as JSON.
const unpacedWorld = `{"parameters":{"task":"step","paced":false},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[2.5]}]}`

// openSilent opens an unpaced tiny-world session on each transport (SSE,
// WebSocket, gRPC) from a client that reads nothing of it, and returns
// once all three are open.
func openSilent(t *testing.T, s *grpcStarted, token string) {
	t.Helper()
	// SSE: the request, then never a read.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "POST /v2/models/tiny-world/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		token, len(unpacedWorld), unpacedWorld)
	// WebSocket: the request, then never a read.
	ws, _, err := websocket.Dial(context.Background(), s.url+"/v2/models/tiny-world/stream", &websocket.DialOptions{
		Subprotocols: []string{oip.SessionsSubprotocol}, HTTPHeader: map[string][]string{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(unpacedWorld)); err != nil {
		t.Fatal(err)
	}
	// gRPC: the start message, then never a window for the server's
	// messages beyond HTTP/2's first 64 KiB.
	speed := binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))
	start, err := proto.Marshal(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{
		ModelName: "tiny-world",
		Parameters: map[string]*oippb.InferParameter{"task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "step"}},
			"paced": {ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: false}}},
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "speed", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{speed}}}})
	if err != nil {
		t.Fatal(err)
	}
	h2 := enginetest.DialH2(t, s.addr)
	id := h2.Open("/wfgen.realtime.RealtimeInferenceService/ModelStreamInfer", "authorization", "Bearer "+token)
	h2.Send(id, append(enginetest.GRPCPrefix(len(start)), start...))
	enginetest.WaitFor(t, "the three sessions to open", func() bool { return s.srv.Stats().Sessions == 3 })
}

// A session whose client stops reading loses its session, and its place
// among MaxSessions, once a message has waited 10 s to reach it — on every
// transport (SSE and gRPC sessions kept theirs for as long
// as the client held the connection).
func TestSessionClientThatStopsReading(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token}))
	openSilent(t, s, token)
	enginetest.WaitFor(t, "the sessions of clients that do not read to end", func() bool { return s.srv.Stats().Sessions == 0 })
}

// Shutdown does not wait for sessions whose clients stopped reading: their
// writes are cut once the shutdown grace has passed (an SSE or gRPC session
// held the drain to its timeout; a WebSocket one, for 30 s).
func TestShutdownCutsSessionsThatDoNotRead(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token, IdleTimeout: time.Hour}))
	openSilent(t, s, token)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown with sessions whose clients do not read: %v", err)
	}
	if n := s.srv.Stats().Sessions; n != 0 {
		t.Errorf("%d sessions still open after the drain", n)
	}
}

// A gRPC session whose step is still in the engine when the shutdown
// grace ends is answered as the drain answers it, Unavailable "shutting
// down", not Canceled as though its client had gone (the cut of writes
// cancelled the call first; on a loaded machine wfserve's SIGTERM test saw
// it).
func TestGrpcSessionStepOutlastsTheShutdownGrace(t *testing.T) {
	t.Parallel()
	world, gate := gated(t)
	defer gate.Open()
	g := withGRPC(t, serveFamilies(t, serve.Config{}, onEngine(t, "tiny-world", world), plain(t, "tiny-encoder")))
	st, err := g.rt.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	speed := binary.LittleEndian.AppendUint32(nil, math.Float32bits(2.5))
	if err := st.Send(&oippb.ModelStreamInferRequest{Message: &oippb.ModelStreamInferRequest_Start{Start: &oippb.ModelInferRequest{
		ModelName:        "tiny-world",
		Parameters:       map[string]*oippb.InferParameter{"task": {ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "step"}}},
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "speed", Datatype: "FP32", Shape: []int64{1}}},
		RawInputContents: [][]byte{speed}}}}); err != nil {
		t.Fatal(err)
	}
	gate.Entered(t) // the first step, held in the engine
	drained := make(chan error, 1)
	go func() { drained <- g.srv.Shutdown(context.Background()) }()
	// The grace is a second; the step outlasts it. (Were the machine so
	// slow that the cut came later, the test would pass whatever the
	// answer: it cannot fail wrongly.)
	time.Sleep(3 * time.Second)
	gate.Open()
	err = nil
	for err == nil {
		_, err = st.Recv() // the session message, a chunk made before the drain, then the end
	}
	if code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("the session whose step outlasted the shutdown grace: %v", err)
	}
	if err := enginetest.Receive(t, "the drain", drained); err != nil {
		t.Error(err)
	}
}

// A WebSocket session's messages count against the in-flight budget as
// they arrive, not once whole: clients that each send part of a large
// first message and then nothing hold no more than the budget between
// them, and those beyond it are refused 4429 (the server held each whole
// message in memory before it counted it: 64 × 8 MB took 400 MB).
func TestWebSocketMessagesArriveWithinTheBudget(t *testing.T) {
	t.Parallel()
	const budget = 8 << 20
	s := start(t, serve.Config{MaxBodyBytes: 4 << 20, MaxInflightBytes: budget})
	part := make([]byte, 3<<20)
	refused := make(chan string, 4)
	for range 4 {
		ws, _, err := websocket.Dial(context.Background(), s.url+"/v2/models/tiny-world/stream", &websocket.DialOptions{Subprotocols: []string{oip.SessionsSubprotocol}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		w, err := ws.Writer(context.Background(), websocket.MessageText)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			w.Write(part) // and never the rest
			_, b, err := ws.Read(context.Background())
			refused <- fmt.Sprintf("%s %v", b, websocket.CloseStatus(err))
		}()
	}
	r := enginetest.Receive(t, "a refused session", refused)
	if !strings.Contains(r, "in flight") {
		t.Errorf("the refusal: %s", r)
	}
	if n := s.srv.Stats().InflightBytes; n == 0 || n > budget {
		t.Errorf("the arriving messages hold %d bytes of the %d-byte budget", n, budget)
	}
}

// Requests whose payload is still arriving when the server drains are
// answered at once — 503 over REST and the WebSocket, Canceled over gRPC
// (grpc-go answers a call whose message read ends so itself) — instead of
// holding the drain to its timeout (their deadline, -timeout, is longer)
// and then losing their connection unanswered.
func TestShutdownAnswersRequestsStillArriving(t *testing.T) {
	t.Parallel()
	const token = "sesame"
	s := withGRPC(t, start(t, serve.Config{Token: token, Timeout: time.Hour}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v2/models/tiny-encoder/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"inputs\":", token)
	h2 := enginetest.DialH2(t, s.addr)
	id := h2.Open("/inference.GRPCInferenceService/ModelInfer", "authorization", "Bearer "+token)
	h2.Send(id, append(enginetest.GRPCPrefix(1000), 0x0a, 0x02))
	ws, _, err := websocket.Dial(context.Background(), s.url+"/v2/models/tiny-world/stream", &websocket.DialOptions{
		Subprotocols: []string{oip.SessionsSubprotocol}, HTTPHeader: map[string][]string{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// The REST body's 2 × 1000 bytes and the gRPC message's 2 × -max-body
	// are held while they arrive.
	enginetest.WaitFor(t, "the two payloads to be arriving", func() bool {
		return s.srv.Stats().InflightBytes == 2*1000+2*serve.DefaultMaxBodyBytes
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown with payloads still arriving: %v", err)
	}
	resp := readResponse(t, conn)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the REST request still arriving: %d", resp.StatusCode)
	}
	if st, msg := h2.WaitStatus(id); st != fmt.Sprint(int(codes.Canceled)) {
		t.Errorf("the gRPC call still arriving: grpc-status %s %q", st, msg)
	}
	_, b, err := ws.Read(context.Background())
	if !strings.Contains(string(b), "shutting down") {
		t.Errorf("the WebSocket session not yet requested: %s %v", b, err)
	}
}
