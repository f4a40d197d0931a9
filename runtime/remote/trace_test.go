package remote_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/runtime/remote"
)

// TestRequestsCarryTraceparent: whatever the tracer provider (the global
// no-op one here), a request carries the W3C traceparent of the caller's
// span, and none when the caller has no span.
func TestRequestsCarryTraceparent(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.Write([]byte(`{"ready": true}`))
	}))
	defer srv.Close()
	rc, err := remote.New(encoderSpec(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	if err := rc.Ready(trace.ContextWithSpanContext(context.Background(), caller)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; len(got) != 2 || got[0] != want || got[1] != "" {
		t.Fatalf("traceparent headers %q, want [%q, \"\"]", got, want)
	}
}

// TestClientSpans: with a tracer provider, each request is a client span,
// a child of the caller's, named by the route, whose id the request's
// traceparent carries; an error answer marks it failed.
func TestClientSpans(t *testing.T) {
	var mu sync.Mutex
	var parents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("Traceparent"))
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/ready") {
			w.Write([]byte(`{"ready": true}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error": "no such model"}`))
	}))
	defer srv.Close()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	rc, err := remote.New(encoderSpec(), srv.URL, remote.WithTracerProvider(tp), remote.WithVariant("v1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := tp.Tracer("test").Start(context.Background(), "caller")
	if err := rc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Metadata(ctx); err == nil {
		t.Fatal("metadata: no error for a 404")
	}
	root.End()
	spans := sr.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	ready, meta := spans[0], spans[1]
	if ready.Name() != "GET /v2/models/{model}/versions/{version}/ready" || ready.SpanKind() != trace.SpanKindClient {
		t.Errorf("ready span %q kind %v", ready.Name(), ready.SpanKind())
	}
	if meta.Name() != "GET /v2/models/{model}/versions/{version}" || meta.Status().Code.String() != "Error" {
		t.Errorf("metadata span %q status %v", meta.Name(), meta.Status())
	}
	for i, s := range []sdktrace.ReadOnlySpan{ready, meta} {
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %q is not a child of the caller's", s.Name())
		}
		want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if parents[i] != want {
			t.Errorf("request %d traceparent %q, want its client span's %q", i, parents[i], want)
		}
	}
}
