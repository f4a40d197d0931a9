package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats are the output formats WriteDiagnostics accepts.
var Formats = []string{"text", "json", "github"}

// WriteDiagnostics prints diags in one of Formats:
//
//   - "text": one "FILE:LINE:COL: message" line each;
//   - "json": an array of {file, line, column, path, message} objects
//     ("[]" when there are none);
//   - "github": GitHub Actions workflow commands,
//     "::error file=F,line=L,col=C::message".
func WriteDiagnostics(w io.Writer, format string, diags []Diagnostic) error {
	var b strings.Builder
	switch format {
	case "text":
		for _, d := range diags {
			b.WriteString(d.String())
			b.WriteByte('\n')
		}
	case "json":
		if diags == nil {
			diags = []Diagnostic{}
		}
		out, err := json.MarshalIndent(diags, "", "  ")
		if err != nil {
			return err
		}
		b.Write(out)
		b.WriteByte('\n')
	case "github":
		for _, d := range diags {
			fmt.Fprintf(&b, "::error file=%s,line=%d,col=%d::%s\n", githubProperty(d.File), d.Line, d.Column, githubData(d.Message))
		}
	default:
		return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteWarnings writes diags as GitHub workflow warnings (the annotations
// of problems that did not fail the command).
func WriteWarnings(w io.Writer, diags []Diagnostic) error {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "::warning file=%s,line=%d,col=%d::%s\n", githubProperty(d.File), d.Line, d.Column, githubData(d.Message))
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
