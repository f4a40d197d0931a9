package serve

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/oip"
	"github.com/worldfoundry/wfgen/runtime/playground"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// servedDocs are the documents that list the families served: the OpenAPI
// document (/openapi.json) and the playground's pages. They are made
// again when the set changes — poll mode adds families while serving and
// removes those whose manifest left the repository (poll.go) — on the
// first request that finds them out of date.
type servedDocs struct {
	key     string       // the served models they were made for (servedKey)
	openapi []byte       // every served family's paths
	pages   http.Handler // the playground (nil when off)
}

// servedKey names the set of models served now: the catalog's, less
// those whose manifest was removed.
func (s *Server) servedKey() string {
	var b strings.Builder
	for _, m := range s.cat().order {
		if !m.removed.Load() {
			fmt.Fprintf(&b, "%p,", m)
		}
	}
	return b.String()
}

// docs returns the documents of the families served now.
func (s *Server) docs() *servedDocs {
	key := s.servedKey()
	if d := s.docsp.Load(); d != nil && d.key == key {
		return d
	}
	s.docsMu.Lock()
	defer s.docsMu.Unlock()
	key = s.servedKey()
	if d := s.docsp.Load(); d != nil && d.key == key {
		return d
	}
	d, err := s.makeDocs(key)
	if err != nil {
		// Each family's document was made when it was added: a
		// failure here is not the request's. The last documents stay.
		s.cfg.Logger.Error("the OpenAPI document of the families served", slog.String("error", err.Error()))
		if old := s.docsp.Load(); old != nil {
			return old
		}
		return &servedDocs{key: key, openapi: []byte("{}"), pages: s.notFound}
	}
	s.docsp.Store(d)
	return d
}

// makeDocs makes the documents of the families served now (key).
func (s *Server) makeDocs(key string) (*servedDocs, error) {
	var specs []*spec.ModelInferenceSpec
	for _, m := range s.cat().order {
		if !m.removed.Load() {
			specs = append(specs, m.oip.Spec)
		}
	}
	doc, err := oip.OpenAPI(specs...)
	if err != nil {
		return nil, err
	}
	d := &servedDocs{key: key, openapi: doc, pages: s.notFound}
	if !s.cfg.DisablePlayground {
		h, err := playground.New(specs, playground.Options{NotFound: s.notFound})
		if err != nil {
			s.cfg.Logger.Error("playground off", slog.String("error", err.Error()))
		} else {
			d.pages = h
		}
	}
	return d, nil
}

// pages answers the paths outside the protocol's: the playground's pages
// of the served families (runtime/playground; GET / and /playground/…),
// unless Config.DisablePlayground, and notFound for every other path.
func (s *Server) pages(notFound http.HandlerFunc) http.Handler {
	s.notFound = notFound
	if s.cfg.DisablePlayground {
		return notFound
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.docs().pages.ServeHTTP(w, r)
	})
}

// publicPage reports whether a request is for a playground page or asset,
// which need no token: the page asks for it and its API calls carry it.
func (s *Server) publicPage(r *http.Request) bool {
	return !s.cfg.DisablePlayground && playground.Public(r.URL.Path)
}
