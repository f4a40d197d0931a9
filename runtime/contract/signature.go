package contract

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// Signatures are the method schemas of a TorchScript archive's root module
// as its code declares them, read without libtorch (ReadSignatures). They
// are what the engine's Module.Methods and Module.Schema give for the
// module: argument names (without self), types in annotation form
// ("List[int]", "Optional[Tensor]"), defaults in the engine's value form,
// and the return type.
type Signatures struct {
	// Class is the root module's class ("__torch__.pkg.Net").
	Class string
	// File is the archive entry whose code defines the class
	// ("net/code/__torch__/pkg.py").
	File    string
	methods []string
	schemas map[string]engine.MethodSchema
	errs    map[string]error
	names   map[string][]string
}

// Methods lists the module's method names, sorted.
func (s *Signatures) Methods() []string { return slices.Clone(s.methods) }

// Schema returns the schema of one method, or where its signature could
// not be read (a *CodeError).
func (s *Signatures) Schema(method string) (engine.MethodSchema, error) {
	if err, bad := s.errs[method]; bad {
		return engine.MethodSchema{}, err
	}
	sc, ok := s.schemas[method]
	if !ok {
		return engine.MethodSchema{}, fmt.Errorf("no method %q (its methods: %s)", method, strings.Join(s.methods, ", "))
	}
	sc.Arguments = slices.Clone(sc.Arguments)
	sc.Returns = slices.Clone(sc.Returns)
	return sc, nil
}

// ReturnNames returns the field names of the NamedTuple a method returns
// (GoogLeNet's logits, aux_logits2, aux_logits1), in the order of the
// tuple's elements; nil when it returns none. Its schema's return type is
// the tuple of the fields' types.
func (s *Signatures) ReturnNames(method string) []string {
	return slices.Clone(s.names[method])
}

// CodeError is a signature in an archive's code that could not be read.
type CodeError struct {
	// File is the archive entry; Line and Column (1-based, in bytes) are
	// where in it.
	File         string
	Line, Column int
	// Method is the method whose signature it is.
	Method string
	// Msg says what is wrong.
	Msg string
}

func (e *CodeError) Error() string {
	return fmt.Sprintf("%s:%d:%d: the signature of %s: %s", e.File, e.Line, e.Column, e.Method, e.Msg)
}

// Limits of ReadSignatures, beyond MaxCodeBytes.
const (
	// maxValueDepth is the deepest nesting of a default value or type.
	maxValueDepth = 64
	// maxArguments is the most arguments one method may declare.
	maxArguments = 4096
)

// ReadSignatures reads a TorchScript archive (see ReadReturns) and returns
// the signatures its code declares for the root module's methods: each
// "def" in the body of the module's class, but the hook functions the
// class lists in __forward_pre_hooks__ and __forward_hooks__. A NamedTuple
// class in a type is printed as the Tuple of its fields' types, as the
// engine prints it (ReturnNames gives a returned one's field names).
//
// Defaults are read as torch.jit's code printer writes them: None, True,
// False, int and float literals (an int literal of a float argument is a
// float; inf, -inf, nan), string literals with Python's escapes, lists,
// tuples, dicts, torch.device("cpu") (the string "cpu"), annotate(T, v)
// (v) and CONSTANTS.cN, the Nth value of the archive's constants.pkl (a
// string with non-ASCII characters, or a list holding one, is printed
// there). A tensor or object constant, or an expression the printer
// writes for another kind of value (an enum member), is an Opaque.
//
// An archive it cannot read is an error; so is a signature it cannot
// parse, but only when that method's Schema is asked for. Everything read
// is bounded: entries by MaxCodeBytes, nesting by 64 levels, the
// constants by their entry's size.
func ReadSignatures(r io.ReaderAt, size int64) (*Signatures, error) {
	a, err := openArchive(r, size)
	if err != nil {
		return nil, err
	}
	file := a.dir + "code/" + strings.ReplaceAll(a.module, ".", "/") + ".py"
	qualified := a.module + "." + a.class
	methods, hooks, found := classMethods(a.code, a.class)
	if !found {
		return nil, fmt.Errorf("%s does not define class %s, the root module's class", file, a.class)
	}
	s := &Signatures{Class: qualified, File: file, schemas: map[string]engine.MethodSchema{}, errs: map[string]error{}}
	nt := &namedTuples{a: a}
	var (
		consts    []any
		constsErr error
		read      bool
	)
	constants := func() ([]any, error) {
		if !read {
			read = true
			data, err := a.read("constants.pkl")
			if err == nil {
				consts, err = readConstants(data)
				if err != nil {
					err = fmt.Errorf("%sconstants.pkl: %w", a.dir, err)
				}
			}
			constsErr = err
		}
		return consts, constsErr
	}
	for _, m := range methods {
		if hooks[m.name] {
			continue
		}
		if _, dup := s.schemas[m.name]; dup || s.errs[m.name] != nil {
			continue
		}
		s.methods = append(s.methods, m.name)
		p := &sigParser{src: m.text, constants: constants}
		schema, err := p.signature()
		if err != nil {
			line, col := 1, 1
			if p.errAt < len(m.text) {
				line += strings.Count(m.text[:p.errAt], "\n")
				col += p.errAt - (strings.LastIndexByte(m.text[:p.errAt], '\n') + 1)
			} else {
				line += strings.Count(m.text, "\n")
				col += len(m.text) - (strings.LastIndexByte(m.text, '\n') + 1)
			}
			if line == 1 {
				col += m.col
			}
			s.errs[m.name] = &CodeError{File: file, Line: m.line + line, Column: col, Method: m.name, Msg: err.Error()}
			continue
		}
		if names := nt.names(schema.Returns[0]); names != nil {
			if s.names == nil {
				s.names = map[string][]string{}
			}
			s.names[m.name] = names
		}
		// A NamedTuple is printed as the Tuple it is, as the engine does.
		schema.Returns[0] = nt.expandText(schema.Returns[0])
		for i, arg := range schema.Arguments {
			schema.Arguments[i].Type = nt.expandText(arg.Type)
		}
		s.schemas[m.name] = schema
	}
	slices.Sort(s.methods)
	return s, nil
}

