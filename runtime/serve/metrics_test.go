package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/serve"
)

// tokensBody is an infer request of tiny-encoder's embed task with n tokens.
func tokensBody(n int) string {
	data := make([]string, n)
	for i := range data {
		data[i] = fmt.Sprint(i + 1)
	}
	return fmt.Sprintf(`{"inputs": [{"name": "tokens", "datatype": "INT64", "shape": [%d], "data": [%s]}]}`, n, strings.Join(data, ","))
}

// scrape reads GET /metrics (with the token, when given) and parses it.
func scrape(t testing.TB, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	var hdr []string
	if token != "" {
		hdr = []string{"Authorization", "Bearer " + token}
	}
	code, h, body := call(t, http.MethodGet, url+"/metrics", "", hdr...)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET /metrics: not the Prometheus text format: %v\n%s", err, body)
	}
	return fams
}

// sample returns the metric of family name whose labels are exactly
// labels, or nil.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value returns a counter's or gauge's value, or a histogram's count; -1
// when the metric is absent.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := sample(fams, name, labels)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

// waitMetrics scrapes until ok holds for the scrape (the metrics of a
// request are recorded once its handler returns, which may be just after
// its client read the answer), failing when only a hang would keep them
// from matching (enginetest.WaitFor).
func waitMetrics(t testing.TB, url, token string, ok func(map[string]*dto.MetricFamily) error) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	var err error
	enginetest.WaitFor(t, "the metrics to match", func() bool {
		fams = scrape(t, url, token)
		err = ok(fams)
		return err == nil
	})
	return fams
}

// want is one expected metric value.
type want struct {
	name   string
	labels map[string]string
	value  float64
}

func check(wants ...want) func(map[string]*dto.MetricFamily) error {
	return func(fams map[string]*dto.MetricFamily) error {
		for _, w := range wants {
			if got := value(fams, w.name, w.labels); got != w.value {
				return fmt.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
			}
		}
		return nil
	}
}

func mt(model, task string) map[string]string { return map[string]string{"model": model, "task": task} }
func mtc(model, task, code string) map[string]string {
	return map[string]string{"model": model, "task": task, "code": code}
}

