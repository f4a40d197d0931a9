// Package naming turns manifest ids into Go identifiers and package names.
//
// The rules are public contract: downstream code refers to the names they
// produce, so a change here is a breaking change and is caught by the tests.
//
// # Exported identifiers
//
// Exported(id) builds an exported Go identifier from a manifest id
// (num_frames → NumFrames, text-to-video → TextToVideo):
//
//  1. The id is split into words at every rune that is neither a Unicode
//     letter nor a Unicode decimal digit ('_', '-', '.', ' ', '/', ...; such
//     runes never appear in the result), at a lower-to-upper case change
//     (userId → user Id), before the last upper-case letter of an upper-case
//     run that is followed by a lower-case letter (HTTPServer → HTTP Server),
//     and between letters and digits (text2video → text 2 video).
//  2. A word that equals an initialism (see Initialisms) ignoring case is
//     written in upper case (id → ID, fps → FPS); the initialism followed by a
//     plain "s" keeps a lower-case "s" (ids → IDs, urls → URLs). Any other word
//     gets its first letter upper-cased and keeps the rest as written.
//  3. The words are joined without separator, except that two digit words
//     in a row keep an underscore between them so that version numbers stay
//     readable and distinct (wan2.1 → Wan2_1, 1.3b → X1_3B).
//  4. When the result does not start with an upper-case letter — it starts
//     with a digit (3d → X3D) or with a letter that has no upper case
//     (名前 → X名前), or the id holds no letter or digit at all ("" → X) —
//     the prefix "X" is added.
//
// An exported identifier can never be a Go keyword (keywords are lower
// case), so no further escaping is needed.
//
// # Package names
//
// Package(id) builds a package (and directory) name from a family id: the
// ASCII letters and digits of the id, lower-cased, in order
// (my-world-model → myworldmodel). Everything else is dropped, so the name
// can never contain a path separator, a dot or "..". A name that starts with
// a digit gets the prefix "x"; an empty name becomes "x". A name that is a Go
// keyword or has special meaning to the go command (main, internal, vendor,
// testdata) gets the suffix "pkg" (type → typepkg, main → mainpkg).
//
// # Collisions
//
// Two ids that map to the same Go name are an error naming both, unless a
// go_name override separates them; Collisions finds them and Scope tracks
// every name declared in one Go scope.
package naming

import (
	"fmt"
	"go/token"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// initialisms are written in upper case when they form a whole word.
var initialisms = map[string]bool{}

func init() {
	for _, s := range []string{
		// golint's common initialisms.
		"ACL", "API", "ASCII", "CPU", "CSS", "DNS", "EOF", "GUID", "HTML", "HTTP",
		"HTTPS", "ID", "IP", "JSON", "LHS", "QPS", "RAM", "RHS", "RPC", "SLA",
		"SMTP", "SQL", "SSH", "TCP", "TLS", "TTL", "UDP", "UI", "UID", "UUID",
		"URI", "URL", "UTF", "VM", "XML", "XMPP", "XSRF", "XSS",
		// Media and machine learning.
		"BF", "BGR", "CUDA", "FP", "FPS", "GPU", "KV", "NPU", "RGB", "RGBA",
		"SHA", "TPU",
	} {
		initialisms[s] = true
	}
}

// Initialisms returns the initialisms Exported writes in upper case, sorted.
func Initialisms() []string {
	out := make([]string, 0, len(initialisms))
	for s := range initialisms {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Words splits id into the words Exported joins (rule 1 of the package
// documentation). Runes that are neither letters nor digits separate words
// and are dropped.
func Words(id string) []string {
	var words []string
	for _, part := range strings.FieldsFunc(id, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		words = append(words, splitPart(part)...)
	}
	return words
}

// splitPart splits a run of letters and digits at case and letter/digit
// boundaries.
func splitPart(s string) []string {
	rs := []rune(s)
	var words []string
	start := 0
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		split := false
		switch {
		case unicode.IsDigit(prev) != unicode.IsDigit(cur):
			split = true
		case unicode.IsLower(prev) && unicode.IsUpper(cur):
			split = true
		case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			split = true
		}
		if split {
			words = append(words, string(rs[start:i]))
			start = i
		}
	}
	return append(words, string(rs[start:]))
}

// camel joins the words of id (rules 1-3) without the legality prefix.
func camel(id string) string {
	var b strings.Builder
	prevDigit := false
	for _, w := range Words(id) {
		first, _ := utf8.DecodeRuneInString(w)
		isDigit := unicode.IsDigit(first)
		if isDigit && prevDigit {
			b.WriteByte('_')
		}
		prevDigit = isDigit
		b.WriteString(word(w))
	}
	return b.String()
}

// word writes one word by rule 2.
func word(w string) string {
	up := strings.ToUpper(w)
	if initialisms[up] {
		return up
	}
	if len(w) > 1 && w[len(w)-1] == 's' && initialisms[up[:len(up)-1]] {
		return up[:len(up)-1] + "s"
	}
	r, n := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(r)) + w[n:]
}

// Exported returns the exported Go identifier for a manifest id, following
// the rules in the package documentation. The result is always a legal,
// exported Go identifier.
func Exported(id string) string {
	s := camel(id)
	if r, _ := utf8.DecodeRuneInString(s); s == "" || !unicode.IsUpper(r) {
		s = "X" + s
	}
	return s
}

// Append returns prefix followed by the words of id, for names such as
// enum constants whose prefix is already an exported identifier
// (Append("Variant", "1.3b") → "Variant1_3B"). Unlike Exported it adds no
// "X": the prefix already makes the name legal. An id without letters or
// digits adds nothing, which the caller's Scope reports as a collision
// with the prefix when the prefix is itself declared.
func Append(prefix, id string) string {
	s := camel(id)
	if prefix != "" && s != "" {
		last, _ := utf8.DecodeLastRuneInString(prefix)
		first, _ := utf8.DecodeRuneInString(s)
		if unicode.IsDigit(last) && unicode.IsDigit(first) {
			return prefix + "_" + s
		}
	}
	return prefix + s
}

// reservedPackages are package names the go command treats specially.
var reservedPackages = map[string]bool{"main": true, "internal": true, "vendor": true, "testdata": true}

// Package returns the Go package name for a family id, following the rules in
// the package documentation. The result is a legal package name, never a Go
// keyword, made only of the ASCII characters a-z and 0-9, so it is also a
// safe single directory name.
func Package(familyID string) string {
	var b strings.Builder
	for _, r := range familyID {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + ('a' - 'A'))
		}
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "x" + s
	}
	if token.IsKeyword(s) || reservedPackages[s] {
		s += "pkg"
	}
	return s
}

