package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

const sampleYAML = `# comment line
schema_version: 1
model_family_id: sample
variants:
  - variant_id: base
    load_kwargs: {dtype: bf16, layers: 4, scale: 0.5}
tasks:
  - task_id: run
    inputs:
      - field_id: steps
        kind: int
        default: 0x10
      - field_id: ratio
        kind: float
        default: 2.0
      - field_id: sizes
        kind: int_list
        default: [1, 2]
    outputs:
      - artifact_id: out
        kind: tensor
`

func mustParse(t *testing.T, path, src string) *File {
	t.Helper()
	f, errs := Parse(path, []byte(src))
	if len(errs) > 0 || f == nil {
		t.Fatalf("Parse(%s): %v", path, errs)
	}
	return f
}

func TestPositionYAML(t *testing.T) {
	f := mustParse(t, "m.yaml", sampleYAML)
	cases := []struct {
		ptr       string
		line, col int
	}{
		{"", 2, 1},                         // the root mapping starts at its first key
		{"/schema_version", 2, 17},         // scalar value
		{"/variants", 4, 1},                // block sequence: at its key
		{"/variants/0", 5, 5},              // block mapping item: its first key
		{"/variants/0/variant_id", 5, 17},  // scalar in a sequence item
		{"/variants/0/load_kwargs", 6, 18}, // flow mapping: where it starts
		{"/variants/0/load_kwargs/layers", 6, 40},
		{"/tasks/0/inputs/0/default", 12, 18},
		{"/tasks/0/inputs/2/default/1", 18, 22},
		{"/tasks/0/inputs/9/default", 9, 5}, // missing item: nearest ancestor (block sequence under "inputs")
		{"/tasks/0/nope", 8, 5},             // missing key: the task mapping
	}
	for _, c := range cases {
		l, col := f.Position(c.ptr)
		if l != c.line || col != c.col {
			t.Errorf("Position(%q) = %d:%d, want %d:%d", c.ptr, l, col, c.line, c.col)
		}
	}
	if l, c := f.KeyPosition("/tasks/0/inputs/0/default"); l != 12 || c != 9 {
		t.Errorf("KeyPosition(default) = %d:%d, want 12:9", l, c)
	}
	if !f.Has("/tasks/0/outputs/0/kind") || f.Has("/tasks/0/outputs/1") {
		t.Error("Has reports the wrong presence")
	}
}

func TestPositionJSON(t *testing.T) {
	src := "{\n  \"schema_version\": 1,\n  \"model_family_id\": \"sample\",\n  \"variants\": [\n    {\"variant_id\": \"b\u00e9\u00e9\", \"label\": \"x\"}\n  ],\n  \"tasks\": []\n}\n"
	f := mustParse(t, "m.json", src)
	cases := []struct {
		ptr       string
		line, col int
	}{
		{"", 1, 1},
		{"/schema_version", 2, 21},
		{"/variants", 4, 15},
		{"/variants/0", 5, 5},
		{"/variants/0/variant_id", 5, 20},
		{"/variants/0/label", 5, 36}, // columns count characters, not bytes
		{"/tasks", 7, 12},
	}
	for _, c := range cases {
		l, col := f.Position(c.ptr)
		if l != c.line || col != c.col {
			t.Errorf("Position(%q) = %d:%d, want %d:%d", c.ptr, l, col, c.line, c.col)
		}
	}
	if l, c := f.KeyPosition("/variants/0/label"); l != 5 || c != 27 {
		t.Errorf("KeyPosition(label) = %d:%d, want 5:27", l, c)
	}
}

func TestValueAndDecode(t *testing.T) {
	f := mustParse(t, "dir/sub/m.yaml", sampleYAML)
	if f.Dir != filepath.Join("dir", "sub") {
		t.Errorf("Dir = %q", f.Dir)
	}
	doc := f.Value.(map[string]any)
	if doc["schema_version"] != json.Number("1") {
		t.Errorf("schema_version value = %#v", doc["schema_version"])
	}
	if err := f.Decode(); err != nil {
		t.Fatal(err)
	}
	if f.SchemaVersion != 1 {
		t.Errorf("SchemaVersion = %d", f.SchemaVersion)
	}
	s := f.Spec
	if s.ModelFamilyID != "sample" || s.DefaultVariantID != "default" || s.DefaultTaskID != "default" {
		t.Errorf("spec header = %+v", s)
	}
	v := s.Variants[0]
	if v.Status != "unknown" {
		t.Errorf("variant status default = %q", v.Status)
	}
	wantKw := map[string]any{"dtype": "bf16", "layers": int64(4), "scale": 0.5}
	if !reflect.DeepEqual(v.LoadKwargs, wantKw) {
		t.Errorf("load_kwargs = %#v, want %#v", v.LoadKwargs, wantKw)
	}
	in := s.Tasks[0].Inputs
	if in[0].Default != int64(16) || in[0].Target != spec.TargetCallKwargs {
		t.Errorf("steps = %#v", in[0])
	}
	if in[1].Default != 2.0 {
		t.Errorf("ratio default = %#v (want float64 2)", in[1].Default)
	}
	if !reflect.DeepEqual(in[2].Default, []any{int64(1), int64(2)}) {
		t.Errorf("sizes default = %#v", in[2].Default)
	}
}

