package manifest

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the YAML and JSON loaders: they must
// never panic, must report positions inside the file, and whatever they
// accept must decode and answer Position for any pointer.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleYAML), false)
	f.Add([]byte(`{"schema_version": 1, "variants": [{"variant_id": "a"}], "tasks": []}`), true)
	f.Add([]byte("a: &x [1, *x]\n"), false)
	f.Add([]byte("a: &a [x]\nb: &b [*a, *a]\nc: [*b, *b]\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		path := "fuzz.yaml"
		if isJSON {
			path = "fuzz.json"
		}
		file, errs := Parse(path, data)
		lines := strings.Count(string(data), "\n") + 1
		for _, e := range errs {
			if e.Line < 1 || e.Column < 1 || e.Line > lines+1 || e.Message == "" {
				t.Fatalf("bad error position or message: %+v (file has %d lines)", e, lines)
			}
		}
		if file == nil {
			return
		}
		_ = file.Decode()
		for _, p := range []string{"", "/tasks/0/inputs/0/default", "/variants/0", "/a/b/c", "/0/1", "/~1/~0"} {
			if l, c := file.Position(p); l < 1 || c < 1 || l > lines+1 {
				t.Fatalf("Position(%q) = %d:%d outside the file", p, l, c)
			}
			file.KeyPosition(p)
		}
	})
}
