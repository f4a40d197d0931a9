package validate

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	jsv "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/schema"
)

// leafLocations returns the sorted instance locations of err's leaf errors.
func leafLocations(err error) []string {
	var ve *jsv.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var out []string
	var walk func(e *jsv.ValidationError)
	walk = func(e *jsv.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, e.InstanceLocation+" "+e.Message)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	return out
}

// TestInlinedSchemaEquivalent checks that the schema validate compiles (the
// embedded one with its references inlined) reports exactly what the
// embedded schema reports, on every test and built-in manifest.
func TestInlinedSchemaEquivalent(t *testing.T) {
	c := jsv.NewCompiler()
	c.Draft = jsv.Draft2020
	if err := c.AddResource(schema.ID, bytes.NewReader(schema.JSON)); err != nil {
		t.Fatal(err)
	}
	orig, err := c.Compile(schema.ID)
	if err != nil {
		t.Fatal(err)
	}
	inlined, _, err := compiledSchema()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, pattern := range []string{"testdata/valid/*", "testdata/invalid/*", "../../manifests/*"} {
		ps, _ := filepath.Glob(pattern)
		paths = append(paths, ps...)
	}
	checked := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := manifest.Parse(p, data)
		if f == nil {
			continue
		}
		checked++
		a, b := leafLocations(orig.Validate(f.Value)), leafLocations(inlined.Validate(f.Value))
		if !slices.Equal(a, b) {
			t.Errorf("%s: embedded schema reports %q, inlined %q", p, a, b)
		}
	}
	if checked < 10 {
		t.Errorf("only %d manifests checked", checked)
	}
}
