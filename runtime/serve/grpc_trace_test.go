package serve_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/worldfoundry/wfgen/generated/tinyencoder"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// A gRPC call made inside a span carries the span's trace context in its
// metadata (lower-case keys, as gRPC requires: net/http's canonical
// "Traceparent" is refused by the transport), and the server's span for
// the call joins the caller's trace.
func TestGrpcCallJoinsCallersTrace(t *testing.T) {
	t.Parallel()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	s := withGRPC(t, start(t, serve.Config{TracerProvider: tp}))
	enc, err := client.Open[tinyencoder.Client](remote.New(tinyencoder.Spec(), "grpc://"+s.addr))
	if err != nil {
		t.Fatal(err)
	}
	p := tinyencoder.DefaultEmbedParams()
	p.Tokens = tokens(1, 6)
	ctx, root := tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := enc.Embed(ctx, p); err != nil {
		t.Fatal(err)
	}
	root.End()
	const name = "inference.GRPCInferenceService/ModelInfer"
	server := waitSpans(t, sr, name)[name]
	if server.Parent().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("the server's span is in trace %s, the caller's is %s", server.Parent().TraceID(), root.SpanContext().TraceID())
	}
}
