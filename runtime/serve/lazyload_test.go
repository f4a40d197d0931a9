package serve_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// A realtime session pins its model under the memory budget: with a
// budget that holds one of tiny-world and tiny-encoder, a request for the
// encoder while a tiny-world session runs waits, then is answered 503 at
// its deadline (the session keeps streaming); once the session ends the
// encoder loads, tiny-world is evicted, and readiness says so all along.
func TestSessionPinsItsModelUnderTheBudget(t *testing.T) {
	t.Parallel()
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(tiny.Dir(t), "checkpoints", name+".pt"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	budget := max(size("tiny-world"), size("tiny-encoder")) + 1
	s := start(t, serve.Config{ModelMemory: budget, Timeout: 300 * time.Millisecond})
	ready := func(name string) int {
		code, _, _ := call(t, http.MethodGet, s.url+"/v2/models/"+name+"/ready", "")
		return code
	}
	if ready("tiny-world") == 200 || ready("tiny-encoder") == 200 {
		t.Fatal("a model is ready before its first request")
	}
	if code, _, body := call(t, http.MethodGet, s.url+"/v2/health/ready", ""); code != 200 {
		t.Fatalf("server not ready: %d %s", code, body)
	}

	body := `{"parameters":{"task":"step","paced":true},"inputs":[{"name":"speed","datatype":"FP32","shape":[1],"data":[1]}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v2/models/tiny-world/infer", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	chunk := func() {
		t.Helper()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading events: %v", err)
			}
			if strings.HasPrefix(line, "event: chunk") {
				return
			}
		}
	}
	chunk()
	if ready("tiny-world") != 200 {
		t.Error("tiny-world not ready while its session runs")
	}
	code, h, out := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3))
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(string(out), "did not make room") {
		t.Errorf("the encoder while a session holds the budget: %d %v %s", code, h, out)
	}
	// The request's timeout parameter (microseconds) bounds the wait too.
	code, _, out = call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer",
		`{"parameters":{"timeout":20000},"inputs":[{"name":"tokens","datatype":"INT64","shape":[3],"data":[1,2,3]}]}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(out), "did not make room") {
		t.Errorf("the encoder with a timeout parameter: %d %s", code, out)
	}
	chunk() // the session streams on
	if ready("tiny-encoder") == 200 {
		t.Error("the encoder ready while it could not load")
	}
	cancel() // the session ends
	enginetest.WaitFor(t, "the encoder to answer once the session ended", func() bool {
		code, _, _ := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3))
		return code == http.StatusOK
	})
	if ready("tiny-encoder") != 200 || ready("tiny-world") == 200 {
		t.Errorf("after the swap: tiny-encoder ready %d, tiny-world ready %d", ready("tiny-encoder"), ready("tiny-world"))
	}
	code, _, idx := call(t, http.MethodPost, s.url+"/v2/repository/index", "")
	if code != 200 || !strings.Contains(string(idx), `"name":"tiny-world","version":"default","state":"UNAVAILABLE","reason":"tiny-world/default is not loaded (evicted; it loads on its next request)"`) {
		t.Errorf("index: %d %s", code, idx)
	}
}

// The gRPC health service follows lazy loads and keep-alive evictions: a
// Watch of tiny-encoder/default sees NOT_SERVING before its first request,
// SERVING once a request has loaded it, and NOT_SERVING again once it has
// been idle past its keep-alive; the server itself serves throughout.
func TestHealthFollowsLazyLoadsAndEvictions(t *testing.T) {
	t.Parallel()
	// A keep-alive long enough for the watch to see the load before the
	// eviction (a watch sends changes of the status it reads when woken).
	s := start(t, serve.Config{ModelKeepAlive: time.Second})
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
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "tiny-encoder/default"})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != want {
			t.Fatalf("watch: %v, want %v", r.Status, want)
		}
	}
	next(healthpb.HealthCheckResponse_NOT_SERVING)
	if code, _, body := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3)); code != http.StatusOK {
		t.Fatalf("infer: %d %s", code, body)
	}
	next(healthpb.HealthCheckResponse_SERVING)
	next(healthpb.HealthCheckResponse_NOT_SERVING) // idle past its keep-alive
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: ""}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("the server: %v %v", r, err)
	}
}
