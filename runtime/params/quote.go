package params

import (
	"strconv"
)

// ExcerptRunes is the most characters of a value that a message quotes;
// longer text is cut there and marked with "…". Messages about values end
// up in logs, HTTP error bodies and CI annotations, so they carry a short,
// escaped excerpt of the value, never the value whole.
const ExcerptRunes = 48

// Quote returns s as a message quotes it: at most ExcerptRunes characters
// (then "…"), in double quotes, with control, format (bidi) and other
// invisible characters escaped as Go escapes them ("\u202e").
func Quote(s string) string {
	cut := false
	if len(s) > ExcerptRunes {
		n := 0
		for i := range s {
			if n == ExcerptRunes {
				s, cut = s[:i], true
				break
			}
			n++
		}
	}
	q := strconv.Quote(s)
	if cut {
		q = q[:len(q)-1] + `…"`
	}
	return q
}
