package serve

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Label values that stand for what a request named but the server does not
// serve, so that no label carries text a client chose: an infer request to
// a model path that names no served model has model="_unknown"; one
// refused before its task was known (malformed body, unknown task...) has
// task="_unknown". Neither can be a manifest id (ids start with a letter
// or digit).
const (
	unknownLabel = "_unknown"
)

// telemetry is what a Server records about its requests: Prometheus
// metrics (m, nil when Config.DisableMetrics) and OpenTelemetry spans
// (tracer, nil when Config.TracerProvider is nil, so that tracing costs
// nothing).
type telemetry struct {
	m      *metrics
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// unknownModel observes infer requests to a model that is not served.
	unknownModel *taskObs
}

// modelObs are the observers of a served model's tasks.
type modelObs struct {
	tasks   map[string]*taskObs // by task id
	unknown *taskObs            // requests whose task is not known
}

// metrics are a Server's Prometheus collectors, in a registry of its own.
type metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	requests  *prometheus.CounterVec   // model, task, code
	http      *prometheus.CounterVec   // handler, code
	grpc      *prometheus.CounterVec   // method, code (grpc.go)
	keys      *prometheus.CounterVec   // key, code: requests by API key name (keys.go)
	httpByKey sync.Map                 // httpKey → prometheus.Counter, looked up without hashing labels
	duration  *prometheus.HistogramVec // model, task
	queue     *prometheus.HistogramVec // model, task
	compute   *prometheus.HistogramVec // model, task
	batchSize *prometheus.HistogramVec // model, task
	// sessionBatch counts the sessions whose steps each call of a
	// session-batched task ran (client.WithSessionBatches).
	sessionBatch *prometheus.HistogramVec // model, task
}

// latencyBuckets are the buckets of the duration histograms, in seconds:
// from 100 µs (a small encoder's forward call) to a minute (the default
// request deadline).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// batchBuckets are the buckets of the batch-size histogram.
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}

func newTelemetry(s *Server) *telemetry {
	t := &telemetry{prop: s.cfg.Propagator}
	if s.cfg.TracerProvider != nil {
		t.tracer = s.cfg.TracerProvider.Tracer("github.com/worldfoundry/wfgen/runtime/serve")
		if t.prop == nil {
			t.prop = propagation.TraceContext{}
		}
	}
	if !s.cfg.DisableMetrics {
		t.m = newMetrics(s)
	}
	t.unknownModel = t.taskObs(unknownLabel, unknownLabel)
	for _, m := range s.cat().order {
		t.observe(m)
	}
	return t
}

// observe makes m's observers (m.obs): at New, and for a model poll mode
// adds.
func (t *telemetry) observe(m *model) {
	spec := m.oip.Spec
	mo := &modelObs{tasks: make(map[string]*taskObs, len(spec.Tasks)), unknown: t.taskObs(spec.ModelFamilyID, unknownLabel)}
	for i := range spec.Tasks {
		id := spec.Tasks[i].TaskID
		mo.tasks[id] = t.taskObs(spec.ModelFamilyID, id)
		if t.m != nil && spec.Tasks[i].SessionBatching != nil {
			t.m.sessionBatch.WithLabelValues(spec.ModelFamilyID, id) // exported from the start
		}
	}
	m.obs = mo
}

// obs returns the observers of a model's task; task "" is a request whose
// task is not known yet.
func (t *telemetry) obs(m *model, task string) *taskObs {
	mo := m.obs
	if o := mo.tasks[task]; o != nil {
		return o
	}
	return mo.unknown
}