func TestScalars(t *testing.T) {
	src := "a: 1_000\nb: -0o17\nc: 1e3\nd: .5\ne: True\nf: ~\ng: 2024-01-02\nh: '12'\ni: 0b101\n"
	f := mustParse(t, "s.yaml", src)
	want := map[string]any{
		"a": json.Number("1000"), "b": json.Number("-15"), "c": json.Number("1000.0"),
		"d": json.Number("0.5"), "e": true, "f": nil, "g": "2024-01-02", "h": "12", "i": json.Number("5"),
	}
	if !reflect.DeepEqual(f.Value, want) {
		t.Errorf("value = %#v\nwant    %#v", f.Value, want)
	}
}

// parseErrors returns Parse's errors, failing when there are none.
func parseErrors(t *testing.T, path string, data []byte) (*File, []Error) {
	t.Helper()
	f, errs := Parse(path, data)
	if len(errs) == 0 {
		t.Fatalf("Parse(%s) reported no error", path)
	}
	return f, errs
}

func wantError(t *testing.T, errs []Error, line, col int, substr string) {
	t.Helper()
	for _, e := range errs {
		if e.Line == line && (col == 0 || e.Column == col) && strings.Contains(e.Message, substr) {
			return
		}
	}
	t.Errorf("no error %d:%d containing %q in %v", line, col, substr, errs)
}

