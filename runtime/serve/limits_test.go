package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/serve"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// worldBody asks the tiny world for one small frame.
const worldBody = `{"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["a red fox"]},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[1]},{"name":"height","datatype":"INT64","shape":[1],"data":[16]},{"name":"width","datatype":"INT64","shape":[1],"data":[16]}]}`

// TestBodyAndTensorLimits sends a body over the size limit and a tensor
// over the tensor limit: each is refused with its status and error body,
// and the server goes on serving.
func TestBodyAndTensorLimits(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{MaxBodyBytes: 4096, MaxTensorBytes: 256})
	big := `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[3000],"data":[` + strings.Repeat("1,", 2999) + `1]}]}`
	code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", big)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(errorBody(t, b), "request body larger than the limit of 4096 bytes") {
		t.Errorf("body over the limit: %d %s", code, b)
	}
	tensor := `{"inputs":[{"name":"tokens","datatype":"INT64","shape":[40],"data":[` + strings.Repeat("1,", 39) + `1]}]}`
	code, _, b = call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", tensor)
	if code != http.StatusBadRequest || !strings.Contains(errorBody(t, b), "320 bytes, above the limit of 256 bytes per tensor") {
		t.Errorf("tensor over the limit: %d %s", code, b)
	}
	if code, _, b := call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody); code != 200 {
		t.Errorf("after the refusals: %d %s", code, b)
	}
}

// TestDeadlines checks a request past the server's deadline (504, its
// message counting from arrival), that the call it abandoned in the engine
// holds only its own model's slot (another model answers at once), a
// client deadline through the remote client (Run and RunBatch), and that
// the server drains the abandoned work. The tiny world's calls are held in
// the engine (a gate of the fake engine) until the test lets them go: each
// deadline passes while its call is in the engine, however fast or slow
// the machine.
func TestDeadlines(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Millisecond
	world, gate := gated(t)
	defer gate.Open()
	s := serveFamilies(t, serve.Config{Timeout: timeout}, onEngine(t, "tiny-world", world), plain(t, "tiny-encoder"))
	code, _, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody)
	if code != http.StatusGatewayTimeout || !strings.Contains(errorBody(t, b), fmt.Sprintf("deadline (%v from its arrival) passed before it finished", timeout)) {
		t.Errorf("past the deadline: %d %.200s", code, b)
	}
	// The abandoned call still holds the tiny world's engine slot (it is
	// still at the gate); the encoder has slots of its own. (Its first
	// calls, which TorchScript profiles, may not fit in the short
	// deadline, so it is retried; TestSlowModelDoesNotBlockAnother shows
	// the slots apart.)
	gate.Entered(t)
	for range 200 {
		code, _, b = call(t, "POST", s.url+"/v2/models/tiny-encoder/infer", embedBody)
		if code != http.StatusGatewayTimeout {
			break
		}
	}
	if code != 200 {
		t.Fatalf("another model after a 504: %d %s", code, b)
	}
	gate.Open()

	// The client's own deadline: the remote client gives up at it, while
	// the call it started is held in the engine.
	worldB, gateB := gated(t)
	defer gateB.Open()
	encB, gateEnc := gated(t)
	defer gateEnc.Open()
	s2 := serveFamilies(t, serve.Config{Batching: true, NoWarmup: true}, onEngine(t, "tiny-world", worldB), onEngine(t, "tiny-encoder", encB))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	_, err := remoteClient(t, s2, "tiny-world").Run(ctx, "generate", map[string]any{"prompt": "a red fox", "num_frames": int64(1), "height": int64(16), "width": int64(16)}, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("client deadline: %v", err)
	}
	items := make([]map[string]any, 5000)
	for i := range items {
		items[i] = map[string]any{"tokens": tokens(i, 8), "normalize": true}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	outs, err := remoteClient(t, s2, "tiny-encoder").RunBatch(ctx, "embed", items)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || outs != nil {
		t.Errorf("RunBatch deadline: %d outputs, %v", len(outs), err)
	}
	// Once the engine lets the abandoned calls go, nothing is left queued
	// or running: the server drains.
	gateB.Open()
	gateEnc.Open()
	sctx, scancel := context.WithTimeout(context.Background(), enginetest.Patience)
	defer scancel()
	if err := s2.srv.Shutdown(sctx); err != nil {
		t.Errorf("drain after abandoned requests: %v", err)
	}
}

