package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/stream"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// haproxyConfig is the load balancer of docs/serving.md ("Scale-out"):
// round robin over the replicas without affinity, readiness checks every
// 100 ms, a failed connection tried again on the other replica, the
// WebSocket upgrade passed through; the response names the replica (for
// the test). gRPC has a frontend of its own, HTTP/2 on both sides, each
// call balanced on its own, the replicas' readiness checked on their REST
// port.
const haproxyConfig = `global
  stats socket %s level admin

defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 1h
  retries 2
  option redispatch 1

frontend wfserve
  bind 127.0.0.1:%d
  default_backend replicas

backend replicas
  balance roundrobin
  option httpchk GET /v2/health/ready
  http-check expect status 200
  http-response set-header X-Replica %%[srv_name]
  server r1 127.0.0.1:%d check inter 100ms fall 1 rise 1
  server r2 127.0.0.1:%d check inter 100ms fall 1 rise 1

frontend wfserve_grpc
  bind 127.0.0.1:%d proto h2
  default_backend replicas_grpc

backend replicas_grpc
  balance roundrobin
  option httpchk GET /v2/health/ready
  http-check expect status 200
  server r1 127.0.0.1:%d proto h2 check port %d check-proto h1 inter 100ms fall 1 rise 1
  server r2 127.0.0.1:%d proto h2 check port %d check-proto h1 inter 100ms fall 1 rise 1
`

// haproxyPath finds haproxy, or skips.
func haproxyPath(t *testing.T) string {
	t.Helper()
	return enginetest.Tool(t, "haproxy", "/usr/sbin/haproxy", "Debian's haproxy; scripts/setup.sh installs it")
}

// balancer is haproxy running in front of two wfserve replicas.
type balancer struct {
	url, grpcAddr string // its REST frontend's URL, its gRPC frontend's address
	admin         string // its runtime API's socket
}

// startHAProxy runs Debian's haproxy in front of the replicas r1 and r2,
// configured by config (haproxyConfig, or a variant of it)
// and returns it once it answers readiness. Its frontends' ports must be
// written in its configuration, so they are reserved (enginetest.Port);
// should a program outside the tests hold one all the same, haproxy is
// started again on others.
func startHAProxy(t *testing.T, config string, r1, r2 *wfserveProc) *balancer {
	t.Helper()
	for attempt := 1; ; attempt++ {
		lb, bindFailed := tryHAProxy(t, config, r1, r2)
		if lb != nil {
			return lb
		}
		if !bindFailed || attempt == 3 {
			t.Fatal("haproxy did not start")
		}
	}
}

// tryHAProxy is one start of startHAProxy: the balancer, or nil and
// whether haproxy failed to bind a frontend's port.
func tryHAProxy(t *testing.T, config string, r1, r2 *wfserveProc) (*balancer, bool) {
	t.Helper()
	bin := haproxyPath(t)
	dir := t.TempDir()
	fe, feGRPC := enginetest.Port(t), enginetest.Port(t)
	lb := &balancer{url: fmt.Sprintf("http://127.0.0.1:%d", fe), grpcAddr: fmt.Sprintf("127.0.0.1:%d", feGRPC), admin: filepath.Join(dir, "admin.sock")}
	p1, g1 := replicaPorts(t, r1)
	p2, g2 := replicaPorts(t, r2)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, lb.admin, fe, p1, p2, feGRPC, g1, p1, g2, p2), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", cfg)
	var out enginetest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	var gone bool
	enginetest.WaitFor(t, "haproxy to serve", func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		resp, err := http.Get(lb.url + "/v2/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if gone {
		t.Logf("haproxy exited:\n%s", out.String())
		return nil, strings.Contains(out.String(), "cannot bind socket")
	}
	return lb, false
}