func TestBadInput(t *testing.T) {
	t.Run("duplicate keys", func(t *testing.T) {
		f, errs := parseErrors(t, "d.yaml", []byte("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n"))
		wantError(t, errs, 4, 3, `duplicate key "c" (first defined at line 3)`)
		wantError(t, errs, 5, 1, `duplicate key "a" (first defined at line 1)`)
		if len(errs) != 2 || f == nil {
			t.Errorf("want 2 errors and a file, got %v", errs)
		}
	})
	t.Run("duplicate keys json", func(t *testing.T) {
		_, errs := parseErrors(t, "d.json", []byte(`{"a": 1,`+"\n"+`  "a": 2}`))
		wantError(t, errs, 2, 3, `duplicate key "a"`)
	})
	t.Run("yaml syntax", func(t *testing.T) {
		_, errs := parseErrors(t, "s.yaml", []byte("a: 1\nb: [1, 2\nc: 3\n"))
		wantError(t, errs, 2, 1, "invalid YAML: did not find expected ',' or ']'")
		_, errs = parseErrors(t, "s.yaml", []byte("a:\n  - b\n c: 1\n"))
		wantError(t, errs, 3, 1, "invalid YAML: did not find expected key")
		_, errs = parseErrors(t, "s.yaml", []byte("a: 1\nb: c: d\n"))
		wantError(t, errs, 2, 1, "invalid YAML: mapping values are not allowed in this context")
	})
	t.Run("json syntax", func(t *testing.T) {
		_, errs := parseErrors(t, "s.json", []byte("{\n  \"a\": 1,\n  \"b\": tru\n}"))
		wantError(t, errs, 3, 11, "invalid JSON: invalid character '\\n' in literal true")
		_, errs = parseErrors(t, "s.json", []byte("{\"a\":\n 1"))
		wantError(t, errs, 2, 3, "invalid JSON: unexpected end of file")
	})
	t.Run("json trailing", func(t *testing.T) {
		_, errs := parseErrors(t, "s.json", []byte("{}\n{}"))
		wantError(t, errs, 2, 0, "more than one value")
	})
	t.Run("json is strict", func(t *testing.T) {
		parseErrors(t, "s.json", []byte("a: 1\n"))
	})
	t.Run("empty", func(t *testing.T) {
		_, errs := parseErrors(t, "e.yaml", []byte("# only a comment\n"))
		wantError(t, errs, 1, 1, "manifest is empty")
	})
	t.Run("two documents", func(t *testing.T) {
		_, errs := parseErrors(t, "two.yaml", []byte("a: 1\n---\nb: 2\n"))
		wantError(t, errs, 3, 1, "more than one YAML document")
	})
	t.Run("binary", func(t *testing.T) {
		_, errs := parseErrors(t, "b.yaml", []byte("a: 1\nb: \x00\x01"))
		wantError(t, errs, 2, 4, "file is binary (NUL byte at offset 8)")
	})
	t.Run("not utf-8", func(t *testing.T) {
		_, errs := parseErrors(t, "u.yaml", []byte("a: 1\nb: caf\xe9\n"))
		wantError(t, errs, 2, 7, "not valid UTF-8")
	})
	t.Run("too large", func(t *testing.T) {
		_, errs := parseErrors(t, "big.yaml", bytes.Repeat([]byte("#"), MaxFileSize+1))
		wantError(t, errs, 1, 1, "max file size limit (1048576 bytes)")
	})
	t.Run("too deep yaml", func(t *testing.T) {
		src := strings.Repeat("[", MaxDepth+5) + strings.Repeat("]", MaxDepth+5)
		_, errs := parseErrors(t, "deep.yaml", []byte(src))
		wantError(t, errs, 1, 0, "max depth limit")
	})
	t.Run("too deep json", func(t *testing.T) {
		src := strings.Repeat("[", MaxDepth+5) + strings.Repeat("]", MaxDepth+5)
		_, errs := parseErrors(t, "deep.json", []byte(src))
		wantError(t, errs, 1, 0, "max depth limit")
	})
	t.Run("yaml parser depth", func(t *testing.T) {
		src := strings.Repeat("[", 20000)
		_, errs := parseErrors(t, "deeper.yaml", []byte(src))
		wantError(t, errs, 1, 0, "max nesting depth is 64")
	})
	t.Run("alias bomb", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
		for i := 1; i < 10; i++ {
			b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
			for j := 0; j < 10; j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*a" + string(rune('0'+i-1)))
			}
			b.WriteString("]\n")
		}
		// The work is counted in bytes allocated, not timed: expanding
		// the bomb (10^10 nodes) would allocate without end.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, errs := parseErrors(t, "bomb.yaml", []byte(b.String()))
		runtime.ReadMemStats(&after)
		if f != nil {
			t.Error("an alias bomb must not yield a file")
		}
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Message, "more than 100000 nodes after expanding aliases (max nodes limit")
		}
		if !found {
			t.Errorf("no max nodes error in %v", errs)
		}
		t.Logf("alias bomb: %d MiB allocated", (after.TotalAlloc-before.TotalAlloc)>>20)
		if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
			t.Errorf("the alias bomb allocated %d MiB", n>>20)
		}
	})
	t.Run("too many json nodes", func(t *testing.T) {
		src := "[" + strings.Repeat("1,", MaxNodes+5) + "1]"
		_, errs := parseErrors(t, "many.json", []byte(src))
		wantError(t, errs, 1, 0, "more than 100000 nodes (max nodes limit)")
	})
	t.Run("recursive alias", func(t *testing.T) {
		_, errs := parseErrors(t, "rec.yaml", []byte("a: &x [1, *x]\n"))
		wantError(t, errs, 1, 11, "recursive alias")
	})
	t.Run("merge keys", func(t *testing.T) {
		_, errs := parseErrors(t, "merge.yaml", []byte("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n"))
		wantError(t, errs, 3, 3, "merge keys (<<) are not supported")
	})
	t.Run("inf", func(t *testing.T) {
		_, errs := parseErrors(t, "inf.yaml", []byte("a: .inf\n"))
		wantError(t, errs, 1, 4, "not a finite number")
	})
	t.Run("big int", func(t *testing.T) {
		_, errs := parseErrors(t, "int.yaml", []byte("a: 18446744073709551615\n"))
		wantError(t, errs, 1, 4, "out of range")
		_, errs = parseErrors(t, "int.json", []byte(`{"a": 99999999999999999999}`))
		wantError(t, errs, 1, 7, "out of range")
	})
	t.Run("custom tag", func(t *testing.T) {
		_, errs := parseErrors(t, "tag.yaml", []byte("a: !!binary aGVsbG8=\n"))
		wantError(t, errs, 1, 4, "unsupported YAML tag !!binary")
	})
	t.Run("complex key", func(t *testing.T) {
		_, errs := parseErrors(t, "key.yaml", []byte("? [a, b]\n: 1\n"))
		wantError(t, errs, 1, 3, "mapping key must be a plain string")
	})
}