// sigToken is one token of a signature.
type sigToken struct {
	// kind: 'i' a name (dotted: "torch.device"), 'n' a number, 's' a string
	// (text is its value), 'p' punctuation ("(", ")", "[", "]", "{", "}",
	// ",", ":", "=", "->", "-"), 'o' any other character, 'x' a string
	// literal that cannot be read (text says why), 'e' the end.
	kind     byte
	text     string
	off, end int
}

// sigParser parses one method's signature, "def NAME(ARGS) -> TYPE:".
type sigParser struct {
	src       string
	i         int // next byte to lex
	toks      []sigToken
	pos       int // next token
	constants func() ([]any, error)
	errAt     int // offset of the failure
}

// sigErr is a parse failure at an offset.
type sigErr struct {
	at  int
	msg string
}

func (e *sigErr) Error() string { return e.msg }

func (p *sigParser) fail(at int, format string, args ...any) error {
	return &sigErr{at: at, msg: fmt.Sprintf(format, args...)}
}

// lex appends the next token.
func (p *sigParser) lex() {
	s := p.src
	for p.i < len(s) {
		switch c := s[p.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
			continue
		case c == '\\' && p.i+1 < len(s) && s[p.i+1] == '\n':
			p.i += 2
			continue
		case c == '#':
			for p.i < len(s) && s[p.i] != '\n' {
				p.i++
			}
			continue
		}
		break
	}
	start := p.i
	if start >= len(s) {
		p.toks = append(p.toks, sigToken{kind: 'e', off: start, end: start})
		return
	}
	tok := sigToken{off: start}
	switch c := s[start]; {
	case c == '"' || c == '\'':
		v, end, err := scanString(s, start)
		if err != "" {
			tok.kind, tok.text = 'x', err
		} else {
			tok.kind, tok.text = 's', v
		}
		p.i = end
	case isIdentStart(c):
		j := start + 1
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		tok.kind, tok.text = 'i', s[start:j]
		p.i = j
	case c >= '0' && c <= '9' || c == '.' && start+1 < len(s) && s[start+1] >= '0' && s[start+1] <= '9':
		j := start + 1
		for j < len(s) {
			d := s[j]
			if d >= '0' && d <= '9' || d == '.' || d == 'e' || d == 'E' || d == '_' ||
				(d == '+' || d == '-') && (s[j-1] == 'e' || s[j-1] == 'E') ||
				d == 'x' || d == 'X' || d >= 'a' && d <= 'f' || d >= 'A' && d <= 'F' {
				j++
				continue
			}
			break
		}
		tok.kind, tok.text = 'n', s[start:j]
		p.i = j
	case c == '-' && start+1 < len(s) && s[start+1] == '>':
		tok.kind, tok.text = 'p', "->"
		p.i += 2
	case strings.IndexByte("()[]{},:=-", c) >= 0:
		tok.kind, tok.text = 'p', string(c)
		p.i++
	default:
		tok.kind, tok.text = 'o', string(c)
		p.i++
	}
	tok.end = p.i
	p.toks = append(p.toks, tok)
}

