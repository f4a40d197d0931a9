package serve_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip/oippb"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// h2Client is a raw HTTP/2 connection to a gRPC server, for what no gRPC
// client sends: part of a message, and then nothing. Its reader keeps the
// frames the server sends, and answers its settings and pings.
type h2Client struct {
	t    testing.TB
	conn net.Conn
	mu   sync.Mutex // writes
	fr   *http2.Framer
	next uint32 // the next stream id

	fmu     sync.Mutex
	windows map[uint32]uint32 // window the server opened per stream (WINDOW_UPDATE)
	status  map[uint32]string // grpc-status the server answered per stream
	message map[uint32]string // grpc-message
	resets  map[uint32]http2.ErrCode
	changed chan struct{} // closed and replaced at each frame
}

func dialH2(t testing.TB, addr string) *h2Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &h2Client{t: t, conn: conn, fr: http2.NewFramer(conn, conn), next: 1,
		windows: map[uint32]uint32{}, status: map[uint32]string{}, message: map[uint32]string{},
		resets: map[uint32]http2.ErrCode{}, changed: make(chan struct{})}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go c.read()
	return c
}

func (c *h2Client) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		c.fmu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.fr.WriteSettingsAck()
				c.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.fr.WritePing(true, f.Data)
				c.mu.Unlock()
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID != 0 {
				c.windows[f.StreamID] += f.Increment
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				switch hf.Name {
				case "grpc-status":
					c.status[f.StreamID] = hf.Value
				case "grpc-message":
					c.message[f.StreamID] = hf.Value
				}
			}
		case *http2.RSTStreamFrame:
			c.resets[f.StreamID] = f.ErrCode
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.fmu.Unlock()
	}
}

// open starts a call of method with the metadata md (name, value pairs)
// and returns its stream id.
func (c *h2Client) open(method string, md ...string) uint32 {
	c.t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "wfserve"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(md); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: md[i], Value: md[i+1]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// send writes data on stream id in frames of at most 16 KiB, as far as the
// flow-control window the test leaves unchecked allows the server to take.
func (c *h2Client) send(id uint32, data []byte) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(data) > 0 {
		n := min(len(data), 16<<10)
		if err := c.fr.WriteData(id, false, data[:n]); err != nil {
			c.t.Fatal(err)
		}
		data = data[n:]
	}
}

// prefix is the 5-byte gRPC message prefix of a message of n bytes.
func prefix(n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(n))
}

// waitStatus waits until stream id is answered and returns its grpc-status
// and grpc-message.
func (c *h2Client) waitStatus(id uint32) (string, string) {
	c.t.Helper()
	deadline := time.After(enginetest.Patience)
	for {
		c.fmu.Lock()
		st, msg, ch := c.status[id], c.message[id], c.changed
		c.fmu.Unlock()
		if st != "" {
			return st, msg
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("stream %d: no answer after %v", id, enginetest.Patience)
		}
	}
}

// window is what the server opened of stream id's window so far.
func (c *h2Client) window(id uint32) uint32 {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.windows[id]
}

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
	c := dialH2(t, s.addr)
	const method = "/inference.GRPCInferenceService/ModelInfer"
	var ids []uint32
	for range 16 {
		id := c.open(method)
		c.send(id, append(prefix(8_000_000), make([]byte, 32<<10)...))
		ids = append(ids, id)
	}
	wrong := c.open(method, "authorization", "Bearer nope")
	c.send(wrong, append(prefix(8_000_000), make([]byte, 32<<10)...))
	ids = append(ids, wrong)
	for _, id := range ids {
		if st, msg := c.waitStatus(id); st != fmt.Sprint(int(codes.Unauthenticated)) || !strings.Contains(msg, "bearer token") {
			t.Errorf("stream %d: grpc-status %s %q, want Unauthenticated", id, st, msg)
		}
		if w := c.window(id); w > 0 {
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
	c := dialH2(t, s.addr)
	const method = "/inference.GRPCInferenceService/ModelInfer"
	auth := []string{"authorization", "Bearer " + token}
	var ids []uint32
	for range 3 {
		id := c.open(method, auth...)
		c.send(id, append(prefix(maxBody-100), make([]byte, 1024)...))
		ids = append(ids, id)
	}
	// Two calls reserve what their messages may take, and their windows
	// open; the third waits for the budget with its window closed.
	enginetest.WaitFor(t, "two calls to take their messages", func() bool {
		opened := 0
		for _, id := range ids {
			if c.window(id) >= maxBody/2 {
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
		if st, msg := c.waitStatus(id); st != fmt.Sprint(int(codes.DeadlineExceeded)) && st != fmt.Sprint(int(codes.ResourceExhausted)) {
			t.Errorf("stream %d: grpc-status %s %q, want DeadlineExceeded or ResourceExhausted", id, st, msg)
		}
	}
	enginetest.WaitFor(t, "the budget to be given back", func() bool { return s.srv.Stats().InflightBytes == 0 })
	// And the server answers as before.
	if _, err := s.oip.ModelInfer(withToken(context.Background(), token), embedRequest(1, 2, 3)); err != nil {
		t.Errorf("after the trickling calls: %v", err)
	}
}

// rawBytesCodec sends a message's bytes as they are: what a client that
// sends malformed or hostile protobuf sends.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }
func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
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
		return s.conn.Invoke(ctx, method, &msg, &out, grpc.ForceCodecV2(rawBytesCodec{}))
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
