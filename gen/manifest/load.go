package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Limits applied to every manifest before and while it is read. Each error
// caused by a limit names it.
const (
	// MaxFileSize is the largest manifest file, in bytes.
	MaxFileSize = 1 << 20
	// MaxDepth is the deepest nesting of mappings and sequences.
	MaxDepth = 64
	// MaxNodes is the largest number of nodes in a document after YAML
	// aliases are expanded (this is what stops alias bombs).
	MaxNodes = 100_000
)

// Error is a problem found while reading a manifest, at a 1-based line and
// column. Path is the JSON pointer of the offending value when known.
type Error struct {
	// Line is the 1-based line of the problem.
	Line int
	// Column is the 1-based column (in characters) of the problem.
	Column int
	// Path is the JSON pointer of the offending value, or "".
	Path string
	// Message says what is wrong and, when it can, what would be right.
	Message string
}

// Error returns "LINE:COL: message".
func (e Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message) }

// File is a manifest read from disk or memory.
type File struct {
	// Path is the path as given by the user.
	Path string
	// Origin is the manifest's path as the files generated from it record
	// it (in their header): slash-separated and the same from whatever
	// folder the generator runs. The caller that writes files sets it
	// (wfgen: the path relative to the root of the output's Go module);
	// "" means Path.
	Origin string
	// Dir is the folder of the file, against which relative checkpoint URIs
	// are resolved.
	Dir string
	// SchemaVersion is the manifest's schema_version.
	SchemaVersion int
	// Spec is the decoded spec with defaults applied; nil until Decode.
	Spec *spec.ModelInferenceSpec
	// Value is the document as a JSON-compatible value (map[string]any,
	// []any, string, json.Number, bool or nil), YAML aliases expanded.
	Value any

	pos    posNode         // positions of the document's nodes
	pruned map[string]bool // pointers of pruned values (see Prune)
}

// OriginPath returns Origin, or Path when Origin is not set.
func (f *File) OriginPath() string {
	if f.Origin != "" {
		return f.Origin
	}
	return f.Path
}

// posNode is the position of one node of the document and of its
// children, in the shape of Value (aliases expanded, a repeated key
// dropped). It is all that is kept of the YAML or JSON node tree.
type posNode struct {
	line, col int32
	block     bool      // a block-style mapping or sequence
	keys      []keyPos  // a mapping's keys, in the order of kids
	kids      []posNode // a mapping's values or a sequence's items
}

// keyPos is a mapping key and where it is written.
type keyPos struct {
	name      string
	line, col int32
}

// ReadFile reads a manifest file, refusing files larger than MaxFileSize
// without reading them whole, anything that is not a regular file (a
// folder, a named pipe, a device, a socket, or a symbolic link to one)
// without blocking on it — a pipe is never opened for a blocking read —
// and a path that leads outside its root (see RootOf) with an
// *OutsideError, without opening what it leads to.
func ReadFile(path string) ([]byte, error) {
	realRoot, name, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	// Open the resolved name through its root, so that a link swapped in
	// after the check still cannot lead out of it.
	root, err := os.OpenRoot(realRoot)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Stat first, so that a device is not even opened; open without
	// blocking and check again, so that a file swapped for a pipe in
	// between cannot block either.
	st, err := root.Stat(name)
	if err != nil {
		return nil, pathError(path, err)
	}
	if err := regular(path, st); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathError(path, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(path, st); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &LimitError{Limit: "max file size", Max: MaxFileSize, Unit: "bytes"}
	}
	return data, nil
}

// NotRegularError reports a path that is not a regular file.
type NotRegularError struct {
	// Path is the path as given.
	Path string
	// Mode is the file's type.
	Mode os.FileMode
}

// Error names the path and what it is.
func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is not a regular file (it is %s); wfgen reads manifests from regular files", e.Path, FileKind(e.Mode))
}

// FileKind names the type of a file mode in words ("a named pipe").
func FileKind(m os.FileMode) string {
	switch t := m.Type(); {
	case t&os.ModeDir != 0:
		return "a folder"
	case t&os.ModeNamedPipe != 0:
		return "a named pipe"
	case t&os.ModeSocket != 0:
		return "a socket"
	case t&os.ModeCharDevice != 0:
		return "a character device"
	case t&os.ModeDevice != 0:
		return "a device"
	case t&os.ModeSymlink != 0:
		return "a symbolic link"
	case t == 0:
		return "a regular file"
	}
	return "not a regular file"
}

func regular(path string, st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return nil
}

// LimitError reports input beyond one of the loader's limits.
type LimitError struct {
	// Limit names the limit, e.g. "max file size".
	Limit string
	// Max is the limit's value.
	Max int
	// Unit is what Max counts.
	Unit string
}

