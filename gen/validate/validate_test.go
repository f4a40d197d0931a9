package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// TestDoneWhen is the acceptance check: a manifest with a
// wrong-typed default, a duplicate variant id and an unknown key gives
// exactly three diagnostics, each at the line and column of its problem.
func TestDoneWhen(t *testing.T) {
	path := filepath.Join("testdata", "invalid", "three-problems.yaml")
	f, diags, err := File(path)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Error("an invalid manifest returned a File")
	}
	want := []string{
		path + `:8:17: duplicate variant id "base" (first defined at line 7)`,
		path + `:11:5: unknown key "lable" in tasks[0]; did you mean "label"?`,
		path + `:15:18: task "default" field "num_frames": default is the string "many", but the field's kind is an int`,
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each points at the line that holds its problem.
	lines := readLines(t, path)
	for i, probe := range []string{"variant_id: base", "lable:", "default: many"} {
		if i < len(diags) && !strings.Contains(lines[diags[i].Line-1], probe) {
			t.Errorf("diagnostic %d points at line %d %q, want the line with %q", i, diags[i].Line, lines[diags[i].Line-1], probe)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// wants reads the `# want "substr" ...` annotations of a test manifest,
// by line.
func wants(t *testing.T, path string) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		_, rest, ok := strings.Cut(sc.Text(), "# want ")
		if !ok {
			continue
		}
		for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("%s:%d: bad want annotation %q: %v", path, n, rest, err)
			}
			s, _ := strconv.Unquote(q)
			out[n] = append(out[n], s)
			rest = rest[len(q):]
		}
	}
	return out
}

// TestInvalidManifests validates each testdata/invalid/*.yaml and requires
// that the diagnostics match its `# want` annotations one to one: every
// diagnostic on a line contains one of that line's wanted substrings, and
// every wanted substring is found.
func TestInvalidManifests(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test manifests: %v", err)
	}
	for _, path := range paths {
		if filepath.Base(path) == "three-problems.yaml" {
			continue // TestDoneWhen checks it exactly
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, diags, err := File(path)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil || len(diags) == 0 {
				t.Fatalf("invalid manifest passed")
			}
			want := wants(t, path)
			used := map[int][]bool{}
			for l, ws := range want {
				used[l] = make([]bool, len(ws))
			}
			for _, d := range diags {
				if d.File != path || d.Column < 1 {
					t.Errorf("bad file or column: %+v", d)
				}
				matched := false
				for i, w := range want[d.Line] {
					if !used[d.Line][i] && strings.Contains(d.Message, w) {
						used[d.Line][i], matched = true, true
						break
					}
				}
				if !matched {
					t.Errorf("unexpected diagnostic %s", d)
				}
			}
			for l, ws := range want {
				for i, w := range ws {
					if !used[l][i] {
						t.Errorf("%s:%d: missing diagnostic containing %q", path, l, w)
					}
				}
			}
			if t.Failed() {
				for _, d := range diags {
					t.Log(d)
				}
			}
		})
	}
}

