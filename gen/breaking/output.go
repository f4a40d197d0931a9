package breaking

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Formats are the output formats Write accepts (the same as wfgen
// validate's).
var Formats = []string{"text", "json", "github"}

// Write prints changes in one of Formats. Nothing at all is printed when
// there is no change, in every format.
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
	var b strings.Builder
	switch format {
	case "text":
		for _, c := range changes {
			b.WriteString(c.String())
			b.WriteByte('\n')
		}
	case "json":
		if len(changes) == 0 {
			return nil
		}
		out, err := json.MarshalIndent(changes, "", "  ")
		if err != nil {
			return err
		}
		b.Write(out)
		b.WriteByte('\n')
	case "github":
		for _, c := range changes {
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
			fmt.Fprintf(&b, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", level, githubProperty(c.File), c.Line, c.Column,
				githubProperty(string(c.Class)+" change: "+c.Rule), githubData(msg))
		}
	default:
		return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
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
