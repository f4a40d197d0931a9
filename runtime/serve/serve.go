// Package serve serves model families over the Open Inference Protocol
// (KServe v2) REST API: health, server and model metadata, model readiness
// and inference, realtime streams as Server-Sent Events with controls sent
// to the running session, cross-request batching of batchable tasks through
// the batch executor, and the OpenAPI document of the served families.
//
// A Server is an http.Handler. Requests run through runtime/client, one
// client per family variant, so they run exactly as in-process calls do.
// The mapping between tasks and the protocol is package oip's; the
// endpoints, limits and error statuses are documented in docs/serving.md.
//
// The package is laid out by concern: routes.go maps the endpoints
// (http.ServeMux patterns) to handlers; middleware.go holds what wraps every
// request (request id, access log, drain, auth); admission.go bounds the
// work in flight (requests, bytes, engine slots per model) and tracks it
// for drain; infer.go and stream.go answer infer requests and realtime
// streams; batcher.go merges requests across clients; repository.go,
// reload.go, revision.go and poll.go load, unload and reload models while
// serving (explicit and poll model control, revisions swapped without
// downtime); memory.go and lazyload.go load models on request under a
// resident-memory budget, evicting the least recently used, with
// keep-alive and pins; errors.go maps errors
// to statuses and the protocol's error body; metrics.go and tracing.go
// record Prometheus metrics (GET /metrics) and OpenTelemetry spans.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Config configures a Server. Zero values take the defaults named below.
// Every byte and second a client can make the server spend is bounded by
// one of these and counted from the request's arrival.
type Config struct {
	// Name and Version are what GET /v2 reports (default "wfserve" and the
	// module's version).
	Name, Version string
	// MaxBodyBytes bounds a request body (default 64 MiB); a larger one is
	// answered 413.
	MaxBodyBytes int64
	// MaxTensorBytes bounds the bytes of one decoded input tensor (default
	// 16 MiB: 4 Mi float32 or 2 Mi int64 elements); a larger one is
	// answered 400.
	MaxTensorBytes int64
	// MaxInflightBytes bounds the bytes of the requests in flight: twice
	// their bodies (as read, and their tensors' data as decoding holds it)
	// plus their decoded input tensors, each request's held until it is
	// answered (default 4 × MaxBodyBytes; at least 2 × MaxBodyBytes). A
	// request that would go beyond it is answered 429 — before its body is
	// read when it declares its length.
	MaxInflightBytes int64
	// Timeout is the deadline of one infer request, from its arrival
	// (default 60 s; negative means none): its body must be read and its
	// answer ready by then. A body still arriving at the deadline is
	// answered 408; a request still running, 504, and its work is
	// cancelled.
	Timeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no request for
	// this long (default 30 s); see HTTPServer.
	IdleTimeout time.Duration
	// MaxQueue bounds the infer requests admitted at once, queued or
	// running (default 256); beyond it requests are answered 429.
	MaxQueue int
	// MaxConcurrent bounds the engine calls that run at once for each
	// served variant — requests, cross-request batches and stream chunks
	// alike (default 1: libtorch already spreads one call over its
	// intra-op threads). Each variant has slots of its own, so a slow
	// model never holds another's.
	MaxConcurrent int
	// Batching merges concurrent infer requests to a batchable task into
	// one batch of up to the task's max_batch_size.
	Batching bool
	// BatchInvariant, with Batching, pads every forward call of a batched
	// task to its max batch size (client.WithBatchInvariant), so that an
	// answer never depends on how requests were grouped: it is the answer
	// an in-process client in the same mode gives, bit for bit. It costs
	// latency when batches run short (docs/batching.md); wfserve turns it
	// on with -batch unless -batch-invariant=false.
	BatchInvariant bool
	// NoWarmup skips the warm-up Load runs for every task whose manifest
	// has a warmup block.
	NoWarmup bool
	// BatchDelay is how long the oldest queued request of a batchable task
	// waits for others to join its batch (default 0: a batch takes what
	// has queued while the previous one ran). It does not wait when every
	// request the server has admitted is already queued there.
	BatchDelay time.Duration
	// MaxSessions bounds the realtime streams open at once (default 16);
	// beyond it a stream is answered 429. Their chunks take the variant's
	// engine slots like requests do.
	MaxSessions int
	// Token, when set, is the bearer token every request but the health
	// probes must carry (Authorization: Bearer TOKEN); others are answered
	// 401 without their body being read. It is one key named "token", with
	// no model list and no rate (see Keys).
	Token string
	// ModelControl is how models are loaded (repository.go): ControlNone
	// (the default: every model at start; load and unload refused),
	// ControlExplicit (StartupModels at start, the others when asked; a
	// load of a loaded model reloads what changed) or ControlPoll (every
	// model at start, reloaded when its manifest or checkpoint changes:
	// poll.go).
	ModelControl string
	// PollInterval is how often ControlPoll looks at the manifests and
	// checkpoints (default DefaultPollInterval).
	PollInterval time.Duration
	// ReadManifest rereads a family's manifest (Family.Manifest) for a
	// reload; nil: a reload takes only the checkpoints' new contents. The
	// spec it returns may differ from the serving one in its variants'
	// checkpoints only (anything else needs a restart).
	ReadManifest func(path string) (*spec.ModelInferenceSpec, error)
	// Discover, with ControlPoll, lists the manifest files in the model
	// repository now: at each poll, a listed manifest no served family
	// was read from is read with OpenFamily and its model added and
	// loaded, and a family of the repository (Family.Repository set) whose
	// manifest is no longer listed is unloaded (poll.go). Nil: the
	// families stay those given to New.
	Discover func() ([]string, error)
	// OpenFamily reads and validates a manifest Discover found, for poll
	// mode to add: its family, or why it serves nothing (logged, and
	// listed in the repository index).
	OpenFamily func(path string) (Family, error)
	// StartupModels are the families (ids or aliases) loaded at start in
	// explicit mode.
	StartupModels []string
	// DefaultPriority is the priority level of an infer request that gives
	// none (its "priority" parameter 0 or absent): 1 is served first,
	// larger levels later (priority.go). Default DefaultPriority (3).
	DefaultPriority int
	// Keys, when set, are the API keys requests must carry instead of
	// Token: each with a name (logs, metrics), optional models and a rate
	// (keys.go). Replace them while serving with Keys.Reload or Keys.Set.
	Keys *Keys
	// Logger receives one access log record per request (default
	// logctx.Logger()); its handler is wrapped in logctx.NewHandler, so
	// records carry the request's correlation id ("request_id": the
	// X-Request-ID header, or a fresh id echoed in that header).
	Logger *slog.Logger
	// DisableMetrics turns off the Prometheus metrics and GET /metrics
	// (docs/serving.md lists them). The endpoint, like every one but the
	// health probes, needs the bearer token when Token is set.
	DisableMetrics bool
	// DisablePlayground turns off the playground: the web pages of the
	// served families at GET / and /playground/ (runtime/playground; the
	// pages need no token, the API calls they make carry it).
	DisablePlayground bool
	// TracerProvider, when set, traces every request with OpenTelemetry: a
	// server span (a child of the W3C traceparent the request carries),
	// and spans of an infer request's queue wait and engine call and of
	// cross-request batch runs (tracing.go). Nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
	// Propagator extracts the caller's trace context from request headers
	// (default: W3C Trace Context, the traceparent header).
	Propagator propagation.TextMapPropagator
	// SessionKey, when set (at least stream.MinKeyBytes), seals the
	// snapshots of realtime sessions and opens the tokens sessions are
	// restored from (snapshot.go); replicas that share it restore each
	// other's. Without it snapshot and restore requests are refused (501).
	SessionKey []byte
	// ModelMemory, when positive, is the resident-memory budget of the
	// loaded models, in bytes (memory.go, lazyload.go): models load on
	// their first request instead of at start, each variant charged its
	// model checkpoint file's size, and the least recently used unpinned
	// ones are evicted when the next would not fit. A model larger than
	// the whole budget is refused (507). It works with ControlNone and
	// ControlPoll (a reload is charged beside the serving revision;
	// families added load on request), not with ControlExplicit
	// (ErrExplicitWithMemory).
	ModelMemory int64
	// ModelKeepAlive, when positive, unloads a model (variant) idle for
	// this long, under the budget or not; it loads again on its next
	// request. Lazy loading is on with it, as with ModelMemory.
	ModelKeepAlive time.Duration
	// PinModels are the families (ids or aliases) loaded at start and
	// never evicted while models load lazily (ModelMemory or
	// ModelKeepAlive); their checkpoints must fit in the budget together.
	PinModels []string
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 64 << 20
	DefaultMaxTensorBytes = 16 << 20
	DefaultTimeout        = 60 * time.Second
	DefaultIdleTimeout    = 30 * time.Second
	DefaultMaxQueue       = 256
	DefaultMaxSessions    = 16
)

