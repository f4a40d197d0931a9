package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkRequestMetrics measures what the metrics record for one
// answered infer request — its model and task, queue wait, engine call,
// status count and duration — apart from everything else a request costs
// (BenchmarkInferHandler measures the whole).
func BenchmarkRequestMetrics(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{{"on", Config{}}, {"off", Config{DisableMetrics: true}}} {
		b.Run(c.name, func(b *testing.B) {
			s := &Server{cfg: c.cfg}
			if err := s.cfg.defaults(); err != nil {
				b.Fatal(err)
			}
			s.tel = newTelemetry(s)
			o := s.tel.taskObs("tiny-encoder", "embed")
			r := httptest.NewRequest(http.MethodPost, "/v2/models/tiny-encoder/infer", nil)
			r.Pattern = "/v2/models/{model}/infer"
			rec := &recorder{ResponseWriter: httptest.NewRecorder(), status: http.StatusOK}
			b.ReportAllocs()
			for b.Loop() {
				ri := &reqInfo{arrived: time.Now()}
				ctx := context.WithValue(r.Context(), infoKey{}, ri)
				setObs(ctx, o)
				_, called := slotted(ctx, time.Now())
				called(nil)
				s.tel.finish(s, r, ri, rec, time.Now())
			}
		})
	}
}