func (p *sigParser) peek() sigToken {
	for p.pos >= len(p.toks) {
		p.lex()
	}
	return p.toks[p.pos]
}

func (p *sigParser) next() sigToken {
	t := p.peek()
	if t.kind != 'e' {
		p.pos++
	}
	return t
}

// is reports whether the next token is the punctuation s.
func (p *sigParser) is(s string) bool {
	t := p.peek()
	return t.kind == 'p' && t.text == s
}

// describe writes a token for messages.
func describe(t sigToken) string {
	switch t.kind {
	case 'e':
		return "the end of the code"
	case 's':
		return "a string"
	case 'n':
		return "the number " + t.text
	case 'i':
		return strconv.Quote(t.text)
	case 'x':
		return t.text
	}
	return strconv.Quote(t.text)
}

func (p *sigParser) expect(s, context string) error {
	t := p.next()
	if t.kind != 'p' || t.text != s {
		return p.fail(t.off, "expected %q %s, found %s", s, context, describe(t))
	}
	return nil
}

// signature parses "def NAME(ARGS) -> TYPE:". The first argument (self) is
// not an argument of the schema.
func (p *sigParser) signature() (_ engine.MethodSchema, err error) {
	defer func() {
		if e, ok := err.(*sigErr); ok {
			p.errAt = e.at
		}
	}()
	s := engine.MethodSchema{Arguments: []engine.Argument{}}
	if t := p.next(); t.kind != 'i' || t.text != "def" {
		return s, p.fail(t.off, "expected \"def\", found %s", describe(t))
	}
	name := p.next()
	if name.kind != 'i' || !isIdentifier(name.text) {
		return s, p.fail(name.off, "expected the method name, found %s", describe(name))
	}
	s.Name = name.text
	if err := p.expect("(", "after the method name"); err != nil {
		return s, err
	}
	seen := map[string]bool{}
	first := true
	for !p.is(")") {
		t := p.next()
		if t.kind != 'i' || !isIdentifier(t.text) {
			return s, p.fail(t.off, "expected an argument name, found %s", describe(t))
		}
		if seen[t.text] {
			return s, p.fail(t.off, "argument %s declared twice", t.text)
		}
		seen[t.text] = true
		a := engine.Argument{Name: t.text, Type: "Tensor"} // TorchScript's type of an unannotated argument
		var typ *Type
		if p.is(":") {
			p.next()
			text, parsed, err := p.typeText("argument "+a.Name, ",", ")", "=")
			if err != nil {
				return s, err
			}
			a.Type, typ = text, parsed
		}
		if p.is("=") {
			p.next()
			v, err := p.defaultValue(typ)
			if err != nil {
				return s, err
			}
			a.HasDefault, a.Default = true, v
		}
		if !first {
			if len(s.Arguments) == maxArguments {
				return s, p.fail(t.off, "more than %d arguments", maxArguments)
			}
			s.Arguments = append(s.Arguments, a)
		}
		first = false
		if !p.is(")") {
			if err := p.expect(",", "or \")\" after argument "+a.Name); err != nil {
				return s, err
			}
		}
	}
	p.next() // ")"
	ret := "NoneType"
	if p.is("->") {
		p.next()
		text, _, err := p.typeText("the return type", ":")
		if err != nil {
			return s, err
		}
		ret = text
	}
	if err := p.expect(":", "after the signature"); err != nil {
		return s, err
	}
	s.Returns = []string{ret}
	return s, nil
}

// typeText reads a type up to one of the stops at bracket depth 0 and
// returns it in annotation form (as ParseType reads and Type.String
// writes it) with the parsed type, or, when ParseType cannot read it, as
// written (spaces collapsed) and nil.
func (p *sigParser) typeText(what string, stops ...string) (string, *Type, error) {
	start := p.peek()
	var open []string // the brackets open, innermost last
	end := start.off
	for {
		t := p.peek()
		switch {
		case t.kind == 'e':
			return "", nil, p.fail(start.off, "%s: the type does not end (with %s)", what, quoteAll(stops))
		case t.kind == 'x':
			return "", nil, p.fail(t.off, "%s", t.text)
		case t.kind == 'p' && len(open) == 0 && slices.Contains(stops, t.text):
			text := strings.Join(strings.Fields(p.src[start.off:end]), " ")
			if text == "" {
				return "", nil, p.fail(start.off, "%s: missing type", what)
			}
			if t, err := ParseType(text); err == nil {
				return t.String(), &t, nil
			}
			return text, nil, nil
		case t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{"):
			if len(open) == maxValueDepth {
				return "", nil, p.fail(t.off, "%s: the type nests deeper than %d", what, maxValueDepth)
			}
			open = append(open, t.text)
		case t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}"):
			if len(open) == 0 || closers[open[len(open)-1]] != t.text {
				opener := "nothing"
				if len(open) > 0 {
					opener = strconv.Quote(open[len(open)-1])
				}
				return "", nil, p.fail(t.off, "%s: %q closes %s in the type", what, t.text, opener)
			}
			open = open[:len(open)-1]
		}
		end = t.end
		p.next()
	}
}

