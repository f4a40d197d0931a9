package docs

import (
	"strings"
	"testing"
)

func TestCodeSpanCannotEndEarly(t *testing.T) {
	cases := map[string]string{
		"plain":     "`plain`",
		"a`b":       "``a`b``",
		"a``b`c":    "```a``b`c```",
		"`edge`":    "`` `edge` ``",
		"a|b":       "`a\\|b`",
		"two\nline": "`two line`",
		"":          "",
	}
	for in, want := range cases {
		if got := code(in); got != want {
			t.Errorf("code(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCellStaysInItsCell(t *testing.T) {
	got := cell("a | b\nc <!-- d --> e")
	if want := `a \| b c &lt;!-- d --&gt; e`; got != want {
		t.Errorf("cell = %q, want %q", got, want)
	}
}

func TestHeader(t *testing.T) {
	h := Header("manifests/x-->y\n.yaml")
	if strings.Count(h, "-->") != 1 || !strings.HasSuffix(h, HeaderSuffix) || strings.Contains(h, "\n") {
		t.Errorf("Header = %q", h)
	}
	if !IsGenerated([]byte(h + "\n# x\n")) {
		t.Error("IsGenerated does not recognise its own header")
	}
	if IsGenerated([]byte("# hand-written\n" + h)) {
		t.Error("IsGenerated accepted a header that is not on the first line")
	}
}

func TestTidy(t *testing.T) {
	if got := string(tidy([]byte("\n\na  \n\n\n\nb\n\n"))); got != "a\n\nb\n" {
		t.Errorf("tidy = %q", got)
	}
}
