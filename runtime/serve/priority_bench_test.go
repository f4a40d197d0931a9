package serve_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// BenchmarkPriorityUnderLoad measures what priority buys under
// saturation: the attention encoder on sequences of 256 tokens (a forward
// call of milliseconds, so that the engine slot, not the handlers' CPU,
// is what requests wait for) on one engine slot,
// requests through the server's handler (no network). An idle server's
// latency first; then 8 clients keep the slot busy with level-5 requests
// while one client sends the measured requests — at level 1 ("high"), and
// at level 5 like the load ("fifo"). Metrics: p50 and p99 of each, in µs,
// and p99 ÷ the idle p99 (goal for high: ≤ 2).
func BenchmarkPriorityUnderLoad(b *testing.B) {
	srv, err := serve.New(serve.Config{MaxConcurrent: 1, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), DisableMetrics: true},
		serve.Family{Spec: loadSpec(b, "attention"), Options: clientOptions(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Load(); err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, 256)
	for i := range tokens {
		tokens[i] = fmt.Sprint(i * 7 % 1000)
	}
	body := func(level int) []byte {
		return []byte(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[256],"data":[` + strings.Join(tokens, ",") + `]}],"parameters":{"priority":` + fmt.Sprint(level) + `}}`)
	}
	infer := func(bd []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v2/models/attention/infer", bytes.NewReader(bd))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	const n = 200
	measure := func(level int) (p50, p99 time.Duration) {
		bd := body(level)
		lat := make([]time.Duration, n)
		for i := range lat {
			t0 := time.Now()
			infer(bd)
			lat[i] = time.Since(t0)
		}
		slices.Sort(lat)
		return lat[n/2], lat[n*99/100]
	}
	for range 20 {
		infer(body(1)) // warm
	}
	for b.Loop() {
		idle50, idle99 := measure(1)
		var stop atomic.Bool
		var wg sync.WaitGroup
		low := body(5)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					infer(low)
				}
			}()
		}
		time.Sleep(50 * time.Millisecond) // the load reaches its steady queue
		high50, high99 := measure(1)
		fifo50, fifo99 := measure(5)
		stop.Store(true)
		wg.Wait()
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) }
		b.ReportMetric(us(idle50), "idle-p50-µs")
		b.ReportMetric(us(idle99), "idle-p99-µs")
		b.ReportMetric(us(high50), "high-p50-µs")
		b.ReportMetric(us(high99), "high-p99-µs")
		b.ReportMetric(us(fifo50), "fifo-p50-µs")
		b.ReportMetric(us(fifo99), "fifo-p99-µs")
		b.ReportMetric(us(high99)/us(idle99), "high-p99/idle-p99")
		b.ReportMetric(us(fifo99)/us(idle99), "fifo-p99/idle-p99")
	}
}
