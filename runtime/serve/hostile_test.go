package serve_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// The hostile suite of issue 31: what a client can make the server spend
// is bounded and counted from arrival. Waits are on events (a status, the
// server's counters, a closed connection), each under a generous bound
// that only a hang reaches; nothing asserts how long something took.

// rawRequest opens a connection and sends a request's head; the body, if
// any, is the caller's to send.
func rawRequest(t *testing.T, url, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readResponse reads one response from conn, failing the test when none
// comes within a minute (a hang).
func readResponse(t *testing.T, conn net.Conn) *http.Response {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	resp.Body.Close()
	return resp
}

const chunkedInfer = "POST /v2/models/tiny-encoder/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

// Bodies trickling a byte at a time hold their connections only until the
// request's deadline (408), never lock out the requests of others (which
// are admitted once their bodies are read), and never hold up a shutdown
// beyond that deadline.
func TestSlowBodiesDoNotLockOthersOut(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Timeout: 3 * time.Second, MaxQueue: 4})
	const tricklers = 16
	conns := make([]net.Conn, tricklers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		conns[i] = rawRequest(t, s.url, chunkedInfer)
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			for {
				if _, err := io.WriteString(c, "1\r\n \r\n"); err != nil {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}(conns[i])
	}
	defer func() { close(stop); wg.Wait() }()
	// Every trickler's first bytes are reserved: they are all being read.
	enginetest.WaitFor(t, "the trickling bodies to be read", func() bool { return s.srv.Stats().InflightBytes >= tricklers*64<<10 })
	for i := range 8 {
		if code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody); code != 200 {
			t.Fatalf("request %d while %d bodies trickle: %d %s", i, tricklers, code, b)
		}
	}
	for i, c := range conns {
		resp := readResponse(t, c)
		if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Errorf("trickler %d: %d %v, want 408 and the connection closed", i, resp.StatusCode, resp.Header)
		}
	}
	enginetest.WaitFor(t, "the in-flight bytes to return", func() bool { return s.srv.Stats().InflightBytes == 0 })
}

// A request without the token is answered 401 before its body is read:
// a client that never sends the body it announced gets its answer anyway.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Token: "s3cret"})
	for _, head := range []string{
		chunkedInfer,
		"POST /v2/models/tiny-encoder/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n",
	} {
		resp := readResponse(t, rawRequest(t, s.url, head))
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Errorf("%q: %d %v", head, resp.StatusCode, resp.Header)
		}
	}
}

// A keep-alive connection that sends nothing is closed after the idle
// timeout, so idle connections cannot be hoarded.
func TestIdleConnectionsClose(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{IdleTimeout: 100 * time.Millisecond})
	conn := rawRequest(t, s.url, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
	rd := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Errorf("after the idle timeout: %v, want the server to close the connection (EOF)", err)
	}
}

// A slow model's calls hold its own engine slot, never another model's:
// with tiny-world calls held in the engine (the fake engine's gate) and
// more queued behind them, the encoder still answers every request.
func TestSlowModelDoesNotBlockAnother(t *testing.T) {
	t.Parallel()
	world, gate := gated(t)
	defer gate.Open()
	s := serveFamilies(t, serve.Config{Timeout: 2 * time.Second}, onEngine(t, "tiny-world", world), plain(t, "tiny-encoder"))
	const slow = 40
	var wg sync.WaitGroup
	for range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody)
			if code != 200 && code != http.StatusGatewayTimeout {
				t.Errorf("slow request: %d %.200s", code, b)
			}
		}()
	}
	gate.Entered(t)
	enginetest.WaitFor(t, "the slow requests to be admitted", func() bool { return s.srv.Stats().Admitted >= slow/2 })
	for i := range 10 {
		if code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody); code != 200 {
			t.Errorf("encoder request %d behind %d held tiny-world ones: %d %s", i, slow, code, b)
		}
	}
	gate.Open()
	wg.Wait()
}

