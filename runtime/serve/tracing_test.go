package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// spanKey names a span in waitSpans' map: its name, prefixed with
// "client " for a client span (the remote client's span and the server's
// have one name).
func spanKey(s sdktrace.ReadOnlySpan) string {
	if s.SpanKind() == trace.SpanKindClient {
		return "client " + s.Name()
	}
	return s.Name()
}

// waitSpans waits until the recorder holds an ended span of each key
// (spanKey; the server ends a request's span once its handler returns, which may be
// just after its client read the answer), failing when only a hang would
// keep them from ending (enginetest.WaitFor).
func waitSpans(t *testing.T, sr *tracetest.SpanRecorder, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	var byName map[string]sdktrace.ReadOnlySpan
	enginetest.WaitFor(t, fmt.Sprintf("the spans %q", names), func() bool {
		byName = map[string]sdktrace.ReadOnlySpan{}
		for _, s := range sr.Ended() {
			byName[spanKey(s)] = s
		}
		for _, n := range names {
			if byName[n] == nil {
				return false
			}
		}
		return true
	})
	return byName
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// childOf fails unless child is a span of parent's trace whose parent is
// parent.
func childOf(t *testing.T, child sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if child.SpanContext().TraceID() != parent.TraceID() || child.Parent().SpanID() != parent.SpanID() {
		t.Errorf("span %q (trace %s, parent %s) is not a child of span %s of trace %s",
			child.Name(), child.SpanContext().TraceID(), child.Parent().SpanID(), parent.SpanID(), parent.TraceID())
	}
}

// TestTraceFromRemoteClientToEngine follows one call of the generated
// remote client (client.Open over remote.New) through the server to the engine
// call, unbatched and batched: one trace
// id, and the chain caller → client span → server span → queue wait and
// engine call. A batched request's engine span is linked to the batch's
// span, a root of its own linked to the request's server span.
func TestTraceFromRemoteClientToEngine(t *testing.T) {
	t.Parallel()
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			s := start(t, serve.Config{TracerProvider: tp, Batching: batching})
			rc, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), s.url, remote.WithTracerProvider(tp)))
			if err != nil {
				t.Fatal(err)
			}
			p := tinyencoder.DefaultEmbedParams()
			p.Tokens = tokens(1, 6)
			ctx, root := tp.Tracer("test").Start(context.Background(), "caller")
			if _, err := rc.Embed(ctx, p); err != nil {
				t.Fatal(err)
			}
			root.End()
			const serverName = "POST /v2/models/{model}/infer"
			names := []string{"caller", "client " + serverName, serverName, "serve.queue", "serve.engine"}
			if batching {
				names = append(names, "serve.batch")
			}
			spans := waitSpans(t, sr, names...)
			caller, client, server := spans["caller"], spans["client "+serverName], spans[serverName]
			childOf(t, client, caller.SpanContext())
			childOf(t, server, client.SpanContext())
			childOf(t, spans["serve.queue"], server.SpanContext())
			engine := spans["serve.engine"]
			childOf(t, engine, server.SpanContext())
			if server.SpanKind() != trace.SpanKindServer || attr(server, "http.response.status_code").AsInt64() != 200 ||
				attr(server, "wfserve.model").AsString() != "tiny-encoder" || attr(server, "wfserve.task").AsString() != "embed" {
				t.Errorf("server span: kind %v, attributes %v", server.SpanKind(), server.Attributes())
			}
			if q := spans["serve.queue"]; q.EndTime().After(engine.StartTime()) || q.StartTime().Before(server.StartTime()) || engine.EndTime().After(server.EndTime()) {
				t.Errorf("spans out of order: server %v–%v, queue %v–%v, engine %v–%v", server.StartTime(), server.EndTime(),
					q.StartTime(), q.EndTime(), engine.StartTime(), engine.EndTime())
			}
			if !batching {
				return
			}
			b := spans["serve.batch"]
			if b.Parent().IsValid() || attr(b, "wfserve.batch_size").AsInt64() != 1 {
				t.Errorf("batch span: parent %v, attributes %v (want a root span of batch size 1)", b.Parent(), b.Attributes())
			}
			if l := b.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != server.SpanContext().SpanID() {
				t.Errorf("batch span links %v, want the request's server span", l)
			}
			if l := engine.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != b.SpanContext().SpanID() {
				t.Errorf("engine span links %v, want the batch span", l)
			}
		})
	}
}

// TestTraceparentHeader: a request from any client that carries a W3C
// traceparent gets a server span in that trace, whose id the access log
// carries; without tracing, nothing is recorded and the request is served
// as usual.
func TestTraceparentHeader(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	s := start(t, serve.Config{TracerProvider: tp})
	const tid, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	code, _, b := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3),
		"Traceparent", "00-"+tid+"-"+parent+"-01")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	server := waitSpans(t, sr, "POST /v2/models/{model}/infer")["POST /v2/models/{model}/infer"]
	if server.SpanContext().TraceID().String() != tid || server.Parent().SpanID().String() != parent || !server.Parent().IsRemote() {
		t.Errorf("server span in trace %s with parent %s, want trace %s and the remote parent %s",
			server.SpanContext().TraceID(), server.Parent().SpanID(), tid, parent)
	}
	found := false
	for _, rec := range s.logs.all() {
		if rec["msg"] == "http request" && rec["trace_id"] == tid {
			found = true
		}
	}
	if !found {
		t.Errorf("no access log record with trace_id %s: %v", tid, s.logs.all())
	}
}