// Error names the limit and its value.
func (e *LimitError) Error() string {
	return fmt.Sprintf("manifest exceeds the %s limit (%d %s)", e.Limit, e.Max, e.Unit)
}

// IsJSON reports whether path names a JSON manifest (by its extension).
func IsJSON(path string) bool { return strings.EqualFold(filepath.Ext(path), ".json") }

// Parse reads data (the contents of path) into a File with Value set. A
// ".json" path is read as strict JSON, anything else as YAML. It reports
// every problem it finds; the File is nil when the data cannot be read as
// a document at all.
func Parse(path string, data []byte) (*File, []Error) {
	f := &File{Path: path, Dir: filepath.Dir(path)}
	if len(data) > MaxFileSize {
		return nil, []Error{{Line: 1, Column: 1, Message: (&LimitError{Limit: "max file size", Max: MaxFileSize, Unit: "bytes"}).Error()}}
	}
	if e, ok := checkText(data); !ok {
		return nil, []Error{e}
	}
	var root *yaml.Node
	var errs []Error
	if IsJSON(path) {
		root, errs = parseJSON(data)
	} else {
		root, errs = parseYAML(data)
	}
	if root == nil {
		return nil, errs
	}
	c := converter{}
	f.Value, f.pos = c.value(root, 0)
	errs = append(errs, c.errs...)
	for _, p := range c.unreadable {
		f.Prune(p)
	}
	if c.stop {
		return nil, errs
	}
	return f, errs
}

// checkText refuses binary and non-UTF-8 data, pointing at the first bad
// byte, and names UTF-16 text as such.
func checkText(data []byte) (Error, bool) {
	if msg := utf16Text(data); msg != "" {
		return Error{Line: 1, Column: 1, Message: msg}, false
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		l, c := offsetPosition(data, i)
		return Error{Line: l, Column: c, Message: fmt.Sprintf("file is binary (NUL byte at offset %d); a manifest is UTF-8 text", i)}, false
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		l, c := offsetPosition(data, i)
		return Error{Line: l, Column: c, Message: fmt.Sprintf("file is not valid UTF-8 (bad byte 0x%02x at offset %d); a manifest is UTF-8 text", data[i], i)}, false
	}
	return Error{}, true
}

// utf16Text recognises UTF-16 text (by its byte order mark, or by the
// zero bytes of ASCII characters at its start) and returns the message
// that says so and how to convert it; "" when data is not UTF-16.
func utf16Text(data []byte) string {
	const conv = "; a manifest is UTF-8 text: convert it with iconv -f %s -t UTF-8 FILE > NEWFILE"
	switch {
	case len(data) >= 4 && (bytes.HasPrefix(data, []byte{0xff, 0xfe, 0, 0}) || bytes.HasPrefix(data, []byte{0, 0, 0xfe, 0xff})):
		return "file is UTF-32 (with a byte order mark)" + fmt.Sprintf(conv, "UTF-32")
	case bytes.HasPrefix(data, []byte{0xff, 0xfe}):
		return "file is UTF-16 (little-endian, with a byte order mark)" + fmt.Sprintf(conv, "UTF-16")
	case bytes.HasPrefix(data, []byte{0xfe, 0xff}):
		return "file is UTF-16 (big-endian, with a byte order mark)" + fmt.Sprintf(conv, "UTF-16")
	case len(data) >= 4 && data[0] != 0 && data[1] == 0 && data[2] != 0 && data[3] == 0:
		return "file is UTF-16 (little-endian)" + fmt.Sprintf(conv, "UTF-16LE")
	case len(data) >= 4 && data[0] == 0 && data[1] != 0 && data[2] == 0 && data[3] != 0:
		return "file is UTF-16 (big-endian)" + fmt.Sprintf(conv, "UTF-16BE")
	}
	return ""
}

// offsetPosition converts a byte offset to a 1-based line and column in
// characters.
func offsetPosition(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(data[start:off])
}

