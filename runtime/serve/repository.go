package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"
)

// The model repository's control (Triton's repository extension, over REST
// and gRPC: RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload),
// so that an operator, or Triton's own clients (load_model, unload_model,
// get_model_repository_index), load and unload models while the server
// runs:
//
//   - POST /v2/repository/index lists every variant of every family with
//     its state (READY, UNAVAILABLE) and why (body {"ready": true}: the
//     ready ones only);
//   - POST /v2/repository/models/{model}/load loads and warms up a model's
//     variants (Load's steps), answering once they are ready, or with the
//     error that left them unavailable;
//   - POST /v2/repository/models/{model}/unload takes them out of service:
//     new requests are refused at once, sessions end, the calls in the
//     engine finish, then the module is freed.
//
// Config.ModelControl chooses the mode: ControlNone (the default: every
// model at start, load and unload refused) or ControlExplicit (the models
// of Config.StartupModels at start, the rest on request). Requests for a
// model that is not loaded are answered 503 in explicit mode. A load and
// an unload of one model wait for each other.

// Model control modes (Config.ModelControl).
const (
	// ControlNone loads every model at start and refuses load and unload.
	ControlNone = "none"
	// ControlExplicit loads the models of Config.StartupModels at start
	// and the others when asked (POST /v2/repository/models/NAME/load); a
	// load of a loaded model reloads the variants whose checkpoint
	// changed, without downtime (reload.go).
	ControlExplicit = "explicit"
	// ControlPoll loads every model at start and reloads a model, without
	// downtime, when its manifest or a checkpoint changes (poll.go); load
	// and unload are refused.
	ControlPoll = "poll"
)

// errUnloaded is the state of a variant an unload took out of service.
var errUnloaded = errors.New("unloaded")

// errRemoved is the state of a variant poll mode unloaded because its
// manifest left the repository (poll.go).
var errRemoved = fmt.Errorf("%w: its manifest was removed from the repository", errUnloaded)

// unloadWait bounds how long an unload waits for the calls in the
// engine to finish.
const unloadWait = time.Minute

// explicit reports whether the server loads models on request.
func (s *Server) explicit() bool { return s.cfg.ModelControl == ControlExplicit }

// loadVariant loads and warms up a variant that serves nothing yet (at
// start, or after an unload): it is ready when this returns nil.
func (s *Server) loadVariant(m *model, v *variant) error {
	v.loadErr.Store(nil)
	if err := s.installRevision(m, v, m.source); err != nil {
		v.loadErr.Store(&err)
		return err
	}
	v.loaded.Store(true)
	s.health.notify()
	return nil
}

// loadModel loads every variant of m that is not loaded and reloads,
// without downtime, the loaded ones whose manifest or checkpoint changed
// (reload.go).
func (s *Server) loadModel(m *model) error {
	m.control.Lock()
	defer m.control.Unlock()
	err := s.reload(m, true)
	s.health.notify()
	return err
}

// unloadModel takes m out of service: its variants are marked unloaded
// (why: errUnloaded or errRemoved; new requests are refused 503), its
// sessions end, the calls in the engine finish (ctx bounds the wait), and
// its modules are freed.
func (s *Server) unloadModel(ctx context.Context, m *model, why error) error {
	m.control.Lock()
	defer m.control.Unlock()
	for _, v := range m.sortedVariants() {
		v.loaded.Store(false)
		v.loadErr.Store(&why)
	}
	s.health.notify()
	s.sessions.Range(func(_, x any) bool {
		if se := x.(*session); se.model == m {
			se.cancel()
		}
		return true
	})
	ctx, cancel := context.WithTimeout(ctx, unloadWait)
	defer cancel()
	for _, v := range m.sortedVariants() {
		// No call pins the revisions from now on (the newest, and those
		// its version policy kept); those that did finish on them, then
		// they are freed.
		freed := s.retireKept(m, v)
		if old := v.swap(nil); old != nil {
			freed = append(freed, s.retire(m, old))
		}
		for _, f := range freed {
			select {
			case <-f:
			case <-ctx.Done():
				return fmt.Errorf("%s/%s: calls still running after %v (its module is freed when they end): %w", m.oip.Spec.ModelFamilyID, v.id, unloadWait, ctx.Err())
			}
		}
	}
	s.cfg.Logger.Info("unloaded", slog.String("model", m.oip.Spec.ModelFamilyID))
	return nil
}