var closers = map[string]string{"(": ")", "[": "]", "{": "}"}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " or ")
}

// defaultValue reads a default up to the "," or ")" that ends it. A value
// it cannot evaluate is an Opaque of its code.
func (p *sigParser) defaultValue(t *Type) (any, error) {
	start := p.pos
	first := p.peek()
	if v, ok, err := p.value(t, 0); err != nil {
		return nil, err
	} else if ok && (p.is(",") || p.is(")")) {
		return v, nil
	}
	// Not a value this reader evaluates: skip it, balanced, as code.
	p.pos = start
	depth, end := 0, first.off
	for {
		tok := p.peek()
		if tok.kind == 'e' {
			return nil, p.fail(first.off, "the default does not end (with \",\" or \")\")")
		}
		if tok.kind == 'x' {
			return nil, p.fail(tok.off, "%s", tok.text)
		}
		if tok.kind == 'p' {
			switch tok.text {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			}
			if depth < 0 || depth == 0 && tok.text == "," {
				break
			}
		}
		end = tok.end
		p.next()
		if depth > maxValueDepth {
			return nil, p.fail(tok.off, "the default nests deeper than %d", maxValueDepth)
		}
	}
	if end == first.off {
		return nil, p.fail(first.off, "missing default after \"=\"")
	}
	return Opaque{Code: strings.Join(strings.Fields(p.src[first.off:end]), " ")}, nil
}

// value reads one value of type t (nil: unknown). ok is false when the
// tokens are not a value it evaluates; err is for a value it reads as
// one but cannot take (a CONSTANTS entry that is missing).
func (p *sigParser) value(t *Type, depth int) (v any, ok bool, err error) {
	if depth > maxValueDepth {
		return nil, false, nil
	}
	tok := p.next()
	switch tok.kind {
	case 'x':
		return nil, false, p.fail(tok.off, "%s", tok.text)
	case 'n':
		v, ok := number(tok.text, false, t)
		return v, ok, nil
	case 's':
		return tok.text, true, nil
	case 'p':
		switch tok.text {
		case "-":
			n := p.next()
			switch {
			case n.kind == 'n':
				v, ok := number(n.text, true, t)
				return v, ok, nil
			case n.kind == 'i' && n.text == "inf":
				return math.Inf(-1), true, nil
			}
			return nil, false, nil
		case "[", "(":
			closer := map[string]string{"[": "]", "(": ")"}[tok.text]
			out := []any{}
			for !p.is(closer) {
				x, ok, err := p.value(elemType(t, len(out)), depth+1)
				if !ok || err != nil {
					return nil, false, err
				}
				out = append(out, x)
				if !p.is(closer) {
					if c := p.next(); c.kind != 'p' || c.text != "," {
						return nil, false, nil
					}
				}
			}
			p.next()
			return out, true, nil
		case "{":
			out := map[string]any{}
			for !p.is("}") {
				k := p.next()
				if k.kind != 's' {
					return nil, false, nil
				}
				if c := p.next(); c.kind != 'p' || c.text != ":" {
					return nil, false, nil
				}
				x, ok, err := p.value(dictValueType(t), depth+1)
				if !ok || err != nil {
					return nil, false, err
				}
				out[k.text] = x
				if !p.is("}") {
					if c := p.next(); c.kind != 'p' || c.text != "," {
						return nil, false, nil
					}
				}
			}
			p.next()
			return out, true, nil
		}
	case 'i':
		switch tok.text {
		case "None":
			return nil, true, nil
		case "True", "False":
			return tok.text == "True", true, nil
		case "inf":
			return math.Inf(1), true, nil
		case "nan":
			return math.NaN(), true, nil
		case "torch.device":
			// torch.device("cuda:0"): the engine gives a device as its string.
			if !p.is("(") {
				return nil, false, nil
			}
			p.next()
			s := p.next()
			if s.kind != 's' || !p.is(")") {
				return nil, false, nil
			}
			p.next()
			return s.text, true, nil
		case "annotate":
			// annotate(TYPE, VALUE): VALUE, typed TYPE.
			if !p.is("(") {
				return nil, false, nil
			}
			p.next()
			_, typ, err := p.typeText("annotate", ",")
			if err != nil {
				return nil, false, nil
			}
			p.next()
			x, ok, err := p.value(typ, depth+1)
			if !ok || err != nil || !p.is(")") {
				return nil, false, err
			}
			p.next()
			return x, true, nil
		}
		if n, ok := strings.CutPrefix(tok.text, "CONSTANTS.c"); ok {
			k, err := strconv.Atoi(n)
			if err != nil || k < 0 || n != strconv.Itoa(k) {
				return nil, false, nil
			}
			consts, err := p.constants()
			if err != nil {
				return nil, false, p.fail(tok.off, "default %s: %v", tok.text, err)
			}
			if k >= len(consts) {
				return nil, false, p.fail(tok.off, "default %s: constants.pkl holds %d constants", tok.text, len(consts))
			}
			if o, ok := consts[k].(Opaque); ok {
				o.Code = tok.text
				return o, true, nil
			}
			return consts[k], true, nil
		}
	}
	return nil, false, nil
}

