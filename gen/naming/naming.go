// Package naming turns manifest ids into Go identifiers and package names.
//
// The rules are public contract: downstream code refers to the names they
// produce, so a change here is a breaking change and is caught by the tests.
//
// # Exported identifiers
//
// Exported(id) builds an exported Go identifier from a manifest id
// (num_frames → NumFrames, text-to-video → TextToVideo). Generated
// identifiers are ASCII, so that two names that look alike are one name:
//
//  0. The id is folded (Fold): its Unicode compatibility decomposition
//     (NFKD) without combining marks, so "ﬁle" is "file" and "É", written
//     precomposed or decomposed, is "E". A letter or digit that still is
//     not ASCII is a word of its own, U and its upper-case hexadecimal code
//     point (名前 → U540D U524D; ß → U00DF).
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
//     with a digit (3d → X3D), or the id holds no letter or digit at all
//     ("" → X) — the prefix "X" is added.
//
// An exported identifier can never be a Go keyword (keywords are lower
// case), so no further escaping is needed.
//
// # Package names
//
// Package(id) builds a package (and directory) name from a family id: the
// ASCII letters and digits of the folded id (rule 0), lower-cased, in order
// (my-world-model → myworldmodel, größe → groe). Everything else is dropped,
// so the name can never contain a path separator, a dot or "..". A name
// that starts with a digit gets the prefix "x"; an empty name becomes "x".
// A reserved name gets the suffix "pkg" (type → typepkg, main → mainpkg,
// init → initpkg, json → jsonpkg): a Go keyword; a name the go command
// treats specially (main, internal, vendor, testdata); init, which Go
// cannot import; a predeclared identifier (len, string, error, ...), which
// the import would shadow in every file that imports the package; and the
// name of a package that generated code or its documented examples import
// (see ImportedByGenerated), so a program can import both without an alias.
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
	"go/types"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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

// Words splits id into the words Exported joins (rules 0 and 1 of the
// package documentation). Runes that are neither letters nor digits
// separate words and are dropped.
func Words(id string) []string {
	var words []string
	var part []rune
	flush := func() {
		if len(part) > 0 {
			words = append(words, splitPart(string(part))...)
			part = part[:0]
		}
	}
	for _, r := range Fold(id) {
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			part = append(part, r)
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			// A letter or digit with no ASCII form is a word of its own,
			// named by its code point.
			flush()
			words = append(words, fmt.Sprintf("U%04X", r))
		default:
			flush()
		}
	}
	flush()
	return words
}

// Fold returns id in the form names are derived from (rule 0): Unicode
// compatibility decomposition (NFKD: "ﬁ" → "fi", "É" → "E" plus an accent,
// "①" → "1"), with the combining marks it leaves dropped. Ids that fold
// alike derive the same names, so they collide.
func Fold(id string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, norm.NFKD.String(id))
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

// specialPackages are package names the go command treats specially.
var specialPackages = map[string]bool{"main": true, "internal": true, "vendor": true, "testdata": true}

// ImportedByGenerated are the names of the packages that generated code
// and the examples in its documentation import (and Go's runtime, which a
// program imports beside them) (gen/emit's test checks
// that every import of generated code is here). A family package of one
// of these names could not be imported beside them without an alias.
var ImportedByGenerated = []string{
	"batch", "client", "context", "enum", "fmt", "image", "json", "params",
	"pixels", "remote", "runtime", "spec", "stream", "tensor", "time",
}

// reservedPackage says why name cannot be a generated package's name, or
// "" when it can.
func reservedPackage(name string) string {
	switch {
	case token.IsKeyword(name):
		return "is a Go keyword"
	case specialPackages[name]:
		return "has a special meaning to the go command"
	case name == "init":
		return "cannot be imported (Go: cannot import package as init - init must be a func)"
	case types.Universe.Lookup(name) != nil:
		return "is a predeclared Go identifier, which importing the package would shadow"
	case slices.Contains(ImportedByGenerated, name):
		return "is the name of a package generated code imports (" + name + "), so both could not be imported without an alias"
	}
	return ""
}

// Package returns the Go package name for a family id, following the rules in
// the package documentation. The result is a legal package name, never a Go
// keyword, made only of the ASCII characters a-z and 0-9, so it is also a
// safe single directory name.
func Package(familyID string) string {
	var b strings.Builder
	for _, r := range Fold(familyID) {
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
	if reservedPackage(s) != "" {
		s += "pkg"
	}
	return s
}

// CheckPackage reports whether name is usable as a generated package name
// and directory: lower-case ASCII letters and digits starting with a letter,
// and not reserved (see Package). It is the check applied to go_package
// overrides.
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
	if why := reservedPackage(name); why != "" {
		return fmt.Errorf("package name %q %s", name, why)
	}
	return nil
}

// CheckExported reports whether name is usable as a go_name override: a
// legal, exported Go identifier made of ASCII letters and digits.
func CheckExported(name string) error {
	if strings.IndexFunc(name, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0 {
		return fmt.Errorf("go name %q is not ASCII (generated identifiers are ASCII letters and digits)", name)
	}
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