// TestMetricsCountKnownTraffic sends known traffic — answered, refused for
// their content, for an unknown model and task, without the token — and
// reads the counts by status, the histograms' counts and the gauges from
// GET /metrics, which needs the bearer token like every endpoint but the
// health probes. No label carries what a client chose.
func TestMetricsCountKnownTraffic(t *testing.T) {
	t.Parallel()
	const token = "s3cret"
	s := start(t, serve.Config{Token: token, MaxQueue: 7, MaxSessions: 3})
	auth := []string{"Authorization", "Bearer " + token}
	infer := s.url + "/v2/models/tiny-encoder/infer"

	if code, h, _ := call(t, http.MethodGet, s.url+"/metrics", ""); code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("GET /metrics without the token: %d, want 401 with WWW-Authenticate", code)
	}
	for range 5 {
		if code, _, b := call(t, http.MethodPost, infer, tokensBody(6), auth...); code != http.StatusOK {
			t.Fatalf("infer: %d %s", code, b)
		}
	}
	bad := []struct {
		url, body string
		code      int
	}{
		{infer, `{"inputs": [{"name": "tokens", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}`, 400},
		{infer, `{"inputs": [], "parameters": {"task": "no-such-task-x7"}}`, 400},
		{infer, `{not json`, 400},
		{s.url + "/v2/models/no-such-model-q3/infer", tokensBody(2), 404},
		{s.url + "/v2/models/tiny-encoder/versions/no-such-version-z9/infer", tokensBody(2), 404},
	}
	for _, b := range bad {
		if code, _, body := call(t, http.MethodPost, b.url, b.body, auth...); code != b.code {
			t.Fatalf("POST %s %s: %d %s, want %d", b.url, b.body, code, body, b.code)
		}
	}
	if code, _, _ := call(t, http.MethodPost, infer, tokensBody(2)); code != http.StatusUnauthorized {
		t.Fatalf("infer without the token: %d", code)
	}

	fams := waitMetrics(t, s.url, token, check(
		want{"wfserve_requests_total", mtc("tiny-encoder", "embed", "200"), 5},
		want{"wfserve_requests_total", mtc("tiny-encoder", "embed", "400"), 1},
		want{"wfserve_requests_total", mtc("tiny-encoder", "_unknown", "400"), 2},
		want{"wfserve_requests_total", mtc("tiny-encoder", "_unknown", "404"), 1},
		want{"wfserve_requests_total", mtc("_unknown", "_unknown", "404"), 1},
		want{"wfserve_request_duration_seconds", mt("tiny-encoder", "embed"), 6},
		want{"wfserve_queue_duration_seconds", mt("tiny-encoder", "embed"), 5},
		want{"wfserve_compute_duration_seconds", mt("tiny-encoder", "embed"), 5},
		want{"wfserve_http_requests_total", map[string]string{"handler": "/v2/models/{model}/infer", "code": "401"}, 1},
		want{"wfserve_http_requests_total", map[string]string{"handler": "/metrics", "code": "401"}, 1},
		want{"wfserve_http_requests_total", map[string]string{"handler": "/v2/models/{model}/infer", "code": "200"}, 5},
		want{"wfserve_queue_depth", map[string]string{}, 0},
		want{"wfserve_queue_capacity", map[string]string{}, 7},
		want{"wfserve_inflight_bytes", map[string]string{}, 0},
		want{"wfserve_sessions_open", map[string]string{}, 0},
		want{"wfserve_sessions_limit", map[string]string{}, 3},
		want{"wfserve_model_ready", map[string]string{"model": "tiny-encoder", "version": "default"}, 1},
		want{"wfserve_model_ready", map[string]string{"model": "tiny-world", "version": "default"}, 1},
	))
	// Every task of every model has its series from the start, so that
	// rate() sees the first requests.
	if v := value(fams, "wfserve_requests_total", mtc("tiny-world", "step", "200")); v != 0 {
		t.Errorf("tiny-world step 200 = %v before any request, want 0", v)
	}
	if v := value(fams, "wfserve_compute_duration_seconds", mt("tiny-world", "step")); v != 0 {
		t.Errorf("tiny-world step compute count = %v, want 0 (a series from the start)", v)
	}
	// The duration histogram's sum is a plausible time.
	if h := sample(fams, "wfserve_request_duration_seconds", mt("tiny-encoder", "embed")).Histogram; h.GetSampleSum() <= 0 || h.GetSampleSum() > 60 {
		t.Errorf("request duration sum %v s", h.GetSampleSum())
	}
	// Bounded labels: nothing a client sent is a label value.
	code, _, body := call(t, http.MethodGet, s.url+"/metrics", "", auth...)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	for _, text := range []string{"no-such-model-q3", "no-such-task-x7", "no-such-version-z9"} {
		if bytes.Contains(body, []byte(text)) {
			t.Errorf("/metrics carries %q, which a client sent", text)
		}
	}
	// The process's memory (the CPU engine reports none of its own).
	if value(fams, "process_resident_memory_bytes", map[string]string{}) <= 0 {
		t.Errorf("no process_resident_memory_bytes")
	}
	if value(fams, "wfserve_engine_info", map[string]string{"engine": "libtorch", "version": engineVersion(fams)}) != 1 {
		t.Errorf("no wfserve_engine_info{engine=\"libtorch\"}")
	}
}

// engineVersion returns the version label of wfserve_engine_info.
func engineVersion(fams map[string]*dto.MetricFamily) string {
	if f := fams["wfserve_engine_info"]; f != nil && len(f.Metric) == 1 {
		for _, l := range f.Metric[0].Label {
			if l.GetName() == "version" {
				return l.GetValue()
			}
		}
	}
	return ""
}