func (c *Config) defaults() error {
	if err := checkSessionKey(c.SessionKey); err != nil {
		return err
	}
	if c.Name == "" {
		c.Name = "wfserve"
	}
	if c.Version == "" {
		c.Version = moduleVersion()
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.DefaultPriority <= 0 {
		c.DefaultPriority = DefaultPriority
	}
	switch c.ModelControl {
	case "":
		c.ModelControl = ControlNone
	case ControlNone, ControlExplicit, ControlPoll:
	default:
		return fmt.Errorf("serve: model control %q: want %s, %s or %s", c.ModelControl, ControlNone, ControlExplicit, ControlPoll)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if err := c.checkMemory(); err != nil {
		return err
	}
	if c.ModelControl != ControlExplicit && len(c.StartupModels) > 0 {
		return fmt.Errorf("serve: startup models %v are for explicit model control (every model loads at start otherwise)", c.StartupModels)
	}
	if c.MaxTensorBytes <= 0 {
		c.MaxTensorBytes = DefaultMaxTensorBytes
	}
	if c.MaxInflightBytes <= 0 {
		c.MaxInflightBytes = 4 * c.MaxBodyBytes
	}
	if c.MaxInflightBytes < bodyCost*c.MaxBodyBytes {
		return fmt.Errorf("serve: max in-flight bytes %d is below twice the max body size %d, so a body of the largest size could never be read", c.MaxInflightBytes, c.MaxBodyBytes)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 1
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.Logger == nil {
		c.Logger = logctx.Logger()
	}
	// Records carry the request's correlation fields whatever the handler.
	c.Logger = slog.New(logctx.NewHandler(c.Logger.Handler()))
	return nil
}

// Config returns the server's configuration with every default applied:
// what the limits in force are (MaxInflightBytes, MaxQueue, ...).
func (s *Server) Config() Config { return s.cfg }

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// Family is one family to serve and the client options its variants are
// created with (checkpoint root, manifest folder, device...).
type Family struct {
	// Spec is the family's spec.
	Spec *spec.ModelInferenceSpec
	// Options are passed to client.New for each variant, before the
	// variant itself.
	Options []client.Option
	// Manifest is the file Spec was read from, if any: poll mode watches
	// it, and a reload rereads it (Config.ReadManifest).
	Manifest string
	// Repository, when set, is the model repository's folder the family
	// was found in: its manifest and the checkpoint files it names must
	// resolve (symbolic links followed) inside it, at every load and
	// reload.
	Repository string
}

// model is one served family.
type model struct {
	oip      *oip.Model
	variants map[string]*variant // by variant id
	openapi  []byte
	control  sync.Mutex // one load, unload or reload at a time (repository.go)
	// source is where the model's revisions come from: its manifest and
	// client options (reload.go); guarded by control.
	source source
	seen   string    // what poll mode saw of its files last (poll.go); guarded by control
	obs    *modelObs // its metrics' observers (metrics.go)
	// sessions is the realtime sessions of the model open now (stream.go).
	sessions atomic.Int64
	// added: poll mode added it while serving; removed: poll mode
	// unloaded it, its manifest gone from the repository (poll.go).
	// Neither counts for the server's readiness.
	added, removed atomic.Bool
}

// variant is one served variant: the revision it serves, its load state,
// engine slots and batchers.
type variant struct {
	id        string
	family    string                   // its family's id
	rev       atomic.Pointer[revision] // the revision serving (revision.go); nil once unloaded
	revisions atomic.Int64             // the last revision number given
	// kept: the older revisions served beside rev under a version
	// policy that keeps the latest N, newest first (revision.go);
	// replaced, never changed, under the model's control lock.
	kept      atomic.Pointer[[]*revision]
	loaded    atomic.Bool
	loadErr   atomic.Pointer[error]
	reloadErr atomic.Pointer[error]  // the last reload's failure, the old revision serving on
	held      atomic.Pointer[string] // poll mode: the change a pinned version policy did not load (reload.go)
	reloads   reloadCounts
	unit      *memUnit                                // its unit of the model memory budget (lazyload.go); nil without one
	slots     slots                                   // engine calls at once (Config.MaxConcurrent)
	callers   *callers                                // the goroutines engine calls run on
	batchers  map[*spec.InferenceTaskProfile]*batcher // batchable tasks only
}

// Server serves families over OIP; it is an http.Handler. Create it with
// New, load the models with Load, serve it (HTTPServer gives an http.Server
// with the timeouts it needs), and stop it with Shutdown then Close.
type Server struct {
	cfg      Config
	catp     atomic.Pointer[catalog]     // the served models (cat)
	catMu    sync.Mutex                  // one change of the catalog at a time; guards dropped and invalid
	dropped  []*model                    // models replaced in the catalog: closed by Close
	invalid  map[string]*invalidManifest // poll mode: manifests added to the repository that serve nothing, by path (poll.go)
	docsp    atomic.Pointer[servedDocs]  // the OpenAPI document and playground of the families served (playground.go)
	docsMu   sync.Mutex                  // one making of them at a time
	notFound http.HandlerFunc            // the answer to paths that are not the protocol's or the playground's
	lim      oip.Limits
	handler  http.Handler // the routes inside the middleware

	adm      admission
	active   atomic.Int64 // infer requests being read, queued or run; not sessions, which join no batch
	draining atomic.Bool
	inflight tracker      // admitted infer requests, their engine calls, open streams
	lastSeen atomic.Int64 // unix nanoseconds of the last request's arrival

	streamCtx    context.Context // cancelled by Shutdown: ends open streams
	writeCtx     context.Context // cancelled shutdownGrace after Shutdown began: cuts sessions' writes
	health       *healthService  // the gRPC health service (health.go)
	keys         *Keys           // the API keys (Config.Keys, or Token's), nil for none
	started      atomic.Bool     // Load has run
	closed       chan struct{}   // closed by Close: the engine callers return
	closeOnce    sync.Once
	cancelStream context.CancelFunc
	cancelWrites context.CancelFunc
	sessions     sync.Map // session id → *session
	receiving    sync.Map // *byte → func(): cuts the arrival of a request's payload (whileReceiving)
	nsessions    atomic.Int64
	counters     counters
	drainingRevs atomic.Int64 // revisions swapped out, not yet freed
	mem          *memory      // the model memory budget (memory.go), nil when models do not load lazily
	pollStop     chan struct{}
	pollDone     chan struct{}

	tel *telemetry     // metrics and tracing
	mux *http.ServeMux // the routes (routes.go)
}

// counters are the Server's running totals.
type counters struct {
	batches, batched atomic.Int64
}

// Stats are running totals of a Server.
type Stats struct {
	// Batches is the number of cross-request batches run.
	Batches int64
	// BatchedRequests is the number of requests those batches held.
	BatchedRequests int64
	// InflightBytes is the bytes of the requests in flight now (bodies and
	// decoded tensors; see Config.MaxInflightBytes).
	InflightBytes int64
	// Admitted is the infer requests admitted now, queued or running.
	Admitted int64
	// Sessions is the realtime sessions open now (see
	// Config.MaxSessions).
	Sessions int64
	// SlotWaiters is the calls waiting for an engine slot now, over every
	// variant (requests, batches, session steps).
	SlotWaiters int64
	// DrainingRevisions is the revisions swapped out by a reload or taken
	// out by an unload whose calls and sessions have not all finished:
	// not freed yet (revision.go).
	DrainingRevisions int64
}

// Stats returns the server's running totals.
func (s *Server) Stats() Stats {
	st := Stats{Batches: s.counters.batches.Load(), BatchedRequests: s.counters.batched.Load(),
		InflightBytes: s.adm.bytesInUse(), Admitted: s.adm.requests.Load(), Sessions: s.nsessions.Load(),
		DrainingRevisions: s.drainingRevs.Load()}
	for _, m := range s.cat().order {
		for _, v := range m.variants {
			st.SlotWaiters += v.slots.waiters()
		}
	}
	return st
}

// New returns a server for families. Every family id and alias names one
// family; each variant gets a client (loaded by Load or on first use).
func New(cfg Config, families ...Family) (_ *Server, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, invalid: map[string]*invalidManifest{},
		lim: oip.Limits{MaxTensorBytes: cfg.MaxTensorBytes, MaxInputs: 1024},
		adm: admission{maxRequests: int64(cfg.MaxQueue), maxBytes: cfg.MaxInflightBytes}}
	s.streamCtx, s.cancelStream = context.WithCancel(context.Background())
	s.writeCtx, s.cancelWrites = context.WithCancel(context.Background())
	s.closed = make(chan struct{})
	defer func() {
		if err != nil {
			s.Close() // the batchers and clients made so far
		}
	}()
	cat := &catalog{models: map[string]*model{}}
	s.catp.Store(cat) // filled before anyone else sees it
	for _, f := range families {
		m, err := s.newModel(f)
		if err != nil {
			return nil, err
		}
		if err := cat.add(m, nil); err != nil {
			m.close()
			return nil, err
		}
	}
	if _, err := oip.OpenAPI(cat.specs()...); err != nil {
		return nil, err
	}
	s.tel = newTelemetry(s)
	for _, name := range cfg.StartupModels {
		if s.cat().models[name] == nil {
			return nil, fmt.Errorf("serve: startup model %q is not served (served: %s)", name, s.modelNames())
		}
	}
	if cfg.managesMemory() {
		if err := s.newMemoryOf(); err != nil {
			return nil, err
		}
	}
	s.health = newHealthService(s)
	switch {
	case cfg.Keys != nil:
		s.keys = cfg.Keys
	case cfg.Token != "":
		s.keys = NewKeys(Key{Name: "token", Key: cfg.Token})
	}
	s.handler = s.observe(s.drainGuard(s.auth(s.routes())))
	s.docs() // the start's families' documents, made now (a playground that cannot be made is logged at start)
	return s, nil
}

// newModel makes the model of family f: a client per variant (loaded by
// Load, on request, or on first use), its engine slots and batchers.
func (s *Server) newModel(f Family) (_ *model, err error) {
	om, err := oip.NewModel(f.Spec)
	if err != nil {
		return nil, err
	}
	m := &model{oip: om, variants: map[string]*variant{}, source: source{spec: f.Spec, options: f.Options, manifest: f.Manifest, repository: f.Repository}}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	for i := range f.Spec.Variants {
		vid := f.Spec.Variants[i].VariantID
		sl := newSlots(s.cfg.MaxConcurrent)
		c, err := s.newClient(m.source, vid, "", sl)
		if err != nil {
			return nil, err
		}
		v := &variant{id: vid, family: f.Spec.ModelFamilyID, slots: sl, callers: newCallers(s.cfg.MaxConcurrent, s.closed),
			batchers: map[*spec.InferenceTaskProfile]*batcher{}}
		// Revision 1, loaded by Load (or on first use).
		first := newRevision(vid, v.revisions.Add(1), c, "")
		first.fresh = true
		v.rev.Store(first)
		if s.cfg.Batching {
			for j := range f.Spec.Tasks {
				t := &f.Spec.Tasks[j]
				if t.Batching != nil && len(t.BatchingProblems()) == 0 {
					v.batchers[t] = newBatcher(v.pinAt, t, v.slots, s.cfg.BatchDelay, &s.counters, s.active.Load)
				}
			}
		}
		m.variants[vid] = v
	}
	doc, err := oip.OpenAPI(f.Spec)
	if err != nil {
		return nil, err
	}
	m.openapi = doc
	return m, nil
}

// close stops m's batchers and releases its variants' modules.
func (m *model) close() {
	for _, v := range m.variants {
		for _, b := range v.batchers {
			b.close()
		}
		if r := v.rev.Load(); r != nil {
			r.client.Close()
		}
		for _, r := range v.keptRevisions() {
			r.client.Close()
		}
	}
}

// catalog is the set of served models. It is replaced, never changed, once
// published (Server.cat): poll mode adds and removes models while
// serving (poll.go).
type catalog struct {
	models map[string]*model // by family id and alias
	order  []*model
}

// cat returns the models served now.
func (s *Server) cat() *catalog { return s.catp.Load() }

// add adds m to c, replacing the models of replace (those m's names may
// take over); an error when a name of m is another model's.
func (c *catalog) add(m *model, replace map[*model]bool) error {
	sp := m.oip.Spec
	for _, name := range append([]string{sp.ModelFamilyID}, sp.Aliases...) {
		if o, dup := c.models[name]; dup && !replace[o] {
			return fmt.Errorf("serve: two families are named %q", name)
		}
	}
	for name, o := range c.models {
		if replace[o] {
			delete(c.models, name)
		}
	}
	if len(replace) > 0 {
		c.order = slices.DeleteFunc(c.order, func(o *model) bool { return replace[o] })
	}
	for _, name := range append([]string{sp.ModelFamilyID}, sp.Aliases...) {
		c.models[name] = m
	}
	c.order = append(c.order, m)
	return nil
}

// specs returns the specs of c's models, in order.
func (c *catalog) specs() []*spec.ModelInferenceSpec {
	out := make([]*spec.ModelInferenceSpec, len(c.order))
	for i, m := range c.order {
		out[i] = m.oip.Spec
	}
	return out
}

// clone returns a copy of c to change.
func (c *catalog) clone() *catalog {
	out := &catalog{models: make(map[string]*model, len(c.models)), order: slices.Clone(c.order)}
	for k, v := range c.models {
		out.models[k] = v
	}
	return out
}

// HTTPServer returns an http.Server that serves s with the connection
// timeouts the server's bounds need: request headers within 10 s, a
// keep-alive connection closed after Config.IdleTimeout without a request,
// headers of at most 64 KiB. Bodies, answers and streams get per-request
// deadlines from the handlers (Config.Timeout from arrival).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}

// Load loads every variant of every family now (in explicit model
// control, those of Config.StartupModels) and warms up the tasks whose
// manifest asks for it (a warmup block: one call per batch size the
// executor pads to, so that the first requests after ready do not pay for
// TorchScript's profiling runs), unless Config.NoWarmup. It returns the
// joined load and warm-up errors. The server is ready (GET
// /v2/health/ready) once every variant has loaded and warmed up.
func (s *Server) Load() error {
	startup := map[*model]bool{}
	for _, name := range s.cfg.StartupModels {
		startup[s.cat().models[name]] = true
	}
	var errs []error
	if s.mem != nil {
		// Models load on request; the pinned ones now.
		err := s.mem.loadPinned()
		if s.cfg.ModelKeepAlive > 0 {
			s.mem.start(keepAliveTick(s.cfg.ModelKeepAlive))
		}
		s.started.Store(true)
		s.health.notify()
		if err == nil {
			s.startPolling() // poll mode: reloads charged beside the serving revision, added families loaded on request
		}
		return err
	}
	for _, m := range s.cat().order {
		if s.explicit() && !startup[m] {
			continue
		}
		for _, v := range m.sortedVariants() {
			if err := s.loadVariant(m, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.started.Store(true)
	s.health.notify() // the failures too
	if len(errs) == 0 {
		s.startPolling()
	}
	return errors.Join(errs...)
}

func (m *model) sortedVariants() []*variant {
	out := make([]*variant, 0, len(m.variants))
	for i := range m.oip.Spec.Variants {
		out = append(out, m.variants[m.oip.Spec.Variants[i].VariantID])
	}
	return out
}

// ready reports whether every variant has loaded and the server is not
// draining.
func (s *Server) ready() error {
	if s.draining.Load() {
		return errors.New("the server is shutting down")
	}
	if s.explicit() || s.mem != nil {
		// Models come and go on request: the server is ready once Load
		// has loaded the startup models (each model says its own).
		if !s.started.Load() {
			return errors.New("the startup models are not loaded yet")
		}
		return nil
	}
	for _, m := range s.cat().order {
		if m.added.Load() || m.removed.Load() {
			continue // poll mode's: each says its own
		}
		for _, v := range m.sortedVariants() {
			if err := v.ready(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v *variant) ready(m *model) error {
	if v.loaded.Load() {
		return nil
	}
	if p := v.loadErr.Load(); p != nil && errors.Is(*p, errEvicted) {
		return fmt.Errorf("%s/%s is not loaded (evicted; it loads on its next request)", m.oip.Spec.ModelFamilyID, v.id)
	}
	if p := v.loadErr.Load(); p != nil && errors.Is(*p, errRemoved) {
		return fmt.Errorf("%s/%s is %w", m.oip.Spec.ModelFamilyID, v.id, errRemoved)
	}
	if p := v.loadErr.Load(); p != nil && errors.Is(*p, errUnloaded) {
		return fmt.Errorf("%s/%s is unloaded", m.oip.Spec.ModelFamilyID, v.id)
	}
	if p := v.loadErr.Load(); p != nil {
		return fmt.Errorf("%s/%s failed to load: %w", m.oip.Spec.ModelFamilyID, v.id, *p)
	}
	if v.unit != nil {
		return fmt.Errorf("%s/%s is not loaded (it loads on its first request)", m.oip.Spec.ModelFamilyID, v.id)
	}
	return fmt.Errorf("%s/%s is not loaded yet", m.oip.Spec.ModelFamilyID, v.id)
}

// whileReceiving registers cut, which ends the arrival of a request's
// payload (a REST body, a gRPC message), for Shutdown to call while the
// payload arrives: a client still sending when the server drains gets its
// answer (503) at once, instead of holding the drain to its timeout and
// then losing its connection unanswered. done unregisters it.
func (s *Server) whileReceiving(cut func()) (done func()) {
	key := new(byte)
	s.receiving.Store(key, cut)
	if s.draining.Load() {
		cut()
	}
	return func() { s.receiving.Delete(key) }
}

// errDrainingArriving answers a request whose payload was still arriving
// when the server began to drain.
var errDrainingArriving = withStatus(http.StatusServiceUnavailable, "the server is shutting down (the request had not arrived whole); retry")

// sessionWriteTimeout bounds how long one message of a realtime session
// may take to reach its client (SSE, WebSocket, gRPC): a client that stops
// reading loses its session, and its place among MaxSessions, rather than
// holding them.
const sessionWriteTimeout = 10 * time.Second

// shutdownGrace is how long, once the server drains, the last messages of
// the sessions it ends (the error event that says so) may take to reach
// their clients: then the writes still blocked on a client that does not
// read are cut, so that no such client holds the drain.
const shutdownGrace = time.Second

// LingerQuiet is how long Shutdown waits, once the work in flight is done,
// for a moment without new requests before it returns. Clients still
// sending on their keep-alive connections get a 503 with Connection: close
// meanwhile, instead of a connection closed under a request they are
// sending (a reset).
const LingerQuiet = 250 * time.Millisecond

// Shutdown drains the server: from now on it is not ready, new requests
// are answered 503 with Connection: close (and every response closes its
// connection), so are those whose body or message is still arriving, open
// streams end (with an error event), and it waits until
// every admitted request has been answered and no request has arrived for
// LingerQuiet, or ctx is done. Then call http.Server.Shutdown to stop
// accepting connections and close the idle ones; Close afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.health.notify() // every status NOT_SERVING; watches end
	s.receiving.Range(func(_, cut any) bool {
		cut.(func())()
		return true
	})
	s.cancelStream()
	time.AfterFunc(shutdownGrace, s.cancelWrites)
	select {
	case <-s.inflight.drain():
	case <-ctx.Done():
		return fmt.Errorf("serve: shutdown: work still in flight (%d: requests being read or run, engine calls, sessions): %w", s.inflight.count(), ctx.Err())
	}
	for {
		quiet := time.Since(time.Unix(0, s.lastSeen.Load()))
		if quiet >= LingerQuiet {
			return nil
		}
		t := time.NewTimer(LingerQuiet - quiet)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil // the work is done; only the linger was cut short
		}
	}
}

// Close stops the batchers and releases every client's model. Call it
// after Shutdown.
func (s *Server) Close() error {
	s.draining.Store(true)
	s.cancelStream()
	s.cancelWrites()
	s.closeOnce.Do(func() {
		close(s.closed)
		s.stopPolling()
		if s.mem != nil {
			s.mem.stopAll()
		}
	})
	for _, m := range s.cat().order {
		m.close()
	}
	s.catMu.Lock()
	for _, m := range s.dropped {
		m.close()
	}
	s.dropped = nil
	s.catMu.Unlock()
	return nil
}

// ServeHTTP answers a request (see docs/serving.md for the endpoints).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }
