package validate

import (
	"io"
	"strings"

	"github.com/worldfoundry/wfgen/gen/manifest"
)

// WriteDiagnostics prints diags in one of manifest.OutputFormats
// (manifest.WriteReport):
//
//   - "text": one "FILE:LINE:COL: message" line each;
//   - "json": an array of {file, line, column, path, message} objects
//     ("[]" when there are none);
//   - "github": GitHub Actions workflow commands,
//     "::error file=F,line=L,col=C::message".
func WriteDiagnostics(w io.Writer, format string, diags []Diagnostic) error {
	return manifest.WriteReport(w, format, diags)
}

// WriteWarnings writes diags as GitHub workflow warnings (the annotations
// of problems that did not fail the command).
func WriteWarnings(w io.Writer, diags []Diagnostic) error {
	var b strings.Builder
	for _, d := range diags {
		a := d.Annotation()
		a.Level = "warning"
		b.WriteString(a.String())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
