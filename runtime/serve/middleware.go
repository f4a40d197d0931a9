package serve

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/oip"
)

// arrivedAt returns when the request arrived (observe stamps it).
func arrivedAt(r *http.Request) time.Time {
	if ri := requestInfo(r.Context()); ri != nil {
		return ri.arrived
	}
	return time.Now()
}

// observe is the outermost middleware: it stamps the request's arrival,
// gives it a correlation id (the X-Request-ID header, or a fresh one
// echoed in that header) that every log record of the request carries,
// starts its span (tracing.go), and when it is answered writes one access
// log record, with the error's text for a refusal, and records its
// metrics (metrics.go).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.lastSeen.Store(start.UnixNano())
		id := r.Header.Get("X-Request-ID")
		if id == "" || len(id) > 128 {
			id = newID(8)
		}
		ri := &reqInfo{arrived: start}
		ctx := context.WithValue(r.Context(), infoKey{}, ri)
		fields := logctx.Fields{"request_id": id}
		ctx = s.tel.startSpan(ctx, r, ri, id, fields)
		ctx = logctx.With(ctx, fields)
		r = r.WithContext(ctx)
		// Whatever the endpoint, the request (its body included) must
		// arrive within the read limit; handlers that read a body clear
		// the deadline once they have it.
		http.NewResponseController(w).SetReadDeadline(start.Add(s.readLimit()))
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		rec.Header().Set("X-Request-ID", id)
		next.ServeHTTP(rec, r)
		if !rec.wroteHeader && r.Context().Err() != nil {
			rec.status = statusClientGone
		}
		end := time.Now()
		s.tel.finish(s, r, ri, rec, end)
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes), slog.Float64("duration_ms", float64(end.Sub(start).Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		}
		if rec.err != "" {
			attrs = append(attrs, slog.String("error", rec.err))
		}
		if name := keyName(ri); name != "" {
			attrs = append(attrs, slog.String("key", name))
		}
		s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
	})
}

// readLimit is how long a request may take to arrive, body included:
// Config.Timeout, or DefaultTimeout when requests have no deadline.
func (s *Server) readLimit() time.Duration {
	if s.cfg.Timeout > 0 {
		return s.cfg.Timeout
	}
	return DefaultTimeout
}

// statusClientGone is the status access logs give a request whose client
// went away before it was answered (nginx's convention).
const statusClientGone = 499

// drainGuard answers every request but the health probes and the metrics
// 503 once the server drains, and makes every response close its connection then, so
// that keep-alive connections end after their answer rather than under a
// request the client is sending.
func (s *Server) drainGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.draining.Load() {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/v2/health/live" || r.URL.Path == "/v2/health/ready" || r.URL.Path == "/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		refuse(w, r, errDraining)
	})
}

// auth checks the API key of every request but the health probes and the
// playground's pages before anything reads its body: a request without a
// key of the server's is answered 401 at once, one over its key's rate 429
// (keys.go), and its connection closed.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.keys == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/health/") || s.publicPage(r) {
			next.ServeHTTP(w, r)
			return
		}
		var err error
		var key *apiKey
		switch values := r.Header.Values("Authorization"); {
		case len(values) > 1:
			err = withStatus(http.StatusUnauthorized, "%d Authorization headers: send one (Authorization: Bearer TOKEN)", len(values))
		case len(values) == 1:
			key = s.keys.match(bearerToken(values[0]))
		case sessionPath(r.URL.Path):
			key = s.keys.match(wsToken(r))
		}
		switch {
		case err != nil:
		case key == nil:
			err = withStatus(http.StatusUnauthorized, "missing or wrong bearer token (send Authorization: Bearer TOKEN)")
		default:
			ctx := withKey(r.Context(), key)
			if err = key.admit(arrivedAt(r)); err == nil {
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
		}
		if status(err) == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wfserve"`)
		}
		refuse(w, r, err)
	})
}

// bearerToken returns the token of an Authorization header value with the
// Bearer scheme (its name in any case, RFC 7235), "" for another.
func bearerToken(header string) string {
	scheme, got, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(got)
}

// sessionPath reports whether path is a WebSocket session endpoint,
// /v2/models/{model}[/versions/{version}]/stream: the only endpoints whose
// token may come as a subprotocol (wsBearer), which a browser's WebSocket
// can send where it cannot send a header.
func sessionPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v2/models/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	return (len(parts) == 2 || len(parts) == 4 && parts[1] == "versions") && parts[len(parts)-1] == "stream" && parts[0] != ""
}

// wsToken returns the token a WebSocket upgrade request offers as the
// subprotocol oip.BearerSubprotocol + base64url(token) — a browser's
// WebSocket cannot send an Authorization header —, "" for none.
func wsToken(r *http.Request) string {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), oip.BearerSubprotocol)
			if !ok {
				continue
			}
			if got, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
				return string(got)
			}
		}
	}
	return ""
}

// newID returns n random bytes in hex.
func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder records the status, size and error of a response for the
// access log.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	err         string
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
