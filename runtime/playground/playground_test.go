package playground_test

import (
	"encoding/json"
	"image"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/pixels"
	"github.com/worldfoundry/wfgen/runtime/playground"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// loadSpec loads a manifest of manifests/.
func loadSpec(t testing.TB, name string) *spec.ModelInferenceSpec {
	t.Helper()
	f, diags, err := validate.File(filepath.Join("..", "..", "manifests", name+".yaml"))
	if err != nil || len(diags) > 0 {
		t.Fatalf("manifest %s: %v %v", name, err, diags)
	}
	return f.Spec
}

// TestDescribe checks the page data against the manifests: the fields'
// kinds, presence, defaults, bounds and datatypes as the server takes
// them, the stream task's controls and keys.
func TestDescribe(t *testing.T) {
	tw, err := playground.Describe(loadSpec(t, "tiny-world"))
	if err != nil {
		t.Fatal(err)
	}
	if tw.ID != "tiny-world" || tw.Name != "Tiny World" || tw.DefaultTask != "generate" || !slices.Equal(tw.Versions, []string{"default"}) {
		t.Errorf("family: %+v", tw)
	}
	gen := tw.Tasks[0]
	nf := gen.Inputs[2]
	if nf.Name != "num_frames" || nf.Kind != spec.KindInt || nf.Datatype != "INT64" || !slices.Equal(nf.Shape, []int64{1}) ||
		nf.Presence != "defaulted" || nf.Default != int64(9) || *nf.Minimum != "1" || *nf.Maximum != "33" || *nf.MultipleOf != 4 || nf.Remainder != 1 {
		t.Errorf("num_frames: %+v", nf)
	}
	if p := gen.Inputs[0]; p.Name != "prompt" || p.Presence != "required" || p.Datatype != "BYTES" || *p.MinLength != 1 || p.Description == "" {
		t.Errorf("prompt: %+v", p)
	}
	if o := gen.Outputs[0]; o.Kind != spec.ArtifactVideo || o.FPS != 8 || o.Picture == nil || o.Picture.Layout != "HWC" {
		t.Errorf("video output: %+v", o)
	}
	step := tw.Tasks[1]
	if !step.Stream || step.Realtime == nil || step.Realtime.FPS != 8 {
		t.Fatalf("step: %+v", step)
	}
	want := []playground.Control{{Name: "forward", Keys: []string{"ArrowUp", "w"}}, {Name: "backward", Keys: []string{"ArrowDown", "s"}},
		{Name: "left", Keys: []string{"ArrowLeft", "a"}}, {Name: "right", Keys: []string{"ArrowRight", "d"}}}
	if !slices.EqualFunc(step.Realtime.Controls, want, func(a, b playground.Control) bool { return a.Name == b.Name && slices.Equal(a.Keys, b.Keys) }) {
		t.Errorf("controls %+v, want %+v", step.Realtime.Controls, want)
	}
	if gen.Realtime != nil {
		t.Errorf("a task that does not stream has a live view: %+v", gen.Realtime)
	}
}

// TestRoles checks what the page shows as a classification's answer: the
// digits' logits are its class scores and label its class; no other
// family's outputs have a role.
func TestRoles(t *testing.T) {
	roles := func(name string) map[string]string {
		f, err := playground.Describe(loadSpec(t, name))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, task := range f.Tasks {
			for _, o := range task.Outputs {
				if o.Role != "" {
					out[o.Name] = o.Role
				}
			}
		}
		return out
	}
	if got := roles("digits"); len(got) != 2 || got["logits"] != playground.RoleScores || got["label"] != playground.RoleClass {
		t.Errorf("digits' roles: %v, want logits %s and label %s", got, playground.RoleScores, playground.RoleClass)
	}
	for _, name := range []string{"tiny-encoder", "worldmodel", "depth-anything-v2"} {
		if got := roles(name); len(got) != 0 {
			t.Errorf("%s's outputs have roles %v, want none (not a classification)", name, got)
		}
	}
}

// TestLevelsArePixels checks that the levels the page looks pictures up in
// are runtime/pixels' own conversion: the digits field's tensor of a grey
// picture, value by value.
func TestLevelsArePixels(t *testing.T) {
	s := loadSpec(t, "digits")
	d, err := playground.Describe(s)
	if err != nil {
		t.Fatal(err)
	}
	f := d.Tasks[0].Inputs[0]
	if f.Name != "pixels" || f.Datatype != "FP32" || !slices.Equal(f.Shape, []int64{1, 8, 8}) || f.Picture == nil ||
		f.Picture.Layout != "CHW" || f.Picture.Channels != "L" || len(f.Picture.Levels) != 1 || len(f.Picture.Levels[0]) != 256 {
		t.Fatalf("pixels field: %+v", f)
	}
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 4)
	}
	tt, err := pixels.Tensor(img, &s.Tasks[0].Inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := tt.Float32s()
	for i, v := range img.Pix {
		if got := float32(f.Picture.Levels[0][v]); got != vals[i] || math.IsNaN(float64(got)) {
			t.Fatalf("level %d: the page uses %v, runtime/pixels %v", v, got, vals[i])
		}
	}
	// A uint8 video field takes the levels as they are.
	w, err := playground.Describe(loadSpec(t, "worldmodel"))
	if err != nil {
		t.Fatal(err)
	}
	if p := w.Tasks[0].Inputs[0].Picture; p == nil || p.Levels != nil || p.Channels != "RGB" {
		t.Errorf("worldmodel start field's picture: %+v", p)
	}
}

