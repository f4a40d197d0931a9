// Package playground serves a web page per model family, generated from the
// family's manifest like the Go bindings are: a form per task (the fields'
// kinds, defaults, bounds and choices, descriptions as help), results shown
// as people look at them (pictures and video frames on a canvas, class
// scores and embeddings as a plot, text and JSON as text, a server error
// beside the field it names), and for a streaming task a live view driven
// from the keyboard over the realtime session transport. The pages call the
// Open Inference Protocol REST API from the browser, with the bearer token
// the user gives.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary (no CDN,
// no framework; the machines are offline). Everything it knows of a family
// comes from one JSON description, Family, derived from the spec types the
// server uses (Describe). Handler serves the pages for runtime/serve; Write
// writes one family's page as static files that call any OIP server. See
// docs/playground.md.
package playground

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

//go:embed assets
var assets embed.FS

// Asset files served under Prefix + "_/" and written by Write.
var assetFiles = []string{"app.js", "transport.js", "style.css", "favicon.svg"}

var page = template.Must(template.ParseFS(assets, "assets/page.html"))

// Prefix is the path of the family pages: Prefix + family id. Assets and
// the description are under Prefix + "_/", which no family id can take.
const Prefix = "/playground/"

// DescriptionPath is the path of the served families' description (JSON,
// a list of Family). It is the one path of the playground that needs the
// bearer token when the server has one.
const DescriptionPath = Prefix + "_/families.json"

// Handler serves the playground of a set of families: GET / lists them,
// GET /playground/{family} is a family's page, /playground/_/… its assets
// and description. Other paths go to Options.NotFound.
type Handler struct {
	byID     map[string]*Family
	desc     []byte
	notFound http.Handler
}

// Options configure a Handler.
type Options struct {
	// NotFound answers the paths the playground does not serve (default
	// http.NotFound).
	NotFound http.Handler
}

// New returns the playground of specs.
func New(specs []*spec.ModelInferenceSpec, opts Options) (*Handler, error) {
	h := &Handler{byID: map[string]*Family{}, notFound: opts.NotFound}
	if h.notFound == nil {
		h.notFound = http.NotFoundHandler()
	}
	fams := []*Family{}
	for _, s := range specs {
		f, err := Describe(s)
		if err != nil {
			return nil, err
		}
		if _, dup := h.byID[f.ID]; dup {
			return nil, fmt.Errorf("playground: family %q given twice", f.ID)
		}
		h.byID[f.ID] = f
		fams = append(fams, f)
	}
	var err error
	if h.desc, err = json.Marshal(fams); err != nil {
		return nil, err
	}
	return h, nil
}

// Public reports whether a path is one of the playground's pages or
// assets, which carry nothing of the served models and so need no token
// (the description and the API calls the pages make do).
func Public(path string) bool {
	return path == "/" || strings.HasPrefix(path, Prefix) && path != DescriptionPath
}

// pageData fills page.html.
type pageData struct {
	Title, Family, Desc, Home, Assets string
	Static                            bool
}

// ServeHTTP answers GET and HEAD requests for the playground's paths.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	known := p == "/" || strings.HasPrefix(p, Prefix)
	if !known {
		h.notFound.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the playground's pages take GET", http.StatusMethodNotAllowed)
		return
	}
	switch rest := strings.TrimPrefix(p, Prefix); {
	case p == "/":
		h.page(w, pageData{Title: "Playground"})
	case p == DescriptionPath:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(h.desc)
	case strings.HasPrefix(rest, "_/"):
		name := strings.TrimPrefix(rest, "_/")
		b, err := assets.ReadFile("assets/" + name)
		if err != nil || !isAsset(name) {
			h.notFound.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", contentType(name))
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	default:
		f, ok := h.byID[rest]
		if !ok {
			h.notFound.ServeHTTP(w, r)
			return
		}
		h.page(w, pageData{Title: f.Name + " · playground", Family: f.ID})
	}
}

func (h *Handler) page(w http.ResponseWriter, d pageData) {
	d.Home, d.Assets, d.Desc = "/", Prefix+"_/", DescriptionPath
	var b bytes.Buffer
	if err := page.Execute(&b, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b.Bytes())
}

func isAsset(name string) bool {
	for _, a := range assetFiles {
		if a == name {
			return true
		}
	}
	return false
}

func contentType(name string) string {
	switch filepath.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// Write writes the page of one family as static files into dir:
// index.html, the assets and families.js (the description). The page calls
// the OIP server the user names (its ?server= parameter, or the field on
// the page); that server must allow the page's origin (CORS) unless both
// are served from one origin.
func Write(dir string, s *spec.ModelInferenceSpec) error {
	f, err := Describe(s)
	if err != nil {
		return err
	}
	desc, err := json.Marshal([]*Family{f})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := page.Execute(&b, pageData{Title: f.Name + " · playground", Family: f.ID, Home: "index.html", Static: true}); err != nil {
		return err
	}
	files := map[string][]byte{
		"index.html":  b.Bytes(),
		"families.js": append(append([]byte("window.WF_FAMILIES = "), desc...), ";\n"...),
	}
	for _, name := range assetFiles {
		if files[name], err = fs.ReadFile(assets, "assets/"+name); err != nil {
			return err
		}
	}
	var errs []error
	for name, data := range files {
		errs = append(errs, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	return errors.Join(errs...)
}
