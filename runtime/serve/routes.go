package serve

import (
	"context"
	"net/http"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/oip"
)

// routes maps the protocol's endpoints to their handlers. Patterns carry
// no method: each handler answers a wrong one 405 with the protocol's error
// body (ServeMux's own 405 is plain text), and "/" answers every other path
// 404 the same way.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/health/live", get(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
	}))
	mux.HandleFunc("/v2/health/ready", get(func(w http.ResponseWriter, r *http.Request) {
		if err := s.ready(); err != nil {
			writeError(w, &statusError{status: http.StatusServiceUnavailable, err: err})
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
	}))
	mux.HandleFunc("/v2/{$}", get(s.serverMetadata))
	mux.HandleFunc("/v2", get(s.serverMetadata))
	mux.HandleFunc("/openapi.json", get(func(w http.ResponseWriter, r *http.Request) {
		writeDocument(w, s.docs().openapi) // the families served now (playground.go)
	}))
	mux.HandleFunc("/v2/models/{model}", s.withModel(get(s.modelMetadata)))
	mux.HandleFunc("/v2/models/{model}/versions/{version}", s.withModel(get(s.modelMetadata)))
	mux.HandleFunc("/v2/models/{model}/ready", s.withModel(get(s.modelReady)))
	mux.HandleFunc("/v2/models/{model}/versions/{version}/ready", s.withModel(get(s.modelReady)))
	mux.HandleFunc("/v2/models/{model}/infer", s.withModel(post(s.infer)))
	mux.HandleFunc("/v2/models/{model}/versions/{version}/infer", s.withModel(post(s.infer)))
	mux.HandleFunc("/v2/models/{model}/openapi.json", s.withModel(get(func(w http.ResponseWriter, r *http.Request) {
		writeDocument(w, modelOf(r).openapi)
	})))
	mux.HandleFunc("/v2/models/{model}/sessions", s.withModel(get(s.sessionsInfo)))
	mux.HandleFunc("/v2/models/{model}/sessions/{session}", s.withModel(post(s.control)))
	mux.HandleFunc("/v2/models/{model}/stream", s.withModel(get(s.wsStream)))
	mux.HandleFunc("/v2/models/{model}/versions/{version}/stream", s.withModel(get(s.wsStream)))
	mux.HandleFunc("/v2/repository/index", post(s.repositoryIndex)) // the model repository (repository.go)
	mux.HandleFunc("/v2/repository/models/{model}/load", s.withModel(post(s.repositoryControl(true))))
	mux.HandleFunc("/v2/repository/models/{model}/unload", s.withModel(post(s.repositoryControl(false))))
	mux.HandleFunc("/v1/embeddings", post(s.openAIEmbeddings)) // OpenAI's API (openai.go)
	mux.HandleFunc("/v1/models", get(s.openAIModels))
	if m := s.tel.m; m != nil {
		mux.Handle("/metrics", get(m.handler.ServeHTTP))
	}
	mux.Handle("/", s.pages(func(w http.ResponseWriter, r *http.Request) { // the playground (playground.go), else 404
		if r.URL.Path != "/v2" && !strings.HasPrefix(r.URL.Path, "/v2/") {
			refuse(w, r, withStatus(http.StatusNotFound, "no endpoint %s (the protocol's endpoints are under /v2)", r.URL.Path))
			return
		}
		refuse(w, r, withStatus(http.StatusNotFound, "no endpoint %s", r.URL.Path))
	}))
	s.mux = mux
	return mux
}

// get and post answer 405 to any other method (HEAD is a GET).
func get(h http.HandlerFunc) http.HandlerFunc  { return only(http.MethodGet, h) }
func post(h http.HandlerFunc) http.HandlerFunc { return only(http.MethodPost, h) }

func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
			h(w, r)
			return
		}
		w.Header().Set("Allow", method)
		refuse(w, r, withStatus(http.StatusMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, method))
	}
}

// modelKey and variantKey are the context keys withModel sets.
type (
	modelKey   struct{}
	variantKey struct{}
)

// withModel resolves the path's {model} (a family id or alias) and
// {version} (a variant id or alias, when the pattern has one), answering
// 404 for an unknown one, and hands them to h in the request's context.
func (s *Server) withModel(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The same lookup as gRPC's (grpc.go).
		m, v, n, err := s.lookupRevision(r.Context(), r.PathValue("model"), r.PathValue("version"))
		if strings.HasSuffix(r.Pattern, "/infer") { // counted per model and task (metrics.go)
			if m != nil {
				setObs(r.Context(), s.tel.obs(m, ""))
			} else {
				setObs(r.Context(), s.tel.unknownModel)
			}
		}
		if err != nil {
			refuse(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), modelKey{}, m)
		if v != nil {
			ctx = context.WithValue(ctx, variantKey{}, v)
		}
		ctx = withRevision(ctx, n) // VARIANT@N (revision.go)
		h(w, r.WithContext(ctx))
	}
}

// modelOf and pathVariant return what withModel resolved; pathVariant is
// nil when the path names no version.
func modelOf(r *http.Request) *model { return r.Context().Value(modelKey{}).(*model) }
func pathVariant(r *http.Request) *variant {
	v, _ := r.Context().Value(variantKey{}).(*variant)
	return v
}

func (s *Server) modelNames() string {
	names := make([]string, len(s.cat().order))
	for i, m := range s.cat().order {
		names[i] = m.oip.Spec.ModelFamilyID
	}
	return strings.Join(names, ", ")
}

// serverMetadata answers GET /v2.
func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.metadata())
}

// sessionsInfo answers GET /v2/models/{model}/sessions: the model's
// realtime sessions open now, the session limit and whether snapshots are
// taken (oip.SessionsInfo; the playground's players count).
func (s *Server) sessionsInfo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, oip.SessionsInfo{Open: modelOf(r).sessions.Load(), Limit: s.cfg.MaxSessions, Snapshots: len(s.cfg.SessionKey) > 0})
}

// modelMetadata answers GET /v2/models/{model}[/versions/{version}].
func (s *Server) modelMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelOf(r).metadata())
}

// modelReady answers GET /v2/models/{model}[/versions/{version}]/ready.
func (s *Server) modelReady(w http.ResponseWriter, r *http.Request) {
	m, v := modelOf(r), pathVariant(r)
	if v == nil {
		dv, _ := m.oip.Spec.Variant("")
		v = m.variants[dv.VariantID]
	}
	if err := v.ready(m); err != nil {
		writeError(w, &statusError{status: http.StatusServiceUnavailable, err: err})
		return
	}
	version := v.id
	if n := revisionOf(r.Context()); n > 0 {
		version = revisionName(v.id, n) // served: withModel's lookup checked it
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": m.oip.Spec.ModelFamilyID, "version": version, "ready": true})
}

// writeDocument writes a JSON document held as bytes.
func writeDocument(w http.ResponseWriter, doc []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}