// Requests whose deadline passes while they wait in a batcher's queue
// leave it at once: later requests are never refused for the room they
// took.
func TestExpiredRequestsLeaveTheBatchQueue(t *testing.T) {
	t.Parallel()
	// The batch delay is longer than the test: a batch runs only when
	// every admitted request waits in the batcher, which the tiny-world
	// requests looping alongside prevent (their calls are held in the
	// engine), so the encoder requests wait in the queue until their
	// deadline.
	world, gate := gated(t)
	defer gate.Open()
	s := serveFamilies(t, serve.Config{Batching: true, BatchDelay: time.Hour, Timeout: 300 * time.Millisecond, MaxQueue: 8},
		plain(t, "tiny-encoder"), onEngine(t, "tiny-world", world))
	stop := make(chan struct{})
	var bg sync.WaitGroup
	for range 2 {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody)
			}
		}()
	}
	for wave := range 4 {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[%d],"data":[%s1]}]}`, 3+i, strings.Repeat("1,", 2+i))
				code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", body)
				if code == http.StatusTooManyRequests {
					t.Errorf("wave %d: 429 although the queue holds only expired requests: %s", wave, b)
				}
			}()
		}
		wg.Wait()
	}
	close(stop)
	gate.Open()
	bg.Wait()
	enginetest.WaitFor(t, "the admitted requests to be answered", func() bool { return s.srv.Stats().Admitted == 0 })
}

// Every refusal is logged with its error's text.
func TestAccessLogCarriesTheError(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", `{"inputs":[]}`, "X-Request-ID", "bad-1")
	enginetest.WaitFor(t, "the access log record", func() bool {
		for _, r := range s.logs.all() {
			if r["request_id"] == "bad-1" {
				return true
			}
		}
		return false
	})
	for _, r := range s.logs.all() {
		if r["request_id"] == "bad-1" && (r["status"] != 400.0 || !strings.Contains(fmt.Sprint(r["error"]), "missing required input(s) tokens")) {
			t.Errorf("access log record %v: want status 400 and the error", r)
		}
	}
}

// A body of small JSON values takes many times its size once decoded (an
// 8 MB {"inputs":[{},{},…]} took 585 MB): too many inputs are refused
// before anything is decoded, and what decoding the rest takes counts
// against the in-flight budget before it is decoded (429 when it does not
// fit, rather than the memory taken).
func TestJSONBodyDecodedWithinTheBudget(t *testing.T) {
	s := start(t, serve.Config{MaxBodyBytes: 8 << 20, MaxInflightBytes: 32 << 20})
	url := s.url + "/v2/models/tiny-encoder/infer"
	empty := `{"inputs":[` + strings.TrimSuffix(strings.Repeat("{},", 2_700_000), ",") + `]}`
	var code int
	var body []byte
	n := enginetest.Allocated(func() { code, _, body = call(t, "POST", url, empty) })
	if code != http.StatusBadRequest || !strings.Contains(errorBody(t, body), "2700000 inputs") {
		t.Errorf("2,700,000 empty inputs: %d %s", code, body)
	}
	if n > 64<<20 {
		t.Errorf("refusing 2,700,000 empty inputs allocated %d MB (the body is 8 MB)", n>>20)
	}
	keys := make([]string, 400_000)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"%x":0`, i)
	}
	params := `{"parameters":{` + strings.Join(keys, ",") + `},"inputs":[]}`
	code, _, body = call(t, "POST", url, params)
	if code != http.StatusTooManyRequests || !strings.Contains(errorBody(t, body), "in flight") {
		t.Errorf("400,000 parameters (%d bytes): %d %s", len(params), code, body)
	}
	enginetest.WaitFor(t, "the in-flight bytes to return", func() bool { return s.srv.Stats().InflightBytes == 0 })
}

// A compressed body is refused 415, saying to send it as it is (it was
// taken for malformed JSON).
func TestCompressedBodyRefused(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	code, h, body := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", "\x1f\x8b\x08\x00", "Content-Encoding", "gzip")
	if code != http.StatusUnsupportedMediaType || !strings.Contains(errorBody(t, body), "uncompressed") || h.Get("Accept-Encoding") != "identity" {
		t.Errorf("a gzip body: %d %v %s", code, h, body)
	}
}

// With -batch, a request's inputs are stacked into a batch padded to
// max_batch_size (invariant mode): the copies count in the in-flight
// budget, so that a request the budget takes alone is refused 429 rather
// than padded beyond it (one INT64[1,048,576] request took 2.4 GB).
func TestBatchPaddingCountsInTheBudget(t *testing.T) {
	t.Parallel()
	body := `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[2000],"data":[` + strings.TrimSuffix(strings.Repeat("1,", 2000), ",") + `]}]}`
	cfg := serve.Config{MaxBodyBytes: 64 << 10, MaxInflightBytes: 128 << 10}
	plainSrv := start(t, cfg)
	if code, _, b := call(t, "POST", plainSrv.url+"/v2/models/tiny-encoder/infer", body); code != http.StatusOK {
		t.Fatalf("without -batch: %d %s", code, b)
	}
	cfg.Batching, cfg.BatchInvariant = true, true
	batched := start(t, cfg)
	code, _, b := call(t, "POST", batched.url+"/v2/models/tiny-encoder/infer", body)
	if code != http.StatusTooManyRequests || !strings.Contains(errorBody(t, b), "in flight") {
		t.Errorf("with -batch, padded to 8 beyond the budget: %d %s", code, b)
	}
	enginetest.WaitFor(t, "the in-flight bytes to return", func() bool { return batched.srv.Stats().InflightBytes == 0 })
}
