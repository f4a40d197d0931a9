package serve_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// BenchmarkInferHandler measures one infer request of the tiny encoder (16
// tokens; a 27 µs forward call) through the server's handler, without the
// network: what the middleware, metrics and tracing add to the hot path
// shows here undiluted. Sub-benchmarks: metrics on (the default), metrics
// off, and metrics with tracing (every span recorded, none exported).
func BenchmarkInferHandler(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  serve.Config
	}{
		{"metrics", serve.Config{}},
		{"no-metrics", serve.Config{DisableMetrics: true}},
		{"metrics+tracing", serve.Config{TracerProvider: sdktrace.NewTracerProvider()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil)) // the access log, formatted
			srv, err := serve.New(c.cfg, serve.Family{Spec: loadSpec(b, "tiny-encoder"), Options: clientOptions(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			if err := srv.Load(); err != nil {
				b.Fatal(err)
			}
			body := []byte(tokensBody(16))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v2/models/tiny-encoder/infer", bytes.NewReader(body))
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
