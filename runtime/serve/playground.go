package serve

import (
	"log/slog"
	"net/http"

	"github.com/worldfoundry/wfgen/runtime/playground"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// pages answers the paths outside the protocol's: the playground's pages
// of the served families (runtime/playground; GET / and /playground/…),
// unless Config.DisablePlayground, and notFound for every other path.
func (s *Server) pages(notFound http.HandlerFunc) http.Handler {
	if s.cfg.DisablePlayground {
		return notFound
	}
	specs := make([]*spec.ModelInferenceSpec, len(s.cat().order))
	for i, m := range s.cat().order {
		specs[i] = m.oip.Spec
	}
	h, err := playground.New(specs, playground.Options{NotFound: notFound})
	if err != nil {
		s.cfg.Logger.Error("playground off", slog.String("error", err.Error()))
		return notFound
	}
	return h
}

// publicPage reports whether a request is for a playground page or asset,
// which need no token: the page asks for it and its API calls carry it.
func (s *Server) publicPage(r *http.Request) bool {
	return !s.cfg.DisablePlayground && playground.Public(r.URL.Path)
}
