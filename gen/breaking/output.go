package breaking

import (
	"io"
	"slices"

	"github.com/worldfoundry/wfgen/gen/manifest"
)

// Write prints changes in one of manifest.OutputFormats
// (manifest.WriteReport). Nothing at all is printed when there is no
// change, in every format.
//
//   - "text": one "FILE:LINE:COL: CLASS: message (RULE:SUBJECT)" line each,
//     followed by "; allowed: why" for an allowed breaking change;
//   - "json": an array of {file, line, column, path, message, class, rule,
//     subject, allowed} objects (validate's keys plus four);
//   - "github": GitHub Actions workflow commands: "::error" for a failing
//     breaking change, "::warning" for an allowed one and for behavioural
//     changes, "::notice" for additive ones, each with file, line, col and
//     a title naming the class and rule.
func Write(w io.Writer, format string, changes []Change) error {
	if len(changes) == 0 && slices.Contains(manifest.OutputFormats, format) {
		return nil
	}
	return manifest.WriteReport(w, format, changes)
}

// Annotation returns the change as a workflow command: an error for a
// failing breaking change, a warning for an allowed one and for a
// behavioural change, a notice for an additive one.
func (c Change) Annotation() manifest.Annotation {
	level := "notice"
	switch {
	case c.Fails():
		level = "error"
	case c.Class != Additive:
		level = "warning"
	}
	msg := c.Message + " (" + c.Key() + ")"
	if c.Allowed != "" {
		msg += "; allowed: " + c.Allowed
	}
	return manifest.Annotation{Level: level, File: c.File, Line: c.Line, Column: c.Column,
		Title: string(c.Class) + " change: " + c.Rule, Message: msg}
}