// notLoaded refuses a request for a variant that is not loaded, in
// explicit mode: 503, saying how to load it.
func (s *Server) notLoaded(m *model, v *variant) error {
	if v.loaded.Load() {
		return nil
	}
	if v.unit != nil && !m.removed.Load() {
		return nil // it loads on request, under the memory budget (lazyload.go)
	}
	if s.cfg.ModelControl == ControlPoll && s.started.Load() {
		// Removed from the repository, or added and failed to load.
		return &statusError{status: http.StatusServiceUnavailable, err: v.ready(m)}
	}
	if !s.explicit() {
		return nil
	}
	return withStatus(http.StatusServiceUnavailable, "model %q (version %q) is not loaded: load it with POST /v2/repository/models/%s/load",
		m.oip.Spec.ModelFamilyID, v.id, m.oip.Spec.ModelFamilyID)
}

// repositoryEntry is one entry of the repository index, as Triton gives it.
type repositoryEntry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
}

// repositoryIndex answers POST /v2/repository/index.
func (s *Server) repositoryIndex(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ready bool `json:"ready"`
	}
	if r.ContentLength != 0 {
		body, err := s.readSmallBody(w, r)
		if err == nil && len(body) > 0 {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			writeError(w, withStatus(http.StatusBadRequest, "malformed request body: %v", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, s.indexEntries(r.Context(), req.Ready))
}

// indexEntries lists every variant of every model the request's key may
// use with its state (only the ready ones with ready): REST's and gRPC's
// index.
func (s *Server) indexEntries(ctx context.Context, ready bool) []repositoryEntry {
	out := []repositoryEntry{}
	for _, m := range s.cat().order {
		if checkModel(ctx, m.oip.Spec.ModelFamilyID) != nil {
			continue
		}
		for _, v := range m.sortedVariants() {
			e := repositoryEntry{Name: m.oip.Spec.ModelFamilyID, Version: v.id, State: "READY"}
			err := v.ready(m)
			if err != nil {
				e.State, e.Reason = "UNAVAILABLE", err.Error()
			} else if s.cfg.ModelControl != ControlNone {
				e.Reason = v.serving()
			}
			if !ready || e.State == "READY" {
				out = append(out, e)
			}
			if err != nil {
				continue
			}
			// The older revisions a version policy keeps: each its own
			// version, VARIANT@N.
			newest := ""
			if r := v.rev.Load(); r != nil {
				newest = r.version
			}
			for _, r := range v.keptRevisions() {
				out = append(out, repositoryEntry{Name: m.oip.Spec.ModelFamilyID, Version: r.version, State: "READY",
					Reason: fmt.Sprintf("serving %s, kept by its version policy beside the newest, %s", r.describe(), newest)})
			}
		}
	}
	if ready {
		return out
	}
	s.catMu.Lock()
	defer s.catMu.Unlock()
	for _, path := range slices.Sorted(maps.Keys(s.invalid)) {
		if checkModel(ctx, path) == nil {
			out = append(out, repositoryEntry{Name: path, State: "UNAVAILABLE", Reason: s.invalid[path].reason()})
		}
	}
	return out
}

// loadOrUnload loads or unloads the model ctx's request names (REST's and
// gRPC's): 400 when model control is off or the load or unload failed.
func (s *Server) loadOrUnload(ctx context.Context, m *model, load bool) error {
	switch s.cfg.ModelControl {
	case ControlNone:
		return withStatus(http.StatusBadRequest, "model control is off: wfserve loads every model at start (run it with -model-control explicit to load and unload models)")
	case ControlPoll:
		return withStatus(http.StatusBadRequest, "model control is poll: wfserve reloads a model when its files change in the repository, and refuses load and unload (run it with -model-control explicit to load and unload models)")
	}
	var err error
	what := "unload"
	if load {
		what = "load"
		err = s.loadModel(m)
	} else {
		err = s.unloadModel(ctx, m, errUnloaded)
	}
	if err != nil {
		s.cfg.Logger.Error(what+" failed", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("error", err.Error()))
		return withStatus(http.StatusBadRequest, "failed to %s %q: %v", what, m.oip.Spec.ModelFamilyID, err)
	}
	return nil
}

// repositoryControl answers POST /v2/repository/models/{model}/load and
// /unload.
func (s *Server) repositoryControl(load bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			if _, err := s.readSmallBody(w, r); err != nil {
				writeError(w, err)
				return
			}
		}
		if err := s.loadOrUnload(r.Context(), modelOf(r), load); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

// maxControlBody bounds the body of a repository request (Triton's load
// may carry parameters; none are read).
const maxControlBody = 64 << 10

// readSmallBody reads a repository request's body, at most maxControlBody.
func (s *Server) readSmallBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, withStatus(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxControlBody)
	}
	return b, err
}
