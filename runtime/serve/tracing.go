package serve

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/runtime/logctx"
)

// The spans of a request, when Config.TracerProvider is set:
//
//	METHOD ROUTE      server span of every request (the caller's W3C
//	                  traceparent is its parent), named by the route pattern
//	├── serve.queue   an infer request's wait from admission to its engine call
//	└── serve.engine  its engine call (for a batched request, its part of
//	                  the batch run, linked to the serve.batch span)
//	serve.batch       a cross-request batch run: a root span of its own,
//	                  linked to each request it holds
//
// Spans carry the model and task ids (wfserve.model, wfserve.task), the
// request id (wfserve.request_id) and, for batches, wfserve.batch_size.
const (
	spanQueue  = "serve.queue"
	spanEngine = "serve.engine"
	spanBatch  = "serve.batch"
)

// startSpan starts the request's server span, a child of the trace context
// the request carries, and adds its trace id to the request's log fields.
// Without a tracer it does nothing.
func (t *telemetry) startSpan(ctx context.Context, r *http.Request, ri *reqInfo, id string, fields logctx.Fields) context.Context {
	if t.tracer == nil {
		return ctx
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(ri.arrived),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("wfserve.request_id", id)))
	ri.span = span
	if sc := span.SpanContext(); sc.IsValid() {
		fields["trace_id"] = sc.TraceID().String()
	}
	return ctx
}

// endSpan ends the request's server span with the route and the answer's
// status (an error status for 5xx, as the HTTP conventions have it).
func (t *telemetry) endSpan(r *http.Request, ri *reqInfo, rec *recorder, end time.Time) {
	span := ri.span
	if r.Pattern != "" {
		span.SetName(r.Method + " " + r.Pattern)
		span.SetAttributes(attribute.String("http.route", r.Pattern))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
	if o := ri.obs; o != nil {
		span.SetAttributes(o.attrs()...)
	}
	if rec.status >= 500 {
		span.SetStatus(codes.Error, rec.err)
	}
	span.End(trace.WithTimestamp(end))
}

// attrs are the span attributes of a model's task.
func (o *taskObs) attrs() []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("wfserve.model", o.model), attribute.String("wfserve.task", o.task)}
}

// queueSpan records a request's wait from admitted to started.
func (t *telemetry) queueSpan(ctx context.Context, o *taskObs, admitted, started time.Time) {
	if t.tracer == nil {
		return
	}
	_, span := t.tracer.Start(ctx, spanQueue, trace.WithTimestamp(admitted), trace.WithAttributes(o.attrs()...))
	span.End(trace.WithTimestamp(started))
}

// slotted records that an infer request admitted at admitted got its
// engine slot now: its queue wait, then the start of its engine call. It
// returns the call's context and a function that records the call's end:
// the compute histogram and the engine span.
func slotted(ctx context.Context, admitted time.Time) (context.Context, func(error)) {
	started := time.Now()
	o := obsOf(ctx)
	o.queued(ctx, admitted, started)
	return o.engineCall(ctx, started)
}

// engineCall starts the span of a request's engine call and returns the
// call's context and a function that records the call's end.
func (o *taskObs) engineCall(ctx context.Context, started time.Time) (context.Context, func(error)) {
	var span trace.Span
	if o != nil && o.t.tracer != nil {
		ctx, span = o.t.tracer.Start(ctx, spanEngine, trace.WithTimestamp(started), trace.WithAttributes(o.attrs()...))
	}
	return ctx, func(err error) {
		o.computed(time.Since(started))
		if span != nil {
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// batchStarted records a cross-request batch that starts its run: its
// size, each request's wait, and the batch's span, linked to each
// request's. It returns the run's context and a function that records the
// run's end: each request's compute time and engine span (linked to the
// batch's).
func batchStarted(ctx context.Context, run []*pending) (context.Context, func(error)) {
	started := time.Now()
	o := obsOf(run[0].ctx) // the batcher's task
	if o == nil {
		return ctx, func(error) {}
	}
	if o.batchSize != nil {
		o.batchSize.Observe(float64(len(run)))
	}
	for _, p := range run {
		o.queued(p.ctx, p.arrived, started)
	}
	var span trace.Span
	tracer := o.t.tracer
	if tracer != nil {
		links := make([]trace.Link, 0, len(run))
		for _, p := range run {
			if l := trace.LinkFromContext(p.ctx); l.SpanContext.IsValid() {
				links = append(links, l)
			}
		}
		ctx, span = tracer.Start(ctx, spanBatch, trace.WithNewRoot(), trace.WithLinks(links...), trace.WithTimestamp(started),
			trace.WithAttributes(append(o.attrs(), attribute.Int("wfserve.batch_size", len(run)))...))
	}
	return ctx, func(err error) {
		end := time.Now()
		d := end.Sub(started)
		for range run {
			o.computed(d)
		}
		if span == nil {
			return
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(end))
		link := trace.Link{SpanContext: span.SpanContext()}
		for _, p := range run {
			_, s := tracer.Start(p.ctx, spanEngine, trace.WithTimestamp(started), trace.WithLinks(link),
				trace.WithAttributes(append(o.attrs(), attribute.Int("wfserve.batch_size", len(run)))...))
			s.End(trace.WithTimestamp(end))
		}
	}
}