func newMetrics(s *Server) *metrics {
	modelTask := []string{"model", "task"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wfserve_requests_total",
			Help: "Infer requests answered, by model (family id), task and HTTP status code (499: the client went away; a gRPC call counts under the status its answer would have over REST).",
		}, []string{"model", "task", "code"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wfserve_http_requests_total",
			Help: "HTTP requests answered, by route pattern and HTTP status code.",
		}, []string{"handler", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wfserve_request_duration_seconds",
			Help:    "Time from an infer request's arrival to its answer (streams left out), by model and task.",
			Buckets: latencyBuckets,
		}, modelTask),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wfserve_queue_duration_seconds",
			Help:    "Time from an infer request's admission to the start of its engine call (waiting for an engine slot or a batch), by model and task.",
			Buckets: latencyBuckets,
		}, modelTask),
		compute: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wfserve_compute_duration_seconds",
			Help:    "Time of an infer request's engine call (for a batched request, its batch's run), by model and task.",
			Buckets: latencyBuckets,
		}, modelTask),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wfserve_batch_size",
			Help:    "Requests in each cross-request batch run (-batch), by model and task.",
			Buckets: batchBuckets,
		}, modelTask),
		sessionBatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wfserve_session_batch_size",
			Help:    "Sessions whose steps each call of a session-batched streaming task ran together (session_batching), by model and task.",
			Buckets: batchBuckets,
		}, modelTask),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.grpc = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wfserve_grpc_requests_total",
		Help: "gRPC calls answered, by full method name and gRPC status code (OK, InvalidArgument, ...).",
	}, []string{"method", "code"})
	for _, method := range grpcMethods() { // every method's OK series exists from the start
		m.grpc.WithLabelValues(method, "OK")
	}
	m.keys = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wfserve_key_requests_total",
		Help: "Requests (REST and gRPC) that carried an API key, by the key's name (never the key) and HTTP status code (gRPC's mapped): as many series as keys in the key file.",
	}, []string{"key", "code"})
	m.reg.MustRegister(m.requests, m.http, m.grpc, m.keys, m.duration, m.queue, m.compute, m.batchSize, m.sessionBatch,
		gauge("wfserve_queue_depth", "Infer requests admitted now, queued or running.",
			func() float64 { return float64(s.adm.requests.Load()) }),
		gauge("wfserve_queue_capacity", "Infer requests that may be admitted at once (-max-queue); beyond it requests are answered 429.",
			func() float64 { return float64(s.cfg.MaxQueue) }),
		gauge("wfserve_inflight_bytes", "Bytes the requests in flight hold now (bodies and decoded tensors).",
			func() float64 { return float64(s.adm.bytesInUse()) }),
		gauge("wfserve_inflight_bytes_limit", "Bytes the requests in flight may hold (-max-inflight-bytes); beyond it requests are answered 429.",
			func() float64 { return float64(s.cfg.MaxInflightBytes) }),
		gauge("wfserve_sessions_open", "Realtime sessions (streams) open now.",
			func() float64 { return float64(s.nsessions.Load()) }),
		gauge("wfserve_sessions_limit", "Realtime sessions that may be open at once (-max-sessions).",
			func() float64 { return float64(s.cfg.MaxSessions) }),
		&stateCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{s},
		MaxRequestsInFlight: 4,
	})
	return m
}

// promLogger sends promhttp's errors to the server's logger.
type promLogger struct{ s *Server }

