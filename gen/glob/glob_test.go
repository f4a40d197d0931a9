package glob

import "testing"

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/b/c", false},
		{"a/*", "a/b", true},
		{"a/*", "a/b/c", false},
		{"a/**", "a", true},
		{"a/**", "a/b/c", true},
		{"**", "a/b", true},
		{"**/c", "c", true},
		{"**/c", "a/b/c", true},
		{"**/c", "a/b/d", false},
		{"a/**/**/d", "a/d", true},
		{"a/**/d", "a/b/c/d", true},
		{"a/**/d", "a/b/c/e", false},
		{"*:x/[ab]?", "*:x/bz", true},
		{"x/[", "x/[", false},
		{"legacy-family/**", "legacy-family/t2v/prompt", true},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	if seg, err := Check("a/**/b*/[xy]"); seg != "" || err != nil {
		t.Errorf("good pattern: %q, %v", seg, err)
	}
	if seg, err := Check("a/[b/c"); seg != "[b" || err == nil || err.Error() != "syntax error in pattern" {
		t.Errorf("bad pattern: %q, %v", seg, err)
	}
}