// TestBuiltinManifests requires every manifest in manifests/ to be valid and
// to start with the yaml-language-server schema line.
func TestBuiltinManifests(t *testing.T) {
	dir := filepath.Join("..", "..", "manifests")
	files, diags, err := Paths([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diags {
		t.Error(d)
	}
	if len(files) < 5 {
		t.Errorf("want at least five built-in families, got %d", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f.File.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("# yaml-language-server: $schema=../schema/manifest.schema.json\n")) {
			t.Errorf("%s does not start with the yaml-language-server schema line", f.File.Path)
		}
		if f.File.SchemaVersion != 1 || f.Spec == nil {
			t.Errorf("%s: not decoded", f.File.Path)
		}
	}
}

func TestValidFiles(t *testing.T) {
	// One call per file: both are the same family, which is an error when
	// they are validated together (TestAcrossFiles).
	byName := map[string]*spec.ModelInferenceSpec{}
	for _, name := range []string{"full.yaml", "full.json"} {
		files, diags, err := Paths([]string{filepath.Join("testdata", "valid", name)})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range diags {
			t.Error(d)
		}
		if len(files) != 1 {
			t.Fatalf("%s: want one valid manifest, got %d", name, len(files))
		}
		byName[name] = files[0].Spec
	}
	// The YAML and JSON forms of the same family decode to the same spec.
	y, j := byName["full.yaml"], byName["full.json"]
	if y == nil || j == nil {
		t.Fatalf("missing full.yaml or full.json in %v", byName)
	}
	if !reflect.DeepEqual(y, j) {
		yb, _ := json.MarshalIndent(y, "", " ")
		jb, _ := json.MarshalIndent(j, "", " ")
		t.Errorf("YAML and JSON decode differently:\n%s\n%s", yb, jb)
	}
	// Defaults are normalised to the field kind's Go type.
	task, err := y.Task("generate")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]any{
		"prompt": "a cat", "num_frames": int64(81), "guidance_scale": 5.0, "tiled": true,
		"sizes": []int64{1, 2}, "weights": []float64{0.5, 1}, "tags": []string{"a"}, "flags": []bool{true},
	} {
		f, ok := task.Field(id)
		if !ok {
			t.Fatalf("no field %s", id)
		}
		if !reflect.DeepEqual(f.Default, want) {
			t.Errorf("field %s default = %#v, want %#v", id, f.Default, want)
		}
	}
	if got := task.DefaultCallKwargs["num_frames"]; got != int64(33) {
		t.Errorf("default_call_kwargs num_frames = %#v, want int64 33", got)
	}
	v, err := y.Variant("fast")
	if err != nil || v.VariantID != "distilled" {
		t.Errorf("Variant(alias fast) = %v, %v", v, err)
	}
}

// TestJSONPositions checks that diagnostics of JSON manifests point into
// the JSON text.
func TestJSONPositions(t *testing.T) {
	src := `{
  "schema_version": 1,
  "model_family_id": "j",
  "variants": [{"variant_id": "a"}, {"variant_id": "a"}],
  "tasks": [
    {"task_id": "default", "colour": 1,
     "outputs": [{"artifact_id": "o", "kind": "text"}],
     "inputs": [{"field_id": "n", "kind": "int", "default": "x"}]}
  ],
  "default_variant_id": "a"
}`
	_, diags := Bytes("m.json", []byte(src))
	want := []string{
		`m.json:4:52: duplicate variant id "a" (first defined at line 4)`,
		`m.json:6:28: unknown key "colour" in tasks[0]; allowed keys: aliases, batching, default_call_kwargs, deprecated, description, dims, go_name, inputs, label, method, openai, outputs, session_batching, stream, task_id, warmup`,
		`m.json:8:61: task "default" field "n": default is the string "x", but the field's kind is an int`,
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPaths(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "valid", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string, data []byte) string {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := write("b.yaml", good)
	// Another family, so that the two do not clash (TestAcrossFiles).
	other := strings.NewReplacer("model_family_id: full-family", "model_family_id: other-family",
		"aliases: [full]", "aliases: [other]", "go_package: fullfamily", "go_package: otherfamily").Replace(string(good))
	a := write("sub/a.yml", []byte(other))
	write(".hidden/x.yaml", []byte("not: [valid"))
	write("notes.txt", []byte("ignored"))
	bad := write("sub/z.json", []byte(`{"schema_version": 1}`))
	files, diags, err := Paths([]string{dir, b}) // b twice: once only
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.File.Path)
	}
	if want := []string{b, a}; !reflect.DeepEqual(got, want) {
		t.Errorf("valid files = %v, want %v (sorted, deduplicated, hidden folders and other extensions skipped)", got, want)
	}
	if len(diags) != 3 {
		t.Errorf("want 3 diagnostics (missing model_family_id, variants, tasks), got %v", diags)
	}
	for _, d := range diags {
		if d.File != bad || d.Line != 1 || d.Column != 1 {
			t.Errorf("diagnostic %s: want %s:1:1", d, bad)
		}
	}

	// Check gives the same verdict without keeping the files.
	n, cdiags, err := Check([]string{dir, b})
	if err != nil || n != 2 || !reflect.DeepEqual(cdiags, diags) {
		t.Errorf("Check = %d, %v, %v; want 2 and the diagnostics of Paths", n, cdiags, err)
	}
	if _, _, err := Check(nil); err == nil {
		t.Error("Check of no paths is not an error")
	}

	if _, _, err := Paths([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing path is not an error")
	}
	if _, _, err := Paths(nil); err == nil {
		t.Error("no paths is not an error")
	}
	// A folder given through a symbolic link that stays inside its root is
	// searched, and a file named twice in different spellings is
	// validated once.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "sub"), link); err != nil {
		t.Fatal(err)
	}
	files, _, err = Paths([]string{link, link + "/./a.yml"})
	if err != nil || len(files) != 1 || files[0].File.Path != filepath.Join(link, "a.yml") {
		t.Errorf("Paths(symlinked folder) = %v, %v", files, err)
	}
	// One that leads out of its root (here the folder that holds it) is
	// refused, with a diagnostic at the link.
	outside := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(dir, "sub"), outside); err != nil {
		t.Fatal(err)
	}
	files, diags, err = Paths([]string{outside})
	if err != nil || len(files) != 0 || len(diags) != 1 || diags[0].File != outside || !strings.Contains(diags[0].Message, "leads outside") {
		t.Errorf("Paths(link out of its root) = %v, %v, %v", files, diags, err)
	}
	// A file given explicitly is validated whatever its extension.
	txt := write("m.txt", good)
	if files, diags, err := Paths([]string{txt}); err != nil || len(files) != 1 || len(diags) != 0 {
		t.Errorf("Paths(m.txt) = %v, %v, %v", files, diags, err)
	}
	// An unreadable file is an I/O error.
	if runtime.GOOS != "windows" && os.Getuid() != 0 {
		locked := write("locked.yaml", good)
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Paths([]string{locked}); err == nil {
			t.Error("an unreadable file is not an error")
		}
	}
	// A file that cannot be read is an I/O error (a dangling symlink found
	// in a folder, which works even when the test runs as root).
	linkDir := filepath.Join(dir, "links")
	if err := os.MkdirAll(linkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere.yaml"), filepath.Join(linkDir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Paths([]string{linkDir}); err == nil || !strings.Contains(err.Error(), "dangling.yaml") {
		t.Errorf("Paths(dangling symlink) error = %v", err)
	}
	// A file over the size limit is a diagnostic, not an I/O error.
	big := write("big.yaml", bytes.Repeat([]byte("# padding\n"), 110_000))
	if _, diags, err := Paths([]string{big}); err != nil || len(diags) != 1 || !strings.Contains(diags[0].Message, "max file size") {
		t.Errorf("Paths(big) = %v, %v", diags, err)
	}
}