// TestQueueLimit fills a one-request queue: while one request is in the
// engine (held there by the fake engine's gate), the requests beyond it
// are answered 429 with Retry-After at once and none hangs; the one
// admitted is answered once the engine lets it go.
func TestQueueLimit(t *testing.T) {
	t.Parallel()
	world, gate := gated(t)
	defer gate.Open()
	s := serveFamilies(t, serve.Config{MaxQueue: 1}, onEngine(t, "tiny-world", world))
	first := make(chan int, 1)
	go func() {
		code, _, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody)
		if code != 200 {
			t.Errorf("the admitted request: %d %s", code, b)
		}
		first <- code
	}()
	gate.Entered(t)
	const n = 11
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody)
			codes[i] = code
			if code == http.StatusTooManyRequests && (h.Get("Retry-After") == "" || !strings.Contains(errorBody(t, b), "too many requests queued")) {
				t.Errorf("429 without Retry-After or error body: %v %s", h, b)
			}
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusTooManyRequests {
			t.Errorf("request %d while the queue is full: status %d, want 429", i, c)
		}
	}
	gate.Open()
	enginetest.Receive(t, "the admitted request's answer", first)
	if code, _, b := call(t, "POST", s.url+"/v2/models/tiny-world/infer", worldBody); code != 200 {
		t.Errorf("after the queue emptied: %d %s", code, b)
	}
}

// TestCrossRequestBatching sends concurrent requests with the same shape
// and others with different shapes and flags: requests are merged into
// batches, each gets its own result (equal to running it alone), and
// requests that cannot share a forward call are never merged.
func TestCrossRequestBatching(t *testing.T) {
	t.Parallel()
	enc := inProcess(t, "tiny-encoder")
	eng, gate := gated(t)
	defer gate.Open()
	s := serveFamilies(t, serve.Config{Batching: true, BatchDelay: 250 * time.Millisecond, NoWarmup: true}, onEngine(t, "tiny-encoder", eng))
	re := remoteClient(t, s, "tiny-encoder")
	const n = 24
	var wg sync.WaitGroup
	// A first request keeps the batcher busy (held in the engine) while
	// the others queue.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := re.Run(context.Background(), "embed", map[string]any{"tokens": tokens(0, 9), "normalize": true}, nil); err != nil {
			t.Error(err)
		}
	}()
	gate.Entered(t)
	got := make([]map[string]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := re.Run(context.Background(), "embed", map[string]any{"tokens": tokens(i, 5+i%3), "normalize": i%4 != 0}, nil)
			if err != nil {
				t.Error(err)
			}
			got[i] = out
		}()
	}
	enginetest.WaitFor(t, "every request to be admitted", func() bool { return s.srv.Stats().Admitted == n+1 })
	gate.Open()
	wg.Wait()
	for i := range n {
		want, err := enc.Run(context.Background(), "embed", map[string]any{"tokens": tokens(i, 5+i%3), "normalize": i%4 != 0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got[i] == nil {
			continue
		}
		if d := maxDiff(t, want["embedding"].(*tensor.Tensor), got[i]["embedding"].(*tensor.Tensor)); d > 1e-6 {
			t.Errorf("request %d: differs from running it alone by %g", i, d)
		}
	}
	st := s.srv.Stats()
	t.Logf("%d requests in %d batches", st.BatchedRequests, st.Batches)
	if st.BatchedRequests != n+1 || st.Batches >= n || st.Batches < 7 {
		// 6 groups (3 lengths × normalize on/off) can never share a call,
		// nor with the long sequence.
		t.Errorf("stats %+v: want %d requests in fewer batches, and at least one per shape and flag", st, n)
	}
}

// TestShutdownUnderLoad shuts a real http.Server down while clients keep
// sending requests: every request the server ran was answered in full,
// every client call ends (nothing hangs), and later ones are refused
// cleanly.
func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			logs := &logSinkCounter{}
			srv, err := serve.New(serve.Config{Batching: batching, Logger: logs.logger()},
				serve.Family{Spec: loadSpec(t, "tiny-encoder"), Options: clientOptions(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if err := srv.Load(); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: srv}
			go hs.Serve(ln)
			url := "http://" + ln.Addr().String() + "/v2/models/tiny-encoder/infer"

			var answered, refused, failed atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					hc := &http.Client{Timeout: 10 * time.Second}
					for {
						select {
						case <-stop:
							return
						default:
						}
						resp, err := hc.Post(url, "application/json", strings.NewReader(embedBody))
						if err != nil {
							if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Timeout") {
								t.Errorf("a request hung: %v", err)
							}
							failed.Add(1) // refused connection or closed keep-alive: never ran
							return
						}
						b, rerr := io.ReadAll(resp.Body)
						resp.Body.Close()
						switch {
						case rerr != nil:
							t.Errorf("a response was cut: %v", rerr)
						case resp.StatusCode == 200:
							var r oip.InferenceResponse
							if json.Unmarshal(b, &r) != nil || len(r.Outputs) != 1 {
								t.Errorf("incomplete answer: %.100s", b)
							}
							answered.Add(1)
						case resp.StatusCode == http.StatusServiceUnavailable:
							refused.Add(1)
						default:
							t.Errorf("status %d: %s", resp.StatusCode, b)
						}
					}
				}()
			}
			// Shut down under load: once the clients have had answers.
			enginetest.WaitFor(t, "the clients to be answered", func() bool { return answered.Load() >= 16 })
			ctx, cancel := context.WithTimeout(context.Background(), enginetest.Patience)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- hs.Shutdown(ctx) }()
			if err := srv.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			if err := <-errc; err != nil {
				t.Error(err)
			}
			close(stop)
			wg.Wait()
			ran := logs.count(200)
			t.Logf("answered %d, refused %d (503), failed to connect %d; server ran %d", answered.Load(), refused.Load(), failed.Load(), ran)
			if answered.Load() == 0 || answered.Load() != ran {
				t.Errorf("the server ran %d requests, the clients got %d answers", ran, answered.Load())
			}
		})
	}
}

