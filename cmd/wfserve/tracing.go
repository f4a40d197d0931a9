package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing returns the tracer provider the standard OpenTelemetry variables
// ask for, and a function that flushes and stops it; nil (no tracing, at
// no cost) when they ask for none. Traces are exported by OTLP over HTTP
// (http/protobuf) when OTEL_TRACES_EXPORTER is "otlp", or, with it unset,
// when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn tracing
// off. The exporter reads the other OTEL_EXPORTER_OTLP_* variables
// (headers, timeout, compression, certificates), the SDK OTEL_TRACES_SAMPLER
// and OTEL_BSP_*, and the resource OTEL_SERVICE_NAME (default "wfserve") and
// OTEL_RESOURCE_ATTRIBUTES. An exporter or protocol wfserve does not have
// is an error, not silently no tracing.
func tracing(ctx context.Context, log *slog.Logger) (tp trace.TracerProvider, stop func(context.Context) error, endpoint string, err error) {
	none := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, none, "", nil
	}
	endpoint = firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	otlp := endpoint != ""
	if v, ok := os.LookupEnv("OTEL_TRACES_EXPORTER"); ok && strings.TrimSpace(v) != "" {
		otlp = false
		for e := range strings.SplitSeq(v, ",") {
			switch e = strings.TrimSpace(e); e {
			case "otlp":
				otlp = true
			case "none", "":
			default:
				return nil, none, "", fmt.Errorf("OTEL_TRACES_EXPORTER=%s: wfserve exports traces by otlp only (or none)", v)
			}
		}
	}
	if !otlp {
		return nil, none, "", nil
	}
	if p := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, none, "", fmt.Errorf("OTLP protocol %q: wfserve exports OTLP over HTTP only (http/protobuf, a collector's port 4318)", p)
	}
	if endpoint == "" {
		endpoint = "http://localhost:4318"
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, none, "", fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "wfserve")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, none, "", fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(sdk)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", slog.String("error", err.Error()))
	}))
	return sdk, sdk.Shutdown, endpoint, nil
}

// firstEnv returns the first of the variables that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
