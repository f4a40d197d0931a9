package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

// TestTracingFromEnvironment: which OTEL_* settings turn tracing on, off,
// or are refused.
func TestTracingFromEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		on   bool
		fail string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, fail: "otlp only"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, fail: "http/protobuf"},
	} {
		for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			t.Setenv(k, c.env[k])
		}
		tp, stop, _, err := tracing(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		switch {
		case c.fail != "":
			if err == nil || !strings.Contains(err.Error(), c.fail) {
				t.Errorf("%v: error %v, want one naming %q", c.env, err, c.fail)
			}
		case err != nil:
			t.Errorf("%v: %v", c.env, err)
		case (tp != nil) != c.on:
			t.Errorf("%v: tracing on = %v, want %v", c.env, tp != nil, c.on)
		}
		if stop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			stop(ctx)
			cancel()
		}
	}
}

// collector is an OTLP/HTTP trace receiver on loopback that keeps the
// spans it is sent.
type collector struct {
	mu      sync.Mutex
	spans   map[string][]string // trace id (hex) → span names
	service []string            // service.name of each resource
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				c.service = append(c.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				id := hexID(s.TraceId)
				c.spans[id] = append(c.spans[id], s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(out)
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return string(out)
}

// TestExportsTracesByOTLP runs the command with OTEL_EXPORTER_OTLP_ENDPOINT
// naming a receiver on loopback, sends an infer request that carries a W3C
// traceparent, and receives its server, queue and engine spans in that
// trace, from service "wfserve"; /metrics answers meanwhile.
func TestExportsTracesByOTLP(t *testing.T) {
	col := &collector{spans: map[string][]string{}}
	rcv := httptest.NewServer(col)
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // ms: export soon
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}

	dir := tiny.Dir(t)
	var stderr enginetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-checkpoint-root", dir, "-device", "cpu",
			filepath.Join("..", "..", "manifests", "tiny-encoder.yaml")}, &bytes.Buffer{}, &stderr)
	}()
	url := servingURL(t, &stderr, runExit(done))
	if !strings.Contains(stderr.String(), "otlp_traces="+rcv.URL) {
		t.Errorf("the serving record does not name the OTLP endpoint:\n%s", stderr.String())
	}
	const tid = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest(http.MethodPost, url+"/v2/models/tiny-encoder/infer",
		strings.NewReader(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[3],"data":[1,2,3]}]}`))
	req.Header.Set("traceparent", "00-"+tid+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("infer: %d", resp.StatusCode)
	}
	if resp, err := http.Get(url + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	want := []string{"POST /v2/models/{model}/infer", "serve.queue", "serve.engine"}
	var got, service []string
	missing := ""
	enginetest.WaitFor(t, "the request's spans to be exported", func() bool {
		col.mu.Lock()
		got, service = append([]string(nil), col.spans[tid]...), append([]string(nil), col.service...)
		col.mu.Unlock()
		missing = ""
		for _, w := range want {
			if !strings.Contains(strings.Join(got, "|"), w) {
				missing = w
			}
		}
		return missing == ""
	})
	if len(service) == 0 || service[0] != "wfserve" {
		t.Errorf("service.name %v, want wfserve", service)
	}

	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := enginetest.Receive(t, "wfserve to stop after SIGTERM", done); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, stderr.String())
	}
}