// CheckPackage reports whether name is usable as a generated package name
// and directory: lower-case ASCII letters and digits starting with a letter,
// not a Go keyword, and not a name the go command treats specially. It is
// the check applied to go_package overrides.
func CheckPackage(name string) error {
	if name == "" {
		return fmt.Errorf("package name is empty")
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("package name %q must be lower-case ASCII letters and digits starting with a letter", name)
		}
	}
	if token.IsKeyword(name) {
		return fmt.Errorf("package name %q is a Go keyword", name)
	}
	if reservedPackages[name] {
		return fmt.Errorf("package name %q has a special meaning to the go command", name)
	}
	return nil
}

// CheckExported reports whether name is usable as a go_name override: a
// legal, exported Go identifier.
func CheckExported(name string) error {
	if !token.IsIdentifier(name) {
		return fmt.Errorf("go name %q is not a Go identifier", name)
	}
	if !token.IsExported(name) {
		return fmt.Errorf("go name %q is not exported (must start with an upper-case letter)", name)
	}
	return nil
}

// Ident is a manifest id with its optional go_name override.
type Ident struct {
	// ID is the manifest id.
	ID string
	// GoName, when non-empty, is used instead of Exported(ID).
	GoName string
}

// Name returns the Go name of the id: GoName when set, else Exported(ID).
func (i Ident) Name() string {
	if i.GoName != "" {
		return i.GoName
	}
	return Exported(i.ID)
}

// Collision is two ids whose Go names are equal.
type Collision struct {
	// Name is the Go name both ids map to.
	Name string
	// First is the id (or description) that took Name first.
	First string
	// Second is the id (or description) that collided with it.
	Second string
}

// Error describes the collision, naming both ids.
func (c Collision) Error() string {
	return fmt.Sprintf("%s and %s both become the Go name %s; rename one or set go_name", c.First, c.Second, c.Name)
}

// Collisions returns every pair of idents whose Go names are equal, in input
// order: each later ident is paired with the first one that took its name.
// Ids are quoted in the result.
func Collisions(idents []Ident) []Collision {
	var s Scope
	var out []Collision
	for _, id := range idents {
		if c := s.Declare(id.Name(), fmt.Sprintf("%q", id.ID)); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// Scope tracks the Go names declared in one Go scope and what declared
// them. The zero value is empty and ready to use.
type Scope struct {
	owners map[string]string
}

// Declare records that origin (a human-readable description such as
// `task "generate" field "seed"`) declares name. When name is taken it
// returns the collision naming both origins and keeps the first.
func (s *Scope) Declare(name, origin string) *Collision {
	if s.owners == nil {
		s.owners = map[string]string{}
	}
	if first, ok := s.owners[name]; ok {
		return &Collision{Name: name, First: first, Second: origin}
	}
	s.owners[name] = origin
	return nil
}

// Owner returns what declared name, if anything.
func (s *Scope) Owner(name string) (string, bool) {
	o, ok := s.owners[name]
	return o, ok
}

// symbolNames name the ASCII symbols for Value.
var symbolNames = map[rune]string{
	'!': "Bang", '"': "Quote", '#': "Hash", '$': "Dollar", '%': "Percent", '&': "Amp",
	'\'': "Apostrophe", '(': "LParen", ')': "RParen", '*': "Asterisk", '+': "Plus",
	',': "Comma", '-': "Minus", '.': "Dot", '/': "Slash", ':': "Colon", ';': "Semicolon",
	'<': "Less", '=': "Equals", '>': "Greater", '?': "Question", '@': "At", '[': "LBracket",
	'\\': "Backslash", ']': "RBracket", '^': "Caret", '_': "Underscore", '`': "Backtick",
	'{': "LBrace", '|': "Pipe", '}': "RBrace", '~': "Tilde", ' ': "Space",
}

// Value returns the name of an enum constant for a choice value: prefix
// followed by the words of the value (Append). A value without any letter or
// digit ("*", "+", "->") is named by its runes instead, so the name depends
// only on the value, never on its position in the list: ASCII symbols by
// name (Asterisk, Plus, Minus, Greater, ...) and any other rune as U and its
// upper-case hexadecimal code point (U2192); "*" → prefix + "Asterisk",
// "->" → prefix + "MinusGreater".
func Value(prefix, value string) string {
	if len(Words(value)) > 0 {
		return Append(prefix, value)
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range value {
		if n, ok := symbolNames[r]; ok {
			b.WriteString(n)
		} else {
			fmt.Fprintf(&b, "U%04X", r)
		}
	}
	return b.String()
}