// logSinkCounter counts access log records by status.
type logSinkCounter struct {
	mu    sync.Mutex
	codes map[int]int64
}

func (l *logSinkCounter) Write(b []byte) (int, error) {
	var m struct {
		Path   string `json:"path"`
		Status int    `json:"status"`
	}
	if json.Unmarshal(b, &m) == nil && strings.HasSuffix(m.Path, "/infer") {
		l.mu.Lock()
		if l.codes == nil {
			l.codes = map[int]int64{}
		}
		l.codes[m.Status]++
		l.mu.Unlock()
	}
	return len(b), nil
}

func (l *logSinkCounter) count(code int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.codes[code]
}

func (l *logSinkCounter) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// TestFailedNewLeavesNothingRunning checks that New, failing partway (here
// on a second family of the same name), stops the batchers and workers it
// started: a failed New used to leave its batchers' goroutines running.
func TestFailedNewLeavesNothingRunning(t *testing.T) {
	spec := loadSpec(t, "tiny-encoder")
	before := runtime.NumGoroutine()
	for range 20 {
		_, err := serve.New(serve.Config{Batching: true, MaxConcurrent: 4},
			serve.Family{Spec: spec, Options: clientOptions(t)},
			serve.Family{Spec: spec, Options: clientOptions(t)})
		if err == nil || !strings.Contains(err.Error(), "two families are named") {
			t.Fatalf("New with one family twice: %v, want the duplicate name", err)
		}
	}
	// Goroutines end a little after New returns: a leak waits out
	// enginetest.Patience and fails.
	enginetest.WaitFor(t, fmt.Sprintf("the goroutines to return to the %d there were before 20 failed New calls (%d now)", before, runtime.NumGoroutine()),
		func() bool { return runtime.NumGoroutine() <= before })
}
