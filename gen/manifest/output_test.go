package manifest

import (
	"bytes"
	"testing"
)

func TestAnnotationEscapes(t *testing.T) {
	a := Annotation{Level: "warning", File: "a,b:c.yaml", Line: 3, Column: 7, Title: "x: y, z", Message: "50%\nnext"}
	want := "::warning file=a%2Cb%3Ac.yaml,line=3,col=7,title=x%3A y%2C z::50%25%0Anext\n"
	if got := a.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	a.Title = ""
	if got, want := a.String(), "::warning file=a%2Cb%3Ac.yaml,line=3,col=7::50%25%0Anext\n"; got != want {
		t.Errorf("without a title: got %q, want %q", got, want)
	}
}

func TestWriteReport(t *testing.T) {
	diags := []Diagnostic{{File: "m.yaml", Line: 2, Column: 5, Path: "/tasks", Message: "bad"}}
	for format, want := range map[string]string{
		"text":   "m.yaml:2:5: bad\n",
		"json":   "[\n  {\n    \"file\": \"m.yaml\",\n    \"line\": 2,\n    \"column\": 5,\n    \"path\": \"/tasks\",\n    \"message\": \"bad\"\n  }\n]\n",
		"github": "::error file=m.yaml,line=2,col=5::bad\n",
	} {
		var b bytes.Buffer
		if err := WriteReport(&b, format, diags); err != nil || b.String() != want {
			t.Errorf("%s: %q, %v; want %q", format, b.String(), err, want)
		}
	}
	var b bytes.Buffer
	if err := WriteReport[Diagnostic](&b, "json", nil); err != nil || b.String() != "[]\n" {
		t.Errorf("json of none: %q, %v", b.String(), err)
	}
	if err := WriteReport(&b, "xml", diags); err == nil || err.Error() != `unknown format "xml" (want one of text, json, github)` {
		t.Errorf("xml: %v", err)
	}
}