// parseYAML parses exactly one YAML document into a node tree.
func parseYAML(data []byte) (root *yaml.Node, errs []Error) {
	defer func() {
		// The YAML parser reports errors by value, but never let a bug in
		// it take the caller down.
		if r := recover(); r != nil {
			root, errs = nil, []Error{{Line: 1, Column: 1, Message: fmt.Sprintf("cannot parse YAML: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []Error{{Line: 1, Column: 1, Message: "manifest is empty; it must be a mapping with model_family_id, variants and tasks"}}
		}
		return nil, []Error{yamlError(err, data)}
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		l, c := next.Line, next.Column
		if len(next.Content) > 0 {
			l, c = next.Content[0].Line, next.Content[0].Column
		}
		errs = append(errs, Error{Line: l, Column: c, Message: "more than one YAML document; a manifest holds exactly one family"})
	} else if !errors.Is(err, io.EOF) {
		errs = append(errs, yamlError(err, data))
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], errs
	}
	return nil, append(errs, Error{Line: 1, Column: 1, Message: "manifest is empty; it must be a mapping with model_family_id, variants and tasks"})
}

// yamlError turns a yaml.v3 error ("yaml: line N: msg") on data into an
// Error.
func yamlError(err error, data []byte) Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if msg == "control characters are not allowed" {
		// yaml.v3's reader says neither where nor which.
		if e, ok := yamlCharacter(data); ok {
			return e
		}
	}
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil && n > 0 {
				line, msg = n, rest[i+2:]
				// yaml.v3 prints 1-based lines for scanner errors but
				// 0-based ones for parser errors.
				if parserError(msg) {
					line++
				}
			}
		}
	}
	if strings.Contains(msg, "exceeded max depth") {
		msg += fmt.Sprintf(" (wfgen's max nesting depth is %d)", MaxDepth)
	}
	return Error{Line: line, Column: 1, Message: "invalid YAML: " + msg}
}

// yamlCharacter finds the first character YAML does not allow in a stream
// (YAML 1.2 c-printable: no C0 control but tab, LF and CR, no DEL, no C1
// control but NEL, no surrogate, no U+FFFE or U+FFFF) and reports where
// it is.
func yamlCharacter(data []byte) (Error, bool) {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if !yamlPrintable(r) {
			l, c := offsetPosition(data, i)
			name := fmt.Sprintf("U+%04X", r)
			if r == 0x7f {
				name += " (DEL)"
			}
			esc := fmt.Sprintf(`\u%04x`, r)
			if r < 0x80 {
				esc = fmt.Sprintf(`\x%02x`, r)
			}
			return Error{Line: l, Column: c, Message: fmt.Sprintf("invalid YAML: character %s is not allowed in YAML; in a double-quoted string write it as \"%s\"", name, esc)}, true
		}
		i += n
	}
	return Error{}, false
}

func yamlPrintable(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d || (r >= 0x20 && r <= 0x7e) || r == 0x85 ||
		(r >= 0xa0 && r <= 0xd7ff) || (r >= 0xe000 && r <= 0xfffd) || (r >= 0x10000 && r <= 0x10ffff)
}

// parserError reports whether a yaml.v3 message comes from its parser
// (rather than its scanner).
func parserError(msg string) bool {
	switch msg {
	case "found undefined tag handle", "found duplicate %YAML directive",
		"found incompatible YAML document", "found duplicate %TAG directive":
		return true
	}
	return strings.HasPrefix(msg, "did not find expected ")
}

// converter turns a node tree into a JSON-compatible value, enforcing
// MaxDepth and MaxNodes and collecting every problem.
type converter struct {
	errs      []Error
	nodes     int
	stop      bool     // a limit was hit; the value is incomplete
	path      []string // JSON pointer segments of the current node
	expanding map[*yaml.Node]bool
	// unreadable are the pointers of scalars that could not be read.
	unreadable []string
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) {
	c.errs = append(c.errs, Error{Line: n.Line, Column: n.Column, Path: JoinPointer(c.path...), Message: Sprintf(format, args...)})
}

// value converts node n and returns its value and positions.
func (c *converter) value(n *yaml.Node, depth int) (any, posNode) {
	pos := posNode{line: int32(n.Line), col: int32(n.Column)}
	if c.stop {
		return nil, pos
	}
	c.nodes++
	if c.nodes > MaxNodes {
		c.errorf(n, "document has more than %d nodes after expanding aliases (max nodes limit; an alias bomb?)", MaxNodes)
		c.stop = true
		return nil, pos
	}
	if depth > MaxDepth {
		c.errorf(n, "document is nested deeper than %d levels (max depth limit)", MaxDepth)
		c.stop = true
		return nil, pos
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			c.errorf(n, "alias *%s refers to no anchor", n.Value)
			return nil, pos
		}
		if c.expanding[n.Alias] {
			c.errorf(n, "alias *%s refers to a node that contains it (recursive alias)", n.Value)
			return nil, pos
		}
		if c.expanding == nil {
			c.expanding = map[*yaml.Node]bool{}
		}
		c.expanding[n.Alias] = true
		c.nodes-- // the alias itself is not a node of the expanded document
		v, target := c.value(n.Alias, depth)
		delete(c.expanding, n.Alias)
		// The alias is written inline where it is used; its contents are
		// where the anchor is.
		target.line, target.col, target.block = pos.line, pos.col, false
		return v, target
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		pos.block = n.Style&yaml.FlowStyle == 0
		pos.keys = make([]keyPos, 0, len(n.Content)/2)
		pos.kids = make([]posNode, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				c.errorf(k, "mapping key must be a plain string, not a %s", kindName(k))
				continue
			}
			if k.ShortTag() == "!!merge" {
				c.errorf(k, "YAML merge keys (<<) are not supported; write the keys out (anchors and aliases are fine)")
				continue
			}
			key := k.Value
			if _, dup := m[key]; dup {
				c.path = append(c.path, key)
				c.errorf(k, "duplicate key %q (first defined at line %d)", key, previousKey(n, i, key).Line)
				c.path = c.path[:len(c.path)-1]
				continue
			}
			c.path = append(c.path, key)
			val, vpos := c.value(v, depth+1)
			m[key] = val
			pos.keys = append(pos.keys, keyPos{name: key, line: int32(k.Line), col: int32(k.Column)})
			pos.kids = append(pos.kids, vpos)
			c.path = c.path[:len(c.path)-1]
		}
		return m, pos
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		pos.block = n.Style&yaml.FlowStyle == 0
		pos.kids = make([]posNode, len(n.Content))
		for i, e := range n.Content {
			c.path = append(c.path, strconv.Itoa(i))
			s[i], pos.kids[i] = c.value(e, depth+1)
			c.path = c.path[:len(c.path)-1]
		}
		return s, pos
	case yaml.ScalarNode:
		v, err := scalar(n)
		if err != "" {
			c.errorf(n, "%s", err)
			// The value is null now; the message above is the only one
			// about it (see File.Pruned).
			c.unreadable = append(c.unreadable, JoinPointer(c.path...))
		}
		return v, pos
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return c.value(n.Content[0], depth)
		}
	}
	c.errorf(n, "unsupported YAML node")
	return nil, pos
}

