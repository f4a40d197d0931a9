package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/serve"
)

// TestPlaygroundRoutes: the playground's pages and assets answer without
// the token, its description and the API only with it; paths it does not
// serve keep the protocol's 404s; DisablePlayground gives / back to them.
func TestPlaygroundRoutes(t *testing.T) {
	t.Parallel()
	s := start(t, serve.Config{Token: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	for _, c := range []struct {
		path   string
		header []string
		status int
		want   string
	}{
		{"/", nil, 200, `data-desc="/playground/_/families.json"`},
		{"/playground/tiny-world", nil, 200, `data-family="tiny-world"`},
		{"/playground/_/app.js", nil, 200, "WF.transport.open"},
		{"/playground/_/families.json", nil, 401, "missing or wrong bearer token"},
		{"/playground/_/families.json", auth, 200, `"id":"tiny-encoder"`},
		{"/playground/nope", auth, 404, "no endpoint /playground/nope (the protocol's endpoints are under /v2)"},
		{"/v3", auth, 404, "under /v2"},
		{"/v2/nope", auth, 404, "no endpoint /v2/nope"},
		{"/v2/models/tiny-world", nil, 401, "missing or wrong bearer token"},
	} {
		code, _, body := call(t, "GET", s.url+c.path, "", c.header...)
		if code != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: %d %.200s\nwant %d and %q", c.path, code, body, c.status, c.want)
		}
	}
	if code, h, _ := call(t, "POST", s.url+"/", "x"); code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, Allow %q; want 405 and GET, HEAD", code, h.Get("Allow"))
	}

	off := start(t, serve.Config{DisablePlayground: true})
	if code, _, body := call(t, "GET", off.url+"/", ""); code != 404 || !strings.Contains(string(body), "under /v2") {
		t.Errorf("GET / with the playground off: %d %s; want the protocol's 404", code, body)
	}
}