// replicaPorts are a replica's REST and gRPC ports.
func replicaPorts(t *testing.T, r *wfserveProc) (rest, grpc int) {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, g, err := net.SplitHostPort(r.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	rest, _ = strconv.Atoi(p)
	grpc, _ = strconv.Atoi(g)
	return rest, grpc
}

// setReplica points the balancer's server name (r1, r2) at the replica r,
// through haproxy's runtime API, as an operator does when a replica comes
// back on another port.
func (lb *balancer) setReplica(t *testing.T, name string, r *wfserveProc) {
	t.Helper()
	rest, grpc := replicaPorts(t, r)
	for _, cmd := range []string{
		fmt.Sprintf("set server replicas/%s addr 127.0.0.1 port %d", name, rest),
		fmt.Sprintf("set server replicas_grpc/%s addr 127.0.0.1 port %d", name, grpc),
		fmt.Sprintf("set server replicas_grpc/%s check-port %d", name, rest),
	} {
		c, err := net.Dial("unix", lb.admin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		answer, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if a := strings.TrimSpace(string(answer)); a != "" && !strings.Contains(a, "changed from") {
			t.Fatalf("haproxy's runtime API: %s: %s", cmd, a)
		}
	}
}

// replicasSeen sends readiness probes through the balancer until every
// replica named answered one.
func replicasSeen(t *testing.T, url string, names ...string) {
	t.Helper()
	seen := map[string]bool{}
	enginetest.WaitFor(t, fmt.Sprintf("the balancer to route to %v", names), func() bool {
		resp, err := http.Get(url + "/v2/health/ready")
		if err == nil {
			resp.Body.Close()
			seen[resp.Header.Get("X-Replica")] = resp.StatusCode == 200
		}
		for _, n := range names {
			if !seen[n] {
				return false
			}
		}
		return true
	})
}

// load runs the tiny encoder's Embed from 32 clients through the balancer
// until stop is closed, each client checking every answer against want;
// started is closed once every client had an answer. It returns the
// answers and the failures.
func load(enc *tinyencoder.Client, p tinyencoder.EmbedParams, want []byte, stop <-chan struct{}, started chan<- struct{}) (ok, failed int64, errs []string) {
	const clients = 32
	var nOK, nFailed atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first sync.WaitGroup
	first.Add(clients)
	go func() { first.Wait(); close(started) }()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(first.Done)
			defer once()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := enc.Embed(context.Background(), p)
				switch {
				case err != nil:
					nFailed.Add(1)
					mu.Lock()
					if len(errs) < 2 {
						errs = append(errs, err.Error())
					}
					mu.Unlock()
				case !bytes.Equal(res.Embedding.Vector.Data, want):
					nFailed.Add(1)
					mu.Lock()
					errs = append(errs, "an answer differs from the in-process client's")
					mu.Unlock()
				default:
					nOK.Add(1)
					once()
				}
			}
		}()
	}
	wg.Wait()
	return nOK.Load(), nFailed.Load(), errs
}

