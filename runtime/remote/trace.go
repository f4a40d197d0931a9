package remote

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the spans of this package.
const tracerName = "github.com/worldfoundry/wfgen/runtime/remote"

// globalTracer follows the process's OpenTelemetry tracer provider
// (otel.SetTracerProvider; a no-op until one is set).
var globalTracer = otel.Tracer(tracerName)

// traceContext is the propagation every request carries: the W3C
// traceparent (and tracestate) of the caller's span, which servers such as
// wfserve continue.
var traceContext propagation.TextMapPropagator = propagation.TraceContext{}

// WithTracerProvider records a client span per request with tp instead of
// the process's global provider (otel.GetTracerProvider). Either way every
// request carries the W3C traceparent of the span in its context, so the
// server's spans join the caller's trace.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *Client) error {
		if tp == nil {
			return errors.New("remote: nil tracer provider")
		}
		c.tracer = tp.Tracer(tracerName)
		return nil
	}
}

// startSpan starts the client span of one request to u, named by its
// method and route ("POST /v2/models/{model}/infer").
func (t *restTransport) startSpan(ctx context.Context, method, u string) (context.Context, trace.Span) {
	c := t.c
	name := method
	if rest, ok := strings.CutPrefix(u, t.path("")); ok {
		route := "/v2/models/{model}"
		if c.variant != "" {
			route += "/versions/{version}"
		}
		name += " " + route + rest
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("url.full", u),
			attribute.String("wfserve.model", c.spec.ModelFamilyID)))
}

// endSpan ends a request's span with its outcome.
func endSpan(span trace.Span, err error) {
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) {
			span.SetAttributes(attribute.Int("http.response.status_code", se.Status))
		}
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Int("http.response.status_code", http.StatusOK))
	}
	span.End()
}

// injectTrace adds the trace context of the request's context to its
// headers.
func injectTrace(r *http.Request) {
	traceContext.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
}
