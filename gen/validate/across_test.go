package validate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// family writes a minimal valid manifest with the given top-level lines.
func family(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	body := "schema_version: 1\n" + strings.Join(lines, "\n") + `
variants:
  - variant_id: default
tasks:
  - task_id: default
    outputs:
      - artifact_id: video
        kind: video
`
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Family ids, aliases and Go packages must be unique across the manifests
// validated together; the file that comes first keeps the name.
func TestAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	a := family(t, dir, "a.yaml", "model_family_id: alpha", "aliases: [shared]")
	b := family(t, dir, "b.yaml", "model_family_id: shared")                     // b's id is a's alias
	c := family(t, dir, "c.yaml", "model_family_id: gamma", "go_package: alpha") // a's package
	d := family(t, dir, "d.yaml", "model_family_id: al-pha")                     // derives package alpha too
	e := family(t, dir, "e.yaml", "model_family_id: epsilon", "aliases: [eps]")

	files, diags, err := Paths([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.String())
	}
	want := []string{
		b + `:2:18: family name "shared" is also used by ` + a + `; family ids and aliases must be unique across manifests`,
		c + `:3:13: package alpha is also generated from ` + a + `; set go_package in one of them`,
		d + `:2:18: package alpha is also generated from ` + a + `; set go_package in one of them`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var valid []string
	for _, f := range files {
		valid = append(valid, f.File.Path)
	}
	if w := []string{a, e}; !reflect.DeepEqual(valid, w) {
		t.Errorf("valid files %v, want %v (a file that reuses a name or package is not valid)", valid, w)
	}
	if n, cdiags, err := Check([]string{dir}); err != nil || n != 2 || !reflect.DeepEqual(cdiags, diags) {
		t.Errorf("Check = %d, %v, %v; want 2 and the diagnostics of Paths", n, cdiags, err)
	}

	// Each file alone is valid; Across on the files Paths returned one by
	// one gives the same diagnostics.
	var all = files[:0:0]
	for _, p := range []string{a, b, c, d, e} {
		fs, ds, err := Paths([]string{p})
		if err != nil || len(ds) > 0 || len(fs) != 1 {
			t.Fatalf("%s alone: %v %v", p, ds, err)
		}
		all = append(all, fs[0])
	}
	if got := Across(all); !reflect.DeepEqual(got, diags) {
		t.Errorf("Across = %v, want %v", got, diags)
	}
	if got := Across(all[:1]); len(got) != 0 {
		t.Errorf("Across of one file = %v", got)
	}
	if p := all[3].Package; p != "alpha" {
		t.Errorf("PackageOf(al-pha) = %q, want alpha", p)
	}
}
