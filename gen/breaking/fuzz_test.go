package breaking

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// FuzzCompare compares any two manifests: it never panics, a manifest
// compared with itself has no change, and every change has a known rule of
// its class, a position in its file and a subject under its family.
// The seed corpus (testdata/fuzz/FuzzCompare) holds the golden cases.
func FuzzCompare(f *testing.F) {
	f.Fuzz(func(t *testing.T, oldData, newData []byte) {
		of, _ := validate.Bytes("old.yaml", oldData)
		nf, _ := validate.Bytes("new.yaml", newData)
		if of == nil || nf == nil {
			return
		}
		same, err := Compare(nil, nil)
		if err != nil || len(same) != 0 {
			t.Fatalf("empty sides: %v %v", same, err)
		}
		if self := CompareFamily(nf, nf); len(self) != 0 {
			t.Fatalf("a manifest differs from itself: %v", self)
		}
		for _, pair := range [][2]string{{"old", "new"}, {"new", "old"}} {
			a, b := of, nf
			if pair[0] == "new" {
				a, b = nf, of
			}
			changes, err := Compare([]*ir.Family{a}, []*ir.Family{b})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				if class, ok := Rules[c.Rule]; !ok || class != c.Class {
					t.Fatalf("change %v: rule %q of class %q", c, c.Rule, c.Class)
				}
				if c.Line < 1 || c.Column < 1 || c.File == "" || c.Message == "" {
					t.Fatalf("change without a position: %+v", c)
				}
				fam := a.Spec.ModelFamilyID
				if c.Rule == RuleFamilyAdded {
					fam = b.Spec.ModelFamilyID
				}
				if c.Subject != segment(fam) && !strings.HasPrefix(c.Subject, segment(fam)+"/") {
					t.Fatalf("change %v: subject outside family %q", c, fam)
				}
				if ok := mustParse(t, c.Key()).Match(c); !ok {
					t.Fatalf("change %v is not matched by its own key", c)
				}
			}
		}
	})
}

func mustParse(t *testing.T, s string) Allow {
	t.Helper()
	a, err := ParseAllow(s)
	if err != nil {
		t.Fatalf("ParseAllow(%q): %v", s, err)
	}
	return a
}

// FuzzAllow parses any --allow rule and matches it against any subject
// without panicking; a rule that parses keeps its text.
func FuzzAllow(f *testing.F) {
	f.Fuzz(func(t *testing.T, rule, subj string) {
		a, err := ParseAllow(rule)
		if err != nil {
			return
		}
		if a.Text != rule {
			t.Fatalf("Text = %q, want %q", a.Text, rule)
		}
		for _, r := range RuleNames() {
			a.Match(Change{Class: Rules[r], Rule: r, Subject: subj})
		}
	})
}
