package manifest

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/worldfoundry/wfgen/runtime/params"
)

// ExcerptRunes is the most characters of a manifest's own text (a key, a
// value, an id) that a diagnostic quotes (see Quote).
const ExcerptRunes = params.ExcerptRunes

// Quote returns s as a diagnostic quotes it: at most ExcerptRunes
// characters (then "…"), in double quotes, with control, format (bidi) and
// other invisible characters escaped as Go escapes them ("\u202e"). A
// diagnostic may end up in a CI log or a pull-request annotation, so it
// carries a short, escaped excerpt of what it is about, never the text
// whole.
func Quote(s string) string { return params.Quote(s) }

// quoted is a string argument of Sprintf: %q quotes it with Quote, every
// other verb prints it as a string would.
type quoted string

// Format implements fmt.Formatter.
func (s quoted) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprint(f, Quote(string(s)))
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), string(s))
}

// Sprintf is fmt.Sprintf for diagnostics: every string argument printed
// with %q is an excerpt (see Quote).
func Sprintf(format string, args ...any) string {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = quoted(s)
		}
	}
	return fmt.Sprintf(format, args...)
}

// safePointer returns the longest prefix of JSON pointer ptr whose
// segments are short and printable, so that a diagnostic's path does not
// carry a long or invisible key whole.
func safePointer(ptr string) string {
	segs := SplitPointer(ptr)
	for i, s := range segs {
		if len(s) > ExcerptRunes || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return JoinPointer(segs[:i]...)
		}
	}
	return ptr
}