// TestBindKeys: well-known names get the arrows and WASD, others the
// spare keys, no key twice.
func TestBindKeys(t *testing.T) {
	got := playground.BindKeys([]string{"up", "zoom", "forward", "left", "boost"})
	want := [][]string{{"ArrowUp", "w"}, {"i"}, {"j"}, {"ArrowLeft", "a"}, {"k"}}
	for i, c := range got {
		if !slices.Equal(c.Keys, want[i]) {
			t.Errorf("%s: keys %q, want %q", c.Name, c.Keys, want[i])
		}
	}
}

// TestSize keeps the page small: everything it loads under 60 KB.
func TestSize(t *testing.T) {
	dir := t.TempDir()
	if err := playground.Write(dir, loadSpec(t, "worldmodel")); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range []string{"index.html", "app.js", "transport.js", "style.css"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
	}
	if total >= 60<<10 {
		t.Errorf("the page is %d bytes, over 60 KB", total)
	}
	t.Logf("page: %d bytes", total)
}

// TestHandler checks the routes: the index and family pages, assets,
// the description, and other paths left to NotFound.
func TestHandler(t *testing.T) {
	h, err := playground.New([]*spec.ModelInferenceSpec{loadSpec(t, "digits"), loadSpec(t, "worldmodel")},
		playground.Options{NotFound: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "fallback", http.StatusTeapot)
		})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string, string) {
		t.Helper()
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, r.Header.Get("Content-Type"), string(b)
	}
	for _, c := range []struct {
		path, ctype, want string
		status            int
	}{
		{"/", "text/html", `data-desc="/playground/_/families.json"`, 200},
		{"/", "text/html", `<link rel="icon" href="/playground/_/favicon.svg"`, 200},
		{"/playground/worldmodel", "text/html", `data-family="worldmodel"`, 200},
		{"/playground/_/app.js", "text/javascript", "WF.transport.open", 200},
		{"/playground/_/transport.js", "text/javascript", "controls_url", 200},
		{"/playground/_/style.css", "text/css", "canvas.live", 200},
		{"/playground/_/favicon.svg", "image/svg+xml", "<svg", 200},
		{"/playground/_/families.json", "application/json", `"id":"digits"`, 200},
		{"/playground/_/page.html", "", "fallback", 418},
		{"/playground/nope", "", "fallback", 418},
		{"/v3", "", "fallback", 418},
	} {
		code, ctype, body := get(c.path)
		if code != c.status || !strings.HasPrefix(ctype, c.ctype) || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %s %.200s\nwant %d %s containing %q", c.path, code, ctype, body, c.status, c.ctype, c.want)
		}
	}
	var fams []playground.Family
	_, _, body := get(playground.DescriptionPath)
	if err := json.Unmarshal([]byte(body), &fams); err != nil || len(fams) != 2 || fams[1].Tasks[0].Realtime.FPS != 10 {
		t.Errorf("description: %v %+v", err, fams)
	}
	r, err := http.Post(srv.URL+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", r.StatusCode)
	}
	for path, public := range map[string]bool{"/": true, "/playground/digits": true, "/playground/_/app.js": true,
		playground.DescriptionPath: false, "/v2/models/digits": false, "/metrics": false} {
		if playground.Public(path) != public {
			t.Errorf("Public(%q) = %v", path, !public)
		}
	}
}

// TestWrite checks the static page: the assets, and the description in
// families.js instead of a request to the server.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := playground.Write(dir, loadSpec(t, "digits")); err != nil {
		t.Fatal(err)
	}
	var names []string
	fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	slices.Sort(names)
	if want := []string{"app.js", "families.js", "favicon.svg", "index.html", "style.css", "transport.js"}; !slices.Equal(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{`data-static="1"`, `id="server"`, `<script src="families.js">`, `src="app.js"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html has no %s:\n%s", want, html)
		}
	}
	js, _ := os.ReadFile(filepath.Join(dir, "families.js"))
	var fams []playground.Family
	if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(string(js), "window.WF_FAMILIES = "), ";\n")), &fams); err != nil || len(fams) != 1 || fams[0].ID != "digits" {
		t.Errorf("families.js: %v %.200s", err, js)
	}
}