// previousKey returns the first key node of mapping n named key; the
// caller knows there is one before index i.
func previousKey(n *yaml.Node, i int, key string) *yaml.Node {
	for j := 0; j < i; j += 2 {
		k := n.Content[j]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && k.Value == key {
			return k
		}
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}

// scalar resolves a scalar node the way YAML 1.2 (as read by yaml.v3) does
// and returns its JSON-compatible value: string, json.Number, bool or nil.
// Integer literals stay integer literals ("12"), float literals always hold
// a '.' or an exponent ("12.0"), so the two remain distinguishable.
func scalar(n *yaml.Node) (any, string) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp":
		if n.Style == 0 && yamlBigRadixInt.MatchString(n.Value) {
			// yaml.v3 reads a hexadecimal, octal or binary integer that
			// does not fit 64 bits as a string.
			return nil, fmt.Sprintf("integer %s is out of range (64-bit signed)", n.Value)
		}
		return n.Value, ""
	case "!!null":
		return nil, ""
	case "!!bool":
		switch strings.ToLower(n.Value) {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, Sprintf("cannot read %q as a boolean (write true or false)", n.Value)
	case "!!int":
		plain := strings.ReplaceAll(n.Value, "_", "")
		i, err := strconv.ParseInt(plain, 0, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Sprintf("integer %s is out of range (64-bit signed)", n.Value)
			}
			return nil, Sprintf("cannot read %q as an integer", n.Value)
		}
		return json.Number(strconv.FormatInt(i, 10)), ""
	case "!!float":
		if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 && yamlBigInt.MatchString(n.Value) {
			// yaml.v3 reads an integer that does not fit 64 bits as a float.
			return nil, fmt.Sprintf("integer %s is out of range (64-bit signed)", n.Value)
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, Sprintf("number %s is not a finite number (JSON has no inf or nan); if you mean the text, quote it: %q", n.Value, n.Value)
		}
		return json.Number(formatFloat(f)), ""
	default:
		return nil, Sprintf("unsupported YAML tag %s on %q; manifests hold strings, numbers, booleans, null, lists and mappings", tag, n.Value)
	}
}

// yamlBigInt and yamlBigRadixInt match the plain integer literals yaml.v3
// resolves to something else when they do not fit 64 bits.
var (
	yamlBigInt      = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)
	yamlBigRadixInt = regexp.MustCompile(`^[-+]?0(x[0-9a-fA-F_]+|o[0-7_]+|b[01_]+)$`)
)

// formatFloat writes f as a JSON number that always reads back as a float
// literal.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// ParseNode parses data (the contents of path) as Parse does — strict JSON
// for a ".json" path, else one YAML document, within the same limits — and
// returns the document's node tree, keys in their written order, for a tool
// that rewrites a document (wfgen convert). Parse is what validation reads.
func ParseNode(path string, data []byte) (*yaml.Node, []Error) {
	if len(data) > MaxFileSize {
		return nil, []Error{{Line: 1, Column: 1, Message: (&LimitError{Limit: "max file size", Max: MaxFileSize, Unit: "bytes"}).Error()}}
	}
	if e, ok := checkText(data); !ok {
		return nil, []Error{e}
	}
	if IsJSON(path) {
		return parseJSON(data)
	}
	return parseYAML(data)
}
