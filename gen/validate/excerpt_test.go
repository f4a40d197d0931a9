package validate

import (
	"strings"
	"testing"
	"unicode"
)

// Diagnostics quote a short, escaped excerpt of a manifest's own text,
// never the text whole (issue 32): a long or invisible key, value or id
// is cut and escaped, in the message and in the JSON pointer.
func TestDiagnosticsQuoteShortEscapedExcerpts(t *testing.T) {
	long := strings.Repeat("S3CRET", 2000)
	src := "schema_version: 1\nmodel_family_id: ex\ndefault_task_id: run\n" +
		"? " + long + "\n: 1\n" +
		"\"evil\\u202eyek\": 2\n" +
		"variants:\n  - variant_id: default\n" +
		"tasks:\n  - task_id: run\n    inputs:\n      - {field_id: f, kind: string, choices: [a, b], default: \"" + long + "\"}\n" +
		"      - {field_id: g, kind: bool, default: \"" + long + "\"}\n" +
		"    outputs:\n      - {artifact_id: y, kind: tensor}\n"
	_, diags := Bytes("ex.yaml", []byte(src))
	if len(diags) < 3 {
		t.Fatalf("want a diagnostic for each of the two keys and the values, got %v", diags)
	}
	for _, d := range diags {
		if n := strings.Count(d.Message, "S3CRET"); n > 10 {
			t.Errorf("%s:%d: the message quotes %d repeats of the long text", d.File, d.Line, n)
		}
		if len(d.Path) > 200 {
			t.Errorf("%s:%d: the path is %d bytes long", d.File, d.Line, len(d.Path))
		}
		if strings.IndexFunc(d.Message+d.Path, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) >= 0 {
			t.Errorf("%s:%d: an invisible character is printed raw: %q", d.File, d.Line, d.Message)
		}
	}
	all := ""
	for _, d := range diags {
		all += d.Message + "\n"
	}
	for _, want := range []string{`unknown key "S3CRETS3CRET`, `…" in the manifest`, `unknown key "evil\u202eyek"`} {
		if !strings.Contains(all, want) {
			t.Errorf("no message contains %q:\n%s", want, all)
		}
	}
}
