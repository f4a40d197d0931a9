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
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfoundry/wfgen/runtime"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/oip"
)

// Config configures a Server. Zero values take the defaults named below.
type Config struct {
	// Name and Version are what GET /v2 reports (default "wfserve" and the
	// module's version).
	Name, Version string
	// MaxBodyBytes bounds a request body (default 64 MiB); a larger one is
	// answered 413.
	MaxBodyBytes int64
	// MaxTensorBytes bounds one input tensor's elements (default 16 MiB); a
	// larger one is answered 400.
	MaxTensorBytes int64
	// Timeout is the deadline of one infer request, from its arrival
	// (default 60 s; negative means none). Past it the request is answered
	// 504 and its work is cancelled.
	Timeout time.Duration
	// MaxQueue bounds the infer requests admitted at once, queued or
	// running (default 256); beyond it requests are answered 429.
	MaxQueue int
	// MaxConcurrent bounds the requests that run through the engine at once
	// outside cross-request batching (default 1: libtorch already spreads
	// one call over its intra-op threads).
	MaxConcurrent int
	// Batching merges concurrent infer requests to a batchable task into
	// one batch of up to the task's max_batch_size.
	Batching bool
	// BatchDelay is how long the oldest queued request of a batchable task
	// waits for others to join its batch (default 0: a batch takes what
	// has queued while the previous one ran). It does not wait when every
	// request the server has admitted is already queued there.
	BatchDelay time.Duration
	// MaxSessions bounds the realtime streams open at once (default 16);
	// beyond it a stream is answered 429.
	MaxSessions int
	// Token, when set, is the bearer token every request but the health
	// probes must carry (Authorization: Bearer TOKEN); others are answered
	// 401.
	Token string
	// Logger receives one access log record per request (default
	// logctx.Logger()); its handler is wrapped in logctx.NewHandler, so
	// records carry the request's correlation id ("request_id": the
	// X-Request-ID header, or a fresh id echoed in that header).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 64 << 20
	DefaultMaxTensorBytes = 16 << 20
	DefaultTimeout        = 60 * time.Second
	DefaultMaxQueue       = 256
	DefaultMaxSessions    = 16
)

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "wfserve"
	}
	if c.Version == "" {
		c.Version = moduleVersion()
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxTensorBytes <= 0 {
		c.MaxTensorBytes = DefaultMaxTensorBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
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
}

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
	Spec *runtime.ModelInferenceSpec
	// Options are passed to client.New for each variant, before the
	// variant itself.
	Options []client.Option
}

// model is one served family.
type model struct {
	oip      *oip.Model
	variants map[string]*variant // by variant id
	openapi  []byte
}

// variant is one served variant: its client, load state and batchers.
type variant struct {
	id       string
	client   *client.Client
	loaded   atomic.Bool
	loadErr  atomic.Pointer[error]
	batchers map[string]*batcher // by task id, batchable tasks only
}

// Server serves families over OIP; it is an http.Handler. Create it with
// New, load the models with Load, and stop it with Shutdown then Close.
type Server struct {
	cfg     Config
	models  map[string]*model // by family id and alias
	order   []*model
	openapi []byte
	lim     oip.Limits

	admitted atomic.Int64  // infer requests queued or running
	slots    chan struct{} // MaxConcurrent engine slots (unbatched runs)
	draining atomic.Bool
	inflight tracker // admitted infer requests, their engine calls, open streams

	streamCtx    context.Context // cancelled by Shutdown: ends open streams
	cancelStream context.CancelFunc
	sessions     sync.Map // session id → *session
	nsessions    atomic.Int64
	counters     counters
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
}

// Stats returns the server's running totals.
func (s *Server) Stats() Stats {
	return Stats{Batches: s.counters.batches.Load(), BatchedRequests: s.counters.batched.Load()}
}