// TestAliasesExpand checks that ordinary anchors and aliases are read.
func TestAliasesExpand(t *testing.T) {
	f := mustParse(t, "a.yaml", "k: &kw {steps: 4}\nx: *kw\n")
	want := map[string]any{"k": map[string]any{"steps": json.Number("4")}, "x": map[string]any{"steps": json.Number("4")}}
	if !reflect.DeepEqual(f.Value, want) {
		t.Errorf("value = %#v", f.Value)
	}
	if l, c := f.Position("/x/steps"); l != 1 || c != 16 {
		t.Errorf("Position through alias = %d:%d, want the anchor's 1:16", l, c)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), MaxFileSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(big)
	var le *LimitError
	if err == nil || !strings.Contains(err.Error(), "max file size") || !asLimit(err, &le) {
		t.Errorf("ReadFile(big) = %v, want a LimitError", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("ReadFile(missing) = %v", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("ReadFile(dir) succeeded")
	}
}

func asLimit(err error, le **LimitError) bool {
	l, ok := err.(*LimitError)
	*le = l
	return ok
}

func TestPointers(t *testing.T) {
	p := JoinPointer("a/b", "c~d", "0")
	if p != "/a~1b/c~0d/0" {
		t.Fatalf("JoinPointer = %q", p)
	}
	if got := SplitPointer(p); !reflect.DeepEqual(got, []string{"a/b", "c~d", "0"}) {
		t.Errorf("SplitPointer = %q", got)
	}
	if SplitPointer("") != nil {
		t.Error("SplitPointer(\"\") is not empty")
	}
	f := mustParse(t, "p.yaml", "\"a/b\":\n  \"c~d\": [x]\n")
	if l, c := f.Position(p); l != 2 || c != 11 {
		t.Errorf("Position(escaped) = %d:%d, want 2:11", l, c)
	}
}

// TestDecodeMatchesEncodingJSON checks the reflective Decode against
// encoding/json and the types' UnmarshalJSON methods on every manifest in
// the repository.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"../../manifests/*.yaml", "../validate/testdata/valid/*"} {
		ps, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, ps...)
	}
	if len(paths) < 5 {
		t.Fatalf("too few manifests: %v", paths)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := mustParse(t, p, string(data))
		if err := f.Decode(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ref, err := f.decodeJSON()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got, _ := json.Marshal(f.Spec)
		want, _ := json.Marshal(ref)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: Decode and encoding/json differ:\n%s\n%s", p, got, want)
		}
	}
}

func TestDecodeDefaultsAndMismatch(t *testing.T) {
	f := mustParse(t, "d.yaml", "schema_version: 1\nmodel_family_id: d\nrealtime: {fps: 4}\nvariants: [{variant_id: a, checkpoints: [{role: model, uri: m.pt}]}]\ntasks: [{task_id: t, batching: {max_batch_size: 8.0}, inputs: [{field_id: x}]}]\n")
	if err := f.Decode(); err != nil {
		t.Fatal(err)
	}
	s := f.Spec
	if s.DefaultVariantID != "default" || s.DefaultTaskID != "default" {
		t.Errorf("default ids = %q, %q", s.DefaultVariantID, s.DefaultTaskID)
	}
	if rt := s.Realtime; rt == nil || rt.FPS != 4 || rt.FirstChunkFrames != 9 || !rt.Stateful || len(rt.Controls) != len(spec.DefaultRealtimeControls) {
		t.Errorf("realtime = %+v", s.Realtime)
	}
	if ck := s.Variants[0].Checkpoints[0]; !ck.Required || ck.Status != "unknown" {
		t.Errorf("checkpoint defaults = %+v", ck)
	}
	if in := s.Tasks[0].Inputs[0]; in.Kind != spec.KindString || in.Target != spec.TargetCallKwargs {
		t.Errorf("field defaults = %+v", in)
	}
	if s.Tasks[0].Batching.MaxBatchSize != 8 {
		t.Errorf("max_batch_size 8.0 decoded as %d", s.Tasks[0].Batching.MaxBatchSize)
	}
	// The default controls are not shared between decoded specs.
	s.Realtime.Controls[0] = "changed"
	if spec.DefaultRealtimeControls[0] == "changed" {
		t.Error("decoding shares DefaultRealtimeControls")
	}

	bad := mustParse(t, "b.yaml", "model_family_id: [x]\ndisplay_name: ok\n")
	err := bad.Decode()
	if err == nil || !strings.Contains(err.Error(), "cannot decode a list into string") {
		t.Errorf("mismatch error = %v", err)
	}
	if bad.Spec == nil || bad.Spec.DisplayName != "ok" {
		t.Error("a mismatch stops decoding of the other keys")
	}
}
