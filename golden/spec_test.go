// Package golden_test checks the generated golden packages as a user would
// use them: their Spec equals the manifest they came from and each family
// is registered by importing its package. Behaviour tests of single
// packages live beside them (output/<pkg>/*_test.go).
package golden_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/golden/choices/output/goldenchoices"
	"github.com/worldfoundry/wfgen/golden/escapes/output/goldenescapes"
	"github.com/worldfoundry/wfgen/golden/kinds/output/goldenkinds"
	"github.com/worldfoundry/wfgen/golden/naming/output/namingcase"
	"github.com/worldfoundry/wfgen/golden/records/output/goldenrecords"
	"github.com/worldfoundry/wfgen/golden/stream/output/goldenstream"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

func TestSpecEqualsManifest(t *testing.T) {
	cases := []struct {
		manifest string
		spec     func() *spec.ModelInferenceSpec
		familyID string
	}{
		{"kinds/input/kinds.yaml", goldenkinds.Spec, goldenkinds.FamilyID},
		{"choices/input/choices.yaml", goldenchoices.Spec, goldenchoices.FamilyID},
		{"stream/input/stream.yaml", goldenstream.Spec, goldenstream.FamilyID},
		{"naming/input/naming.yaml", namingcase.Spec, namingcase.FamilyID},
		{"escapes/input/escapes.yaml", goldenescapes.Spec, goldenescapes.FamilyID},
		{"records/input/records.yaml", goldenrecords.Spec, goldenrecords.FamilyID},
	}
	for _, c := range cases {
		t.Run(c.familyID, func(t *testing.T) {
			f, diags, err := validate.File(c.manifest)
			if err != nil || len(diags) > 0 {
				t.Fatalf("load %s: %v %v", c.manifest, err, diags)
			}
			if d := cmp.Diff(f.Spec, c.spec()); d != "" {
				t.Errorf("Spec() differs from %s (-manifest +Spec):\n%s", c.manifest, d)
			}
			if f.Spec.ModelFamilyID != c.familyID {
				t.Errorf("FamilyID = %q, manifest says %q", c.familyID, f.Spec.ModelFamilyID)
			}
			reg := spec.GetModelInferenceSpec(c.familyID)
			if reg == nil {
				t.Fatalf("family %q is not registered by importing its package", c.familyID)
			}
			if d := cmp.Diff(f.Spec, reg); d != "" {
				t.Errorf("registered spec differs (-manifest +registered):\n%s", d)
			}
			for _, a := range f.Spec.Aliases {
				if spec.GetModelInferenceSpec(a) != reg {
					t.Errorf("alias %q does not find the family", a)
				}
			}
			// Every call returns a new copy: changing one leaves the next intact.
			s := c.spec()
			s.Variants[0].VariantID = "changed"
			if c.spec().Variants[0].VariantID == "changed" {
				t.Error("Spec() returns shared data")
			}
		})
	}
}