func TestWriteDiagnostics(t *testing.T) {
	diags := []Diagnostic{
		{File: "a,b:c.yaml", Line: 3, Column: 7, Path: "/tasks/0", Message: "bad 100%\nnext line"},
		{File: "x.json", Line: 1, Column: 1, Path: "", Message: "plain"},
	}
	cases := map[string]string{
		"text":   "a,b:c.yaml:3:7: bad 100%\nnext line\nx.json:1:1: plain\n",
		"github": "::error file=a%2Cb%3Ac.yaml,line=3,col=7::bad 100%25%0Anext line\n::error file=x.json,line=1,col=1::plain\n",
	}
	for format, want := range cases {
		var b bytes.Buffer
		if err := WriteDiagnostics(&b, format, diags); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("%s:\n%q\nwant\n%q", format, b.String(), want)
		}
	}
	var b bytes.Buffer
	if err := WriteDiagnostics(&b, "json", diags); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0]["file"] != "a,b:c.yaml" || back[0]["line"] != 3.0 || back[0]["column"] != 7.0 ||
		back[0]["path"] != "/tasks/0" || back[0]["message"] != "bad 100%\nnext line" {
		t.Errorf("json output = %s", b.String())
	}
	b.Reset()
	if err := WriteDiagnostics(&b, "json", nil); err != nil || b.String() != "[]\n" {
		t.Errorf("json of none = %q, %v", b.String(), err)
	}
	if err := WriteDiagnostics(&b, "xml", diags); err == nil {
		t.Error("unknown format accepted")
	}
}

// However many workers run, the bytes of manifest source being parsed at
// once stay within parseBudget; small files still go side by side. The
// test runs in a synctest bubble: a parse's sleep ends only once every
// other worker is blocked (parsing or waiting for the budget), so the
// files that can be parsed side by side are.
func TestParseBudget(t *testing.T) { synctest.Test(t, testParseBudget) }

func testParseBudget(t *testing.T) {
	dir := t.TempDir()
	for i := range 8 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("big%d.yaml", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(manifest.MaxFileSize); err != nil { // sparse: quick to make
			t.Fatal(err)
		}
		f.Close()
	}
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("small%d.yaml", i)), []byte("x: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))

	var mu sync.Mutex
	var inFlight, peak int64
	var smallTogether, smallInFlight int
	saved := loadFile
	loadFile = func(path string) (*ir.Family, []Diagnostic, error) {
		st, err := os.Stat(path)
		if err != nil {
			return nil, nil, err
		}
		small := st.Size() < 1024
		mu.Lock()
		inFlight += st.Size()
		peak = max(peak, inFlight)
		if small {
			smallInFlight++
			smallTogether = max(smallTogether, smallInFlight)
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight -= st.Size()
		if small {
			smallInFlight--
		}
		mu.Unlock()
		return nil, nil, nil
	}
	defer func() { loadFile = saved }()

	if _, _, err := Paths([]string{dir}); err != nil {
		t.Fatal(err)
	}
	if peak > parseBudget {
		t.Errorf("%d bytes were parsed at once, want at most the budget %d", peak, parseBudget)
	}
	if peak < 2*manifest.MaxFileSize {
		t.Errorf("at most %d bytes were parsed at once; want two max-size files side by side", peak)
	}
	if smallTogether < 2 {
		t.Errorf("small files were parsed one at a time")
	}
}
