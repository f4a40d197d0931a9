package goldenescapes

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration).

import "testing"

// TestValuesSurviveVerbatim checks that text which could break Go source
// (quotes, backticks, */, backslashes, newlines, %) reaches the values
// unchanged. A choice without letters or digits is named by its runes
// (naming.Value: "*/" is RunModeAsteriskSlash), never by its position.
func TestValuesSurviveVerbatim(t *testing.T) {
	p := DefaultRunParams()
	if want := "default with \"quotes\", `ticks`, */ and \\ backslash\nand a newline"; p.Text != want {
		t.Errorf("Text default = %q, want %q", p.Text, want)
	}
	if p.Mode != RunMode50 || RunMode50 != "50%" || RunModeAB != `a"b` || RunModeXY != "x`y" || RunModeAsteriskSlash != "*/" {
		t.Errorf("choice constants: %q %q %q %q", RunMode50, RunModeAB, RunModeXY, RunModeAsteriskSlash)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	p.Mode = "%d"
	if err := p.Validate(); err == nil || err.Error() != `mode: must be one of "a\"b", "50%", "x`+"`"+`y", "*/", got "%d"` {
		t.Errorf("Validate() = %v", err)
	}
	if s := Spec(); s.DisplayName != "Escapes */ `ticks` | pipes" || s.Tasks[0].Label != "Run: DO NOT EDIT" {
		t.Errorf("spec text changed: %q %q", s.DisplayName, s.Tasks[0].Label)
	}
}