// New returns a server for families. Every family id and alias names one
// family; each variant gets a client (loaded by Load or on first use).
func New(cfg Config, families ...Family) (_ *Server, err error) {
	cfg.defaults()
	s := &Server{cfg: cfg, models: map[string]*model{}, slots: make(chan struct{}, cfg.MaxConcurrent),
		lim: oip.Limits{MaxTensorBytes: cfg.MaxTensorBytes, MaxInputs: 1024}}
	s.streamCtx, s.cancelStream = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.Close() // the batchers and clients made so far
		}
	}()
	var specs []*runtime.ModelInferenceSpec
	for _, f := range families {
		om, err := oip.NewModel(f.Spec)
		if err != nil {
			return nil, err
		}
		m := &model{oip: om, variants: map[string]*variant{}}
		s.order = append(s.order, m)
		for _, name := range append([]string{f.Spec.ModelFamilyID}, f.Spec.Aliases...) {
			if _, dup := s.models[name]; dup {
				return nil, fmt.Errorf("serve: two families are named %q", name)
			}
			s.models[name] = m
		}
		for i := range f.Spec.Variants {
			vid := f.Spec.Variants[i].VariantID
			opts := append(append([]client.Option{}, f.Options...), client.WithVariant(vid))
			c, err := client.New(f.Spec, opts...)
			if err != nil {
				return nil, err
			}
			v := &variant{id: vid, client: c, batchers: map[string]*batcher{}}
			if cfg.Batching {
				for j := range f.Spec.Tasks {
					t := &f.Spec.Tasks[j]
					if t.Batching != nil && len(t.BatchingProblems()) == 0 {
						v.batchers[t.TaskID] = newBatcher(c, t, cfg.MaxQueue, cfg.BatchDelay, &s.counters, s.admitted.Load)
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
		specs = append(specs, f.Spec)
	}
	doc, err := oip.OpenAPI(specs...)
	if err != nil {
		return nil, err
	}
	s.openapi = doc
	return s, nil
}

// Load loads every variant of every family now and returns the joined
// load errors. The server is ready (GET /v2/health/ready) once every
// variant has loaded.
func (s *Server) Load() error {
	var errs []error
	for _, m := range s.order {
		for _, v := range m.sortedVariants() {
			if _, _, err := v.client.Load(); err != nil {
				v.loadErr.Store(&err)
				errs = append(errs, err)
				continue
			}
			v.loaded.Store(true)
		}
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
	for _, m := range s.order {
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
	if p := v.loadErr.Load(); p != nil {
		return fmt.Errorf("%s/%s failed to load: %w", m.oip.Spec.ModelFamilyID, v.id, *p)
	}
	return fmt.Errorf("%s/%s is not loaded yet", m.oip.Spec.ModelFamilyID, v.id)
}

// Shutdown drains the server: from now on it is not ready, new infer
// requests and streams are answered 503, open streams end (with an error
// event), and it waits until every admitted infer request has been
// answered, or ctx is done. Call http.Server.Shutdown as well to stop
// accepting connections; Close afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.cancelStream()
	done := s.inflight.drain()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("serve: shutdown: %d request(s) still running: %w", s.admitted.Load(), ctx.Err())
	}
}

// Close stops the batchers and releases every client's model. Call it
// after Shutdown.
func (s *Server) Close() error {
	s.draining.Store(true)
	s.cancelStream()
	for _, m := range s.order {
		for _, v := range m.variants {
			for _, b := range v.batchers {
				b.close()
			}
			v.client.Close()
		}
	}
	return nil
}

// tracker counts work in progress and tells when it is all done once
// draining began. (A sync.WaitGroup cannot take new work while another
// goroutine waits on it.)
type tracker struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed when n drops to 0 while draining
}

// enter counts one piece of work in; it refuses new work once draining
// began, unless force (work that belongs to work already counted in).
func (t *tracker) enter(force bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining && !force {
		return false
	}
	t.n++
	return true
}

// leave counts one piece of work out.
func (t *tracker) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// drain refuses new work from now on and returns a channel closed once
// the work in progress is done.
func (t *tracker) drain() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining = true
	ch := make(chan struct{})
	if t.n == 0 {
		close(ch)
	} else if t.idle != nil {
		ch = t.idle
	} else {
		t.idle = ch
	}
	return ch
}

// statusError is an error with the HTTP status it is answered with.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func withStatus(status int, format string, args ...any) error {
	return &statusError{status: status, err: fmt.Errorf(format, args...)}
}

// status returns the HTTP status an error is answered with.
func status(err error) int {
	var se *statusError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &se):
		return se.status
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, oip.ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, runtime.ErrUnknownID):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"cannot encode the response"}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

// marshal encodes a response body: an inference response through its
// AppendJSON, anything else through json.Marshal.
func marshal(v any) ([]byte, error) {
	if r, ok := v.(*oip.InferenceResponse); ok {
		return r.AppendJSON(nil)
	}
	return json.Marshal(v)
}

