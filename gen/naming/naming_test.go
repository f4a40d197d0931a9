package naming

import (
	"go/token"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExported(t *testing.T) {
	cases := []struct{ id, want string }{
		// The design card's examples.
		{"num_frames", "NumFrames"},
		{"text-to-video", "TextToVideo"},
		// Separators of every kind are dropped.
		{"guidance.scale", "GuidanceScale"},
		{"negative prompt", "NegativePrompt"},
		{"a/b\\c", "ABC"},
		{"__leading__and__trailing__", "LeadingAndTrailing"},
		{"prompt", "Prompt"},
		// Initialisms.
		{"id", "ID"},
		{"model_id", "ModelID"},
		{"image_url", "ImageURL"},
		{"fps", "FPS"},
		{"target_fps", "TargetFPS"},
		{"rgb", "RGB"},
		{"rgba_frames", "RGBAFrames"},
		{"http_api_json", "HTTPAPIJSON"},
		{"request_uuid", "RequestUUID"},
		{"cpu_threads", "CPUThreads"},
		{"gpu", "GPU"},
		{"kv_cache", "KVCache"},
		{"sha256", "SHA256"},
		{"fp16", "FP16"},
		{"utf8_text", "UTF8Text"},
		{"ID", "ID"},
		{"Url", "URL"},
		// Plural initialisms.
		{"ids", "IDs"},
		{"image_urls", "ImageURLs"},
		{"userIDs", "UserIDs"},
		// camelCase and PascalCase input.
		{"numFrames", "NumFrames"},
		{"userId", "UserID"},
		{"HTTPServer", "HTTPServer"},
		{"httpServer", "HTTPServer"},
		{"iPhone", "IPhone"},
		{"macOS", "MacOS"},
		{"NUM_FRAMES", "NUMFRAMES"},
		// Digits.
		{"text2video", "Text2Video"},
		{"h264", "H264"},
		{"wan2.1", "Wan2_1"},
		{"v1-5", "V1_5"},
		{"3d", "X3D"},
		{"1.3b", "X1_3B"},
		{"14b", "X14B"},
		{"2", "X2"},
		// Keywords are capitalised, which makes them legal.
		{"type", "Type"},
		{"func", "Func"},
		{"range", "Range"},
		{"go", "Go"},
		// Unicode.
		{"größe", "GroU00DFE"},
		{"naïve_mode", "NaiveMode"},
		{"élan", "Elan"},
		{"E\u0301lan", "Elan"},     // decomposed: folds alike
		{"embed_ﬁle", "EmbedFile"}, // a ligature
		{"a\u202eb", "AB"},         // a bidi control separates words
		{"①", "X1"},
		{"αβ", "U03B1U03B2"},
		{"名前", "U540DU524D"},
		{"ßig", "U00DFIg"},
		{"prompt_名前", "PromptU540DU524D"},
		{"frame٣", "FrameU0663"},
		// Nothing usable.
		{"", "X"},
		{"---", "X"},
		{"🙂", "X"},
	}
	for _, c := range cases {
		if got := Exported(c.id); got != c.want {
			t.Errorf("Exported(%q) = %q, want %q", c.id, got, c.want)
		}
		if got := Exported(c.id); !token.IsIdentifier(got) || !token.IsExported(got) {
			t.Errorf("Exported(%q) = %q is not a legal exported identifier", c.id, got)
		}
	}
}

func TestAppend(t *testing.T) {
	cases := []struct{ prefix, id, want string }{
		{"Variant", "1.3b", "Variant1_3B"},
		{"Variant", "default", "VariantDefault"},
		{"Task", "text-to-video", "TaskTextToVideo"},
		{"Scheduler", "ddim", "SchedulerDdim"},
		{"Variant", "名前", "VariantU540DU524D"},
		{"Variant", "---", "Variant"},
		{"Wan2", "1", "Wan2_1"},
		{"Variant", "s", "VariantS"},
	}
	for _, c := range cases {
		if got := Append(c.prefix, c.id); got != c.want {
			t.Errorf("Append(%q, %q) = %q, want %q", c.prefix, c.id, got, c.want)
		}
	}
}

func TestWords(t *testing.T) {
	got := Words("myHTTPServer_v2.1-名前")
	want := []string{"my", "HTTP", "Server", "v", "2", "1", "U540D", "U524D"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Words mismatch (-want +got):\n%s", d)
	}
}

func TestPackage(t *testing.T) {
	cases := []struct{ id, want string }{
		{"my-world-model", "myworldmodel"},
		{"My_World.Model", "myworldmodel"},
		{"wan2.1-t2v", "wan21t2v"},
		{"3d-world", "x3dworld"},
		{"", "x"},
		{"名前", "x"},
		{"größe", "groe"},
		{"../../etc/passwd", "etcpasswd"},
		{"..", "x"},
		{"/abs/path", "abspath"},
		{`C:\windows`, "cwindows"},
		{"type", "typepkg"},
		{"go", "gopkg"},
		{"func", "funcpkg"},
		{"main", "mainpkg"},
		{"internal", "internalpkg"},
		{"vendor", "vendorpkg"},
		{"test-data", "testdatapkg"},
		{"runtime", "runtimepkg"},
		{"init", "initpkg"},
		{"len", "lenpkg"},
		{"json", "jsonpkg"},
		{"ﬁle", "file"},
	}
	for _, c := range cases {
		got := Package(c.id)
		if got != c.want {
			t.Errorf("Package(%q) = %q, want %q", c.id, got, c.want)
		}
		if err := CheckPackage(got); err != nil {
			t.Errorf("Package(%q) = %q fails CheckPackage: %v", c.id, got, err)
		}
	}
}

func TestCheckPackage(t *testing.T) {
	for _, ok := range []string{"a", "myworldmodel", "wan21", "runtimes"} {
		if err := CheckPackage(ok); err != nil {
			t.Errorf("CheckPackage(%q) = %v, want nil", ok, err)
		}
	}
	bad := map[string]string{
		"":          "empty",
		"1abc":      "starting with a letter",
		"my-model":  "lower-case ASCII",
		"My":        "lower-case ASCII",
		"a/b":       "lower-case ASCII",
		"..":        "lower-case ASCII",
		"a_b":       "lower-case ASCII",
		"größe":     "lower-case ASCII",
		"type":      "keyword",
		"main":      "special meaning",
		"testdata":  "special meaning",
		"internal":  "special meaning",
		"vendor":    "special meaning",
		"defaultpk": "",
		"init":      "cannot be imported",
		"string":    "predeclared",
		"client":    "generated code imports",
	}
	for name, want := range bad {
		err := CheckPackage(name)
		if want == "" {
			if err != nil {
				t.Errorf("CheckPackage(%q) = %v, want nil", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPackage(%q) = %v, want an error containing %q", name, err, want)
		}
	}
}

func TestCheckExported(t *testing.T) {
	for _, ok := range []string{"Seed", "NumFrames", "X1"} {
		if err := CheckExported(ok); err != nil {
			t.Errorf("CheckExported(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "seed", "1X", "Num-Frames", "名前", "_X", "Größe"} {
		if err := CheckExported(bad); err == nil {
			t.Errorf("CheckExported(%q) = nil, want an error", bad)
		}
	}
}

func TestCollisions(t *testing.T) {
	got := Collisions([]Ident{
		{ID: "num_frames"},
		{ID: "num-frames"},
		{ID: "numFrames"},
		{ID: "fps"},
		{ID: "FPS", GoName: "FramesPerSecond"},
		{ID: "seed"},
		{ID: "other", GoName: "Seed"},
	})
	want := []Collision{
		{Name: "NumFrames", First: `"num_frames"`, Second: `"num-frames"`},
		{Name: "NumFrames", First: `"num_frames"`, Second: `"numFrames"`},
		{Name: "Seed", First: `"seed"`, Second: `"other"`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Collisions mismatch (-want +got):\n%s", d)
	}
	msg := got[0].Error()
	for _, s := range []string{`"num_frames"`, `"num-frames"`, "NumFrames", "go_name"} {
		if !strings.Contains(msg, s) {
			t.Errorf("collision message %q does not mention %s", msg, s)
		}
	}
	if c := Collisions([]Ident{{ID: "a"}, {ID: "b"}}); len(c) != 0 {
		t.Errorf("distinct ids collide: %v", c)
	}
}

func TestScope(t *testing.T) {
	var s Scope
	if c := s.Declare("Validate", "method Validate"); c != nil {
		t.Fatalf("first declaration collided: %v", c)
	}
	c := s.Declare("Validate", `field "validate"`)
	if c == nil || c.First != "method Validate" || c.Second != `field "validate"` {
		t.Fatalf("Declare = %+v, want a collision naming both", c)
	}
	if o, ok := s.Owner("Validate"); !ok || o != "method Validate" {
		t.Errorf("Owner = %q, %v; the first declaration must be kept", o, ok)
	}
	if _, ok := s.Owner("Other"); ok {
		t.Errorf("Owner of an undeclared name reported")
	}
}

func TestInitialismsSorted(t *testing.T) {
	got := Initialisms()
	for _, s := range []string{"ID", "URL", "FPS", "RGB", "HTTP", "JSON", "API", "UUID", "CPU", "GPU"} {
		found := false
		for _, g := range got {
			found = found || g == s
		}
		if !found {
			t.Errorf("Initialisms() lacks %s", s)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("Initialisms() not sorted at %d: %q >= %q", i, got[i-1], got[i])
		}
	}
}

// FuzzNames checks that every input gives a legal exported identifier and a
// legal package name that is a single safe path element, and never panics.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"num_frames", "text-to-video", "3d", "名前", "../x", "type", "", "IDs", "wan2.1", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		e := Exported(id)
		if !token.IsIdentifier(e) || !token.IsExported(e) {
			t.Fatalf("Exported(%q) = %q is not a legal exported identifier", id, e)
		}
		if Exported(id) != e {
			t.Fatalf("Exported(%q) is not deterministic", id)
		}
		p := Package(id)
		if err := CheckPackage(p); err != nil {
			t.Fatalf("Package(%q) = %q: %v", id, p, err)
		}
		if strings.ContainsAny(p, `/\.`) {
			t.Fatalf("Package(%q) = %q holds a path character", id, p)
		}
		a := Append("Prefix", id)
		if !token.IsIdentifier(a) || !strings.HasPrefix(a, "Prefix") {
			t.Fatalf("Append(Prefix, %q) = %q is not a legal identifier", id, a)
		}
	})
}

// Choice constants without letters or digits are named by their runes, so
// reordering the choices never changes what a constant means.
func TestValue(t *testing.T) {
	for value, want := range map[string]string{
		"*": "OpAsterisk", "+": "OpPlus", "->": "OpMinusGreater", "→": "OpU2192",
		"text-to-video": "OpTextToVideo", "480p": "Op480P", "*/": "OpAsteriskSlash",
	} {
		if got := Value("Op", value); got != want {
			t.Errorf("Value(Op, %q) = %q, want %q", value, got, want)
		}
	}
}