// TestMetricsBatchSizes sends concurrent requests through the batcher:
// the batch-size histogram holds one observation per batch run, summing to
// the requests batched, as the server's own counts have it.
func TestMetricsBatchSizes(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Batching: true, BatchDelay: 5 * time.Millisecond, MaxConcurrent: 1})
	const clients, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for c := range clients {
		wg.Go(func() {
			for range each {
				code, _, b := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(4+c%2))
				if code != http.StatusOK {
					errs <- fmt.Errorf("%d %s", code, b)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fams := waitMetrics(t, s.url, "", check(
		want{"wfserve_requests_total", mtc("tiny-encoder", "embed", "200"), clients * each},
		want{"wfserve_queue_duration_seconds", mt("tiny-encoder", "embed"), clients * each},
		want{"wfserve_compute_duration_seconds", mt("tiny-encoder", "embed"), clients * each},
	))
	st := s.srv.Stats()
	h := sample(fams, "wfserve_batch_size", mt("tiny-encoder", "embed")).Histogram
	if int64(h.GetSampleCount()) != st.Batches || int64(h.GetSampleSum()) != st.BatchedRequests || st.BatchedRequests != clients*each {
		t.Fatalf("batch sizes: %d batches holding %v requests; the server ran %d holding %d; %d sent",
			h.GetSampleCount(), h.GetSampleSum(), st.Batches, st.BatchedRequests, clients*each)
	}
	t.Logf("%d requests in %d batches", st.BatchedRequests, st.Batches)
	// A batch of 8 at most (the task's max_batch_size): nothing above the
	// bucket 8.
	for _, b := range h.Bucket {
		if b.GetUpperBound() == 8 && b.GetCumulativeCount() != h.GetSampleCount() {
			t.Errorf("batches above max_batch_size 8: %v", h)
		}
	}
}

// TestMetricsDisabled: with DisableMetrics, /metrics is an unknown
// endpoint.
func TestMetricsDisabled(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{DisableMetrics: true})
	if code, _, b := call(t, http.MethodGet, s.url+"/metrics", ""); code != http.StatusNotFound {
		t.Fatalf("GET /metrics with metrics off: %d %s", code, b)
	}
	if code, _, b := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3)); code != http.StatusOK {
		t.Fatalf("infer with metrics off: %d %s", code, b)
	}
}

// TestMetricsDuringDrain: a draining server still answers /metrics, so the
// drain can be watched.
func TestMetricsDuringDrain(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3)); code != http.StatusServiceUnavailable {
		t.Fatalf("infer while draining: %d", code)
	}
	waitMetrics(t, s.url, "", check(
		want{"wfserve_http_requests_total", map[string]string{"handler": "/v2/models/{model}/infer", "code": "503"}, 1},
	))
}

// TestDocsNameEveryMetric: the metrics table of docs/serving.md names every
// wfserve_* metric a server exports, and only those (the engine's device
// memory is exported where the engine has CUDA devices, the model memory
// budget's where models load lazily).
func TestDocsNameEveryMetric(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `wfserve_") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, name := range strings.Split(first, ",") {
			documented[strings.Trim(strings.TrimSpace(name), "`")] = true
		}
	}
	// A keep-alive turns on lazy loading, whose metrics exist only then;
	// the session-batched world has its sessions' batch sizes.
	s := startFamilies(t, serve.Config{Batching: true, ModelKeepAlive: time.Hour}, loadSpec(t, "tiny-encoder"), loadSpec(t, "tiny-world"), loadSpec(t, "steps-world"))
	if code, _, body := call(t, http.MethodPost, s.url+"/v2/models/tiny-encoder/infer", tokensBody(3)); code != http.StatusOK {
		t.Fatalf("infer: %d %s", code, body)
	}
	fams := waitMetrics(t, s.url, "", check(want{"wfserve_batch_size", mt("tiny-encoder", "embed"), 1}))
	for name := range fams {
		if strings.HasPrefix(name, "wfserve_") && !documented[name] {
			t.Errorf("%s is exported but not in docs/serving.md's metrics table", name)
		}
	}
	for name := range documented {
		if fams[name] == nil && !strings.HasPrefix(name, "wfserve_engine_memory_") {
			t.Errorf("docs/serving.md lists %s, which the server does not export", name)
		}
	}
}