// wsOpen opens a paced realtime session of the tiny world through the
// balancer and returns it with its session id.
func wsOpen(t *testing.T, url string) (*websocket.Conn, oip.SessionInfo) {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url+"/v2/models/tiny-world/stream", &websocket.DialOptions{Subprotocols: []string{oip.SessionsSubprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	if err := c.Write(context.Background(), websocket.MessageText, []byte(`{"parameters":{"task":"step"},"inputs":[]}`)); err != nil {
		t.Fatal(err)
	}
	var info oip.SessionInfo
	if ev := wsEvent(t, c); ev.Event != oip.EventSession || json.Unmarshal(ev.Data, &info) != nil {
		t.Fatalf("first event %q %s", ev.Event, ev.Data)
	}
	return c, info
}

// wsEvent reads one event of a session (and a chunk's binary message).
func wsEvent(t *testing.T, c *websocket.Conn) oip.Message {
	t.Helper()
	msg, err := wsNext(c)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func wsNext(c *websocket.Conn) (oip.Message, error) {
	var msg oip.Message
	_, b, err := c.Read(context.Background())
	if err != nil {
		return msg, err
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		return msg, err
	}
	if msg.Event == oip.EventChunk {
		if _, _, err := c.Read(context.Background()); err != nil {
			return msg, err
		}
	}
	return msg, nil
}

// replicaOf says which replica holds a session: the one whose controls
// URL knows it.
func replicaOf(t *testing.T, info oip.SessionInfo, replicas map[string]*wfserveProc) string {
	t.Helper()
	for name, p := range replicas {
		resp, err := http.Post(p.url+info.ControlsURL, "application/json", strings.NewReader(`{"controls":{}}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return name
			}
		}
	}
	t.Fatalf("no replica holds session %s", info.ID)
	return ""
}

// Two wfserve replicas behind Debian's haproxy, round robin without
// affinity: the generated remote clients give the in-process answers,
// REST and gRPC calls and realtime streams (WebSocket, gRPC) with
// controls alike. A
// replica killed (SIGKILL) under load from 32 clients: the stream it
// held ends with an error, the other replica's stream goes on, and the
// failed requests are counted; with remote.WithRetries no request fails
// when the other replica is killed.
func TestReplicasBehindHAProxy(t *testing.T) {
	haproxyPath(t)
	t.Parallel()
	ctx := context.Background()
	replica := func() *wfserveProc { return startProc(t, "-grpc-addr", "127.0.0.1:0") }
	replicas := map[string]*wfserveProc{"r1": replica(), "r2": replica()}
	bal := startHAProxy(t, haproxyConfig, replicas["r1"], replicas["r2"])
	lb, lbGRPC := bal.url, bal.grpcAddr
	replicasSeen(t, lb, "r1", "r2")

	// The in-process answers.
	opts := []client.Option{client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu")}
	encIn, err := tinyencoder.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer encIn.Close()
	p := tinyencoder.DefaultEmbedParams()
	p.Tokens = tensor.FromInt64([]int64{3, 1, 4, 1, 5, 9, 2, 6}, 8)
	resIn, err := encIn.Embed(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want := resIn.Embedding.Vector.Data

	// Through the balancer: requests and a stream with controls.
	encRe, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), lb))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		res, err := encRe.Embed(ctx, p)
		if err != nil || !bytes.Equal(res.Embedding.Vector.Data, want) {
			t.Fatalf("Embed through the balancer: %v, or an answer that differs", err)
		}
	}
	worldIn, err := tinyworld.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer worldIn.Close()
	worldRe, err := client.Open[tinyworld.Client](remote.New(tinyworld.Spec(), lb))
	if err != nil {
		t.Fatal(err)
	}
	frames := func(w *tinyworld.Client) [][]byte {
		sess, err := w.StepStream(ctx, tinyworld.DefaultStepParams(), stream.WithPacing(false), stream.WithMaxChunks(5))
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for c, err := range sess.Chunks(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c.Video.Frames.Data)
			if c.Index == 1 {
				if err := sess.SetControls(stream.Controls{"right": 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return got
	}
	in := frames(worldIn)
	for i := range 2 { // the second on the WebSocket the first one kept
		if re := frames(worldRe); len(re) != 5 || !slicesEqual(in, re) {
			t.Errorf("stream %d through the balancer differs from the in-process one (%d chunks)", i, len(re))
		}
	}
	// The same over gRPC through the balancer's HTTP/2 frontend.
	encG, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), "grpc://"+lbGRPC))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		res, err := encG.Embed(ctx, p)
		if err != nil || !bytes.Equal(res.Embedding.Vector.Data, want) {
			t.Fatalf("Embed over gRPC through the balancer: %v, or an answer that differs", err)
		}
	}
	// Each call is balanced on its own, though the client holds one
	// connection: both replicas logged ModelInfer calls.
	for name, r := range replicas {
		if !strings.Contains(r.stderr.String(), "ModelInfer") {
			t.Errorf("replica %s answered no gRPC call", name)
		}
	}
	worldG, err := client.Open[tinyworld.Client](remote.New(tinyworld.Spec(), "grpc://"+lbGRPC))
	if err != nil {
		t.Fatal(err)
	}
	if re := frames(worldG); len(re) != 5 || !slicesEqual(in, re) {
		t.Errorf("the gRPC stream through the balancer differs from the in-process one (%d chunks)", len(re))
	}

	// One paced stream on each replica.
	streams := map[string]*websocket.Conn{}
	for len(streams) < 2 {
		c, info := wsOpen(t, lb)
		if r := replicaOf(t, info, replicas); streams[r] == nil {
			streams[r] = c
		} else {
			c.CloseNow()
		}
	}

	// Kill r1 under load, without retries.
	stop := make(chan struct{})
	started := make(chan struct{})
	var ok, failed int64
	var errs []string
	done := make(chan struct{})
	go func() { ok, failed, errs = load(encRe, p, want, stop, started); close(done) }()
	<-started
	replicas["r1"].cmd.Process.Kill()
	<-replicas["r1"].exited
	// Its stream ends with an error; r2's goes on.
	for {
		msg, err := wsNext(streams["r1"])
		if err != nil {
			t.Logf("the stream on the killed replica ended: %v", err)
			break
		}
		if msg.Event == oip.EventEnd {
			t.Fatal("the stream on the killed replica ended as if by itself")
		}
	}
	for range 2 {
		if ev := wsEvent(t, streams["r2"]); ev.Event != oip.EventChunk {
			t.Errorf("the other replica's stream: event %q %s", ev.Event, ev.Data)
		}
	}
	replicasSeen(t, lb, "r2")
	close(stop)
	<-done
	t.Logf("r1 killed under 32 clients without retries: %d answers, %d failed %v", ok, failed, errs)
	if ok == 0 {
		t.Error("no answers under load")
	}

	// Bring r1 back (on another port, as the kernel picks), then kill r2
	// under load with retries: nothing fails.
	replicas["r1"] = replica()
	bal.setReplica(t, "r1", replicas["r1"])
	replicasSeen(t, lb, "r1", "r2")
	encRetry, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), lb, remote.WithRetries(5)))
	if err != nil {
		t.Fatal(err)
	}
	stop, started, done = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { ok, failed, errs = load(encRetry, p, want, stop, started); close(done) }()
	<-started
	replicas["r2"].cmd.Process.Kill()
	<-replicas["r2"].exited
	replicasSeen(t, lb, "r1")
	// The load goes on past the kill while these run.
	for range 64 {
		if _, err := encRetry.Embed(ctx, p); err != nil {
			t.Errorf("after the kill, with retries: %v", err)
		}
	}
	close(stop)
	<-done
	t.Logf("r2 killed under 32 clients with remote.WithRetries(5): %d answers, %d failed %v", ok, failed, errs)
	if failed != 0 {
		t.Errorf("%d requests failed with retries: %v", failed, errs)
	}
}

func slicesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