// number reads a numeric literal (negated when neg) as a value of type t:
// a float when it is written as one or t wants a float, else an int.
func number(text string, neg bool, t *Type) (any, bool) {
	if neg {
		text = "-" + text
	}
	if strings.ContainsAny(text, "xXbBoO_") {
		return nil, false
	}
	if strings.ContainsAny(text, ".eE") || wantsFloat(t) {
		f, err := strconv.ParseFloat(text, 64)
		return f, err == nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// unoptional is t without an Optional around it.
func unoptional(t *Type) *Type {
	if t != nil && t.Name == "Optional" && len(t.Elems) == 1 {
		return &t.Elems[0]
	}
	return t
}

// wantsFloat reports whether an int literal of type t is a float: t is
// float, or a Union with float and neither int nor number.
func wantsFloat(t *Type) bool {
	t = unoptional(t)
	if t == nil {
		return false
	}
	if t.Name == "float" {
		return true
	}
	if t.Name != "Union" {
		return false
	}
	var float, integer bool
	for _, e := range t.Elems {
		float = float || e.Name == "float"
		integer = integer || e.Name == "int" || e.Name == "number"
	}
	return float && !integer
}

// elemType is the type of element i of a list or tuple of type t.
func elemType(t *Type, i int) *Type {
	t = unoptional(t)
	switch {
	case t == nil:
	case t.Name == "List" && len(t.Elems) == 1:
		return &t.Elems[0]
	case t.Name == "Tuple" && i < len(t.Elems):
		return &t.Elems[i]
	}
	return nil
}

// dictValueType is the type of the values of a dict of type t.
func dictValueType(t *Type) *Type {
	t = unoptional(t)
	if t != nil && t.Name == "Dict" && len(t.Elems) == 2 {
		return &t.Elems[1]
	}
	return nil
}

// scanString reads the string literal that starts at s[i] (a quote) as
// torch.jit's printer writes one (c10::printQuotedString): the escapes
// \\ \' \" \a \b \f \n \r \t \v, \ooo (octal) and \xhh. It returns the
// value and the offset after the closing quote, or a message saying what
// is wrong (the offset is then where reading stopped).
func scanString(s string, i int) (value string, end int, msg string) {
	q := s[i]
	var b strings.Builder
	j := i + 1
	for j < len(s) {
		c := s[j]
		switch {
		case c == q:
			return b.String(), j + 1, ""
		case c == '\n':
			return "", j, "a string literal that does not end on its line"
		case c != '\\':
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(s) {
			break
		}
		e := s[j+1]
		j += 2
		switch e {
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x':
			if j+2 > len(s) {
				return "", j, `a \x escape without two hex digits`
			}
			n, err := strconv.ParseUint(s[j:j+2], 16, 8)
			if err != nil {
				return "", j, `a \x escape without two hex digits`
			}
			b.WriteByte(byte(n))
			j += 2
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && j < len(s) && s[j] >= '0' && s[j] <= '7'; k++ {
				n = n*8 + int(s[j]-'0')
				j++
			}
			if n > 0xff {
				return "", j, "an octal escape above \\377"
			}
			b.WriteByte(byte(n))
		default:
			return "", j, fmt.Sprintf("an unknown escape \\%c in a string literal", e)
		}
	}
	return "", len(s), "a string literal that does not end"
}
