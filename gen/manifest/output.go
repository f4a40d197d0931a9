package manifest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// OutputFormats are the output formats WriteReport accepts (the --format
// of wfgen validate, generate and breaking).
var OutputFormats = []string{"text", "json", "github"}

// Annotation is a GitHub Actions workflow command that marks a line of a
// file: "::LEVEL file=F,line=L,col=C[,title=T]::MESSAGE".
type Annotation struct {
	// Level is "error", "warning" or "notice".
	Level string
	// File, Line and Column say where.
	File         string
	Line, Column int
	// Title, when not "", heads the annotation.
	Title string
	// Message is the annotation's text.
	Message string
}

// String returns the workflow command, with its property values and
// message escaped, and a final newline.
func (a Annotation) String() string {
	title := ""
	if a.Title != "" {
		title = ",title=" + githubProperty(a.Title)
	}
	return fmt.Sprintf("::%s file=%s,line=%d,col=%d%s::%s\n", a.Level, githubProperty(a.File), a.Line, a.Column, title, githubData(a.Message))
}

// Reported is what WriteReport writes: a Diagnostic, or a breaking.Change.
type Reported interface {
	// String is its line of text output.
	String() string
	// Annotation is its GitHub workflow command.
	Annotation() Annotation
}

// Annotation returns the diagnostic as a workflow error.
func (d Diagnostic) Annotation() Annotation {
	return Annotation{Level: "error", File: d.File, Line: d.Line, Column: d.Column, Message: d.Message}
}

// WriteReport prints items in one of OutputFormats:
//
//   - "text": one String line each;
//   - "json": an array of the items' JSON objects ("[]" when there are
//     none);
//   - "github": one Annotation each.
func WriteReport[T Reported](w io.Writer, format string, items []T) error {
	var b strings.Builder
	switch format {
	case "text":
		for _, it := range items {
			b.WriteString(it.String())
			b.WriteByte('\n')
		}
	case "json":
		if items == nil {
			items = []T{}
		}
		out, err := json.MarshalIndent(items, "", "  ")
		if err != nil {
			return err
		}
		b.Write(out)
		b.WriteByte('\n')
	case "github":
		for _, it := range items {
			b.WriteString(it.Annotation().String())
		}
	default:
		return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(OutputFormats, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// githubData escapes a workflow command's message.
func githubData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// githubProperty escapes a workflow command's property value.
func githubProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