func (l promLogger) Println(v ...any) {
	l.s.cfg.Logger.Warn("metrics", "error", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

// stateCollector reports, at each scrape, which variants are ready and the
// engine's device memory where the engine reports it (CUDA devices; the
// CPU engine reports none, and the process's own memory is
// process_resident_memory_bytes).
type stateCollector struct{ s *Server }

var (
	readyDesc = prometheus.NewDesc("wfserve_model_ready",
		"1 when the model's variant (version) has loaded, else 0.", []string{"model", "version"}, nil)
	revisionDesc = prometheus.NewDesc("wfserve_model_revision",
		"The revision a model's variant (version) serves: N of its model_version VARIANT@N (revision.go).", []string{"model", "version"}, nil)
	reloadsDesc = prometheus.NewDesc("wfserve_model_reloads_total",
		"Reloads of a model's variant: result ok (a new revision swapped in) or failed (the serving one stayed).", []string{"model", "version", "result"}, nil)
	invalidDesc = prometheus.NewDesc("wfserve_repository_invalid_manifests",
		"Manifests added to the model repository while serving (poll mode) that serve nothing: invalid, or naming a family already served (the repository index says why).", nil, nil)
	drainingDesc = prometheus.NewDesc("wfserve_model_revisions_draining",
		"Revisions swapped out or unloaded whose calls and sessions have not all finished: not yet freed.", nil, nil)
	memLoadsDesc = prometheus.NewDesc("wfserve_model_loads_total",
		"Loads of a model's variant on request under the model memory budget or keep-alive (lazyload.go), the pinned ones' at start included.", []string{"model", "version"}, nil)
	memEvictionsDesc = prometheus.NewDesc("wfserve_model_evictions_total",
		"Evictions of a model's variant: to make room under the model memory budget, or idle past its keep-alive.", []string{"model", "version"}, nil)
	memChargedDesc = prometheus.NewDesc("wfserve_model_resident_bytes",
		"The bytes a model's variant is charged in the model memory budget now (its checkpoint file's size while it loads or is loaded, else 0).", []string{"model", "version"}, nil)
	memUsedDesc = prometheus.NewDesc("wfserve_model_memory_resident_bytes",
		"The bytes charged in the model memory budget now: the models loaded and loading.", nil, nil)
	memBudgetDesc = prometheus.NewDesc("wfserve_model_memory_budget_bytes",
		"The model memory budget (-model-memory; 0: none, keep-alive only).", nil, nil)
	memFreeDesc = prometheus.NewDesc("wfserve_engine_memory_free_bytes",
		"Free memory of an accelerator the engine sees, as the engine reports it.", []string{"device"}, nil)
	memTotalDesc = prometheus.NewDesc("wfserve_engine_memory_total_bytes",
		"Total memory of an accelerator the engine sees, as the engine reports it.", []string{"device"}, nil)
	engineDesc = prometheus.NewDesc("wfserve_engine_info",
		"The execution engine the server runs models on (always 1).", []string{"engine", "version"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- revisionDesc
	ch <- reloadsDesc
	ch <- drainingDesc
	ch <- invalidDesc
	ch <- memLoadsDesc
	ch <- memEvictionsDesc
	ch <- memChargedDesc
	ch <- memUsedDesc
	ch <- memBudgetDesc
	ch <- memFreeDesc
	ch <- memTotalDesc
	ch <- engineDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.s.cat().order {
		for _, v := range m.sortedVariants() {
			ready := 0.0
			if v.loaded.Load() {
				ready = 1
			}
			ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready, m.oip.Spec.ModelFamilyID, v.id)
			if r := v.rev.Load(); r != nil && v.loaded.Load() {
				ch <- prometheus.MustNewConstMetric(revisionDesc, prometheus.GaugeValue, float64(r.n), m.oip.Spec.ModelFamilyID, v.id)
			}
			ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(v.reloads.ok.Load()), m.oip.Spec.ModelFamilyID, v.id, "ok")
			ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(v.reloads.failed.Load()), m.oip.Spec.ModelFamilyID, v.id, "failed")
		}
	}
	ch <- prometheus.MustNewConstMetric(drainingDesc, prometheus.GaugeValue, float64(c.s.drainingRevs.Load()))
	c.s.catMu.Lock()
	invalid := len(c.s.invalid)
	c.s.catMu.Unlock()
	ch <- prometheus.MustNewConstMetric(invalidDesc, prometheus.GaugeValue, float64(invalid))
	c.collectMemory(ch)
	e, err := engine.DefaultEngine()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(engineDesc, prometheus.GaugeValue, 1, e.Name(), e.Version())
	cuda, ok := e.(engine.CUDAEngine)
	if !ok {
		return
	}
	for i := range cuda.CUDADeviceCount() {
		d, err := cuda.CUDADevice(i)
		if err != nil {
			continue
		}
		dev := "cuda:" + strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(memFreeDesc, prometheus.GaugeValue, float64(d.FreeBytes), dev)
		ch <- prometheus.MustNewConstMetric(memTotalDesc, prometheus.GaugeValue, float64(d.TotalBytes), dev)
	}
}

// httpKey is a series of wfserve_http_requests_total.
type httpKey struct {
	pattern string
	code    int
}

// httpCounter returns the series of a route pattern and status (patterns
// and statuses are few: the map stays small).
func (m *metrics) httpCounter(pattern string, code int) prometheus.Counter {
	k := httpKey{pattern, code}
	if c, ok := m.httpByKey.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c := m.http.WithLabelValues(pattern, codeLabel(code))
	m.httpByKey.Store(k, c)
	return c
}

// taskObs observes the infer requests of one model's task: its metrics,
// resolved once, and the labels its spans carry.
type taskObs struct {
	t           *telemetry
	model, task string

	requests  *prometheus.CounterVec // curried: code left
	ok        prometheus.Counter     // code 200, the common case, looked up once
	duration  prometheus.Observer
	queue     prometheus.Observer
	compute   prometheus.Observer
	batchSize prometheus.Observer
}

// taskObs returns the observers of one model's task.
func (t *telemetry) taskObs(model, task string) *taskObs {
	o := &taskObs{t: t, model: model, task: task}
	if t.m == nil {
		return o
	}
	l := prometheus.Labels{"model": model, "task": task}
	o.requests = t.m.requests.MustCurryWith(l)
	o.ok = o.requests.WithLabelValues("200")
	o.duration = t.m.duration.With(l)
	o.queue = t.m.queue.With(l)
	o.compute = t.m.compute.With(l)
	o.batchSize = t.m.batchSize.With(l)
	return o
}

// queued records that a request admitted at admitted started its engine
// call at started.
func (o *taskObs) queued(ctx context.Context, admitted, started time.Time) {
	if o == nil {
		return
	}
	if o.queue != nil {
		o.queue.Observe(started.Sub(admitted).Seconds())
	}
	o.t.queueSpan(ctx, o, admitted, started)
}

// computed records a request's engine call of d.
func (o *taskObs) computed(d time.Duration) {
	if o != nil && o.compute != nil {
		o.compute.Observe(d.Seconds())
	}
}

// reqInfo is what the middleware and the handlers learn about one request,
// for its access log, metrics and span. observe puts it in the request's
// context; the handlers fill it in on the request's goroutine.
type reqInfo struct {
	arrived time.Time
	// obs is the model and task of an infer request (nil for other
	// endpoints).
	obs *taskObs
	// stream is set for an infer request answered with a stream: its
	// duration is the stream's, not a request's, and is not observed.
	stream bool
	// span is the request's span (nil without tracing).
	span trace.Span
	// key is the request's API key (nil when the server asks for none, or
	// before auth found it).
	key *apiKey
}

// infoKey is the context key of a request's *reqInfo.
type infoKey struct{}

// requestInfo returns the request's info, or nil outside observe.
func requestInfo(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(infoKey{}).(*reqInfo)
	return ri
}

// setObs records the model and task of an infer request.
func setObs(ctx context.Context, o *taskObs) {
	if ri := requestInfo(ctx); ri != nil {
		ri.obs = o
	}
}

// markStream records that an infer request is answered with a stream.
func markStream(ctx context.Context) {
	if ri := requestInfo(ctx); ri != nil {
		ri.stream = true
	}
}

// obsOf returns the model and task observers of an infer request.
func obsOf(ctx context.Context) *taskObs {
	if ri := requestInfo(ctx); ri != nil {
		return ri.obs
	}
	return nil
}

// codeLabels are the code label values of the statuses 100-599.
var codeLabels = func() (l [600]string) {
	for i := 100; i < len(l); i++ {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func codeLabel(code int) string {
	if code >= 100 && code < len(codeLabels) {
		return codeLabels[code]
	}
	return strconv.Itoa(code)
}

// finish records an answered request: its metrics, and the end of its
// span. pattern is the route pattern that served it ("" when a middleware
// answered it before routing).
func (t *telemetry) finish(s *Server, r *http.Request, ri *reqInfo, rec *recorder, end time.Time) {
	if t.m != nil {
		pattern := r.Pattern
		if pattern == "" {
			_, pattern = s.mux.Handler(r) // refused by a middleware (auth, drain)
		}
		if pattern == "" {
			pattern = "none"
		}
		t.m.httpCounter(pattern, rec.status).Inc()
		t.m.countKey(ri.key, rec.status)
		ri.answered(rec.status, end)
	}
	if ri.span != nil {
		t.endSpan(r, ri, rec, end)
	}
}

// countKey counts a request of key (nil: none) answered code.
func (m *metrics) countKey(k *apiKey, code int) {
	if k != nil {
		m.keys.WithLabelValues(k.Name, strconv.Itoa(code)).Inc()
	}
}

// answered records the answer to an infer request (REST or gRPC) with
// the HTTP status it has (or would have over REST): the requests counter
// and, unless it was a stream, its duration. Other requests (ri.obs nil)
// are not counted here.
func (ri *reqInfo) answered(code int, end time.Time) {
	o := ri.obs
	if o == nil || o.requests == nil {
		return
	}
	if code == http.StatusOK {
		o.ok.Inc()
	} else {
		o.requests.WithLabelValues(codeLabel(code)).Inc()
	}
	if !ri.stream {
		o.duration.Observe(end.Sub(ri.arrived).Seconds())
	}
}

// collectMemory reports the model memory budget's state (lazyload.go),
// when the server has one.
func (c *stateCollector) collectMemory(ch chan<- prometheus.Metric) {
	mem := c.s.mem
	if mem == nil {
		return
	}
	used, charged, loads, evictions := mem.stats()
	for _, m := range c.s.cat().order {
		for _, v := range m.sortedVariants() {
			u := v.unit
			name := m.oip.Spec.ModelFamilyID
			ch <- prometheus.MustNewConstMetric(memLoadsDesc, prometheus.CounterValue, float64(loads[u]), name, v.id)
			ch <- prometheus.MustNewConstMetric(memEvictionsDesc, prometheus.CounterValue, float64(evictions[u]), name, v.id)
			ch <- prometheus.MustNewConstMetric(memChargedDesc, prometheus.GaugeValue, float64(charged[u]), name, v.id)
		}
	}
	ch <- prometheus.MustNewConstMetric(memUsedDesc, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(memBudgetDesc, prometheus.GaugeValue, float64(mem.budget))
}