// writeError writes the protocol's error body.
func writeError(w http.ResponseWriter, err error) {
	code := status(err)
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		msg = fmt.Sprintf("request body larger than the limit of %d bytes", mbe.Limit)
	}
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusRequestEntityTooLarge:
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, code, oip.ErrorResponse{Error: msg})
}

// ServeHTTP routes a request (see docs/serving.md for the endpoints).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-ID")
	if id == "" || len(id) > 128 {
		id = newID(8)
	}
	ctx := logctx.With(r.Context(), logctx.Fields{"request_id": id})
	r = r.WithContext(ctx)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	rec.Header().Set("X-Request-ID", id)
	s.route(rec, r)
	if !rec.wroteHeader && r.Context().Err() != nil {
		rec.status = statusClientGone
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "http request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
		slog.Int64("bytes", rec.bytes), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("remote", r.RemoteAddr))
}

// statusClientGone is the status access logs give a request whose client
// went away before it was answered (nginx's convention).
const statusClientGone = 499

// route dispatches on the path.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/openapi.json" {
		if s.authorized(w, r) && method(w, r, http.MethodGet) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(s.openapi)
		}
		return
	}
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if seg[0] != "v2" {
		writeError(w, withStatus(http.StatusNotFound, "no endpoint %s (the protocol's endpoints are under /v2)", r.URL.Path))
		return
	}
	seg = seg[1:]
	if len(seg) == 2 && seg[0] == "health" && (seg[1] == "live" || seg[1] == "ready") {
		if !method(w, r, http.MethodGet) {
			return
		}
		if seg[1] == "live" {
			writeJSON(w, http.StatusOK, map[string]bool{"live": true})
		} else if err := s.ready(); err != nil {
			writeError(w, &statusError{status: http.StatusServiceUnavailable, err: err})
		} else {
			writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
		}
		return
	}
	if !s.authorized(w, r) {
		return
	}
	if len(seg) == 0 {
		if method(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, oip.ServerMetadata{Name: s.cfg.Name, Version: s.cfg.Version, Extensions: []string{oip.SessionsExtension}})
		}
		return
	}
	if seg[0] != "models" || len(seg) < 2 {
		writeError(w, withStatus(http.StatusNotFound, "no endpoint %s", r.URL.Path))
		return
	}
	m, ok := s.models[seg[1]]
	if !ok {
		writeError(w, withStatus(http.StatusNotFound, "no model %q (served: %s)", seg[1], s.modelNames()))
		return
	}
	rest := seg[2:]
	if len(rest) == 2 && rest[0] == "sessions" {
		s.control(w, r, m, rest[1])
		return
	}
	var v *variant
	version := ""
	if len(rest) >= 2 && rest[0] == "versions" {
		version = rest[1]
		vs, err := m.oip.Spec.Variant(version)
		if err != nil {
			writeError(w, &statusError{status: http.StatusNotFound, err: err})
			return
		}
		v = m.variants[vs.VariantID]
		rest = rest[2:]
	}
	switch {
	case len(rest) == 0:
		if method(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, m.oip.Metadata())
		}
	case len(rest) == 1 && rest[0] == "ready":
		if !method(w, r, http.MethodGet) {
			return
		}
		if v == nil {
			dv, _ := m.oip.Spec.Variant("")
			v = m.variants[dv.VariantID]
		}
		if err := v.ready(m); err != nil {
			writeError(w, &statusError{status: http.StatusServiceUnavailable, err: err})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": m.oip.Spec.ModelFamilyID, "version": v.id, "ready": true})
	case len(rest) == 1 && rest[0] == "infer":
		if method(w, r, http.MethodPost) {
			s.infer(w, r, m, version)
		}
	case len(rest) == 1 && rest[0] == "openapi.json":
		if method(w, r, http.MethodGet) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(m.openapi)
		}
	default:
		writeError(w, withStatus(http.StatusNotFound, "no endpoint %s", r.URL.Path))
	}
}

func (s *Server) modelNames() string {
	names := make([]string, len(s.order))
	for i, m := range s.order {
		names[i] = m.oip.Spec.ModelFamilyID
	}
	return strings.Join(names, ", ")
}

// method answers 405 unless r uses want.
func method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", want)
	writeError(w, withStatus(http.StatusMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, want))
	return false
}

// authorized checks the bearer token, answering 401 when it is wrong.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="wfserve"`)
	writeError(w, withStatus(http.StatusUnauthorized, "missing or wrong bearer token (send Authorization: Bearer TOKEN)"))
	return false
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder records the status and size of a response for the access log.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client (streams need it).
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
