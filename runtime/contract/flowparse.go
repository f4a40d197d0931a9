package contract

import (
	"strings"
)

// This file parses serialized TorchScript code (what torch.jit.save writes
// under code/) into a small statement tree for the abstract evaluation of
// dictflow.go. It reads the subset the TorchScript printer writes:
// classes, defs, assignments, if/else, for, while, return, expression
// statements, and expressions built from names, literals, calls,
// subscripts and attributes. Anything else becomes an opaque statement or
// expression, never an error or a panic.

// ftok is one token of serialized TorchScript code.
type ftok struct {
	kind byte // 'i' identifier (dotted: torch.len), 's' string (its value), 'n' number, 'p' punctuation ( ) [ ] { } , : . =, 'o' operator or anything else
	text string
}

// logicalLine is one statement line: the tokens from a line start to the
// line end outside brackets.
type logicalLine struct {
	indent, line int // line is 1-based
	toks         []ftok
}

const opChars = "+-*/%<>=!&|^~@"

// logicalLines splits code into logical lines (a newline inside brackets
// continues the line), dropping comments and blank lines.
func logicalLines(code string) []logicalLine {
	var out []logicalLine
	var cur *logicalLine
	depth, line := 0, 1
	atStart := true
	for i := 0; i < len(code); {
		c := code[i]
		if atStart {
			n := 0
			for i+n < len(code) && code[i+n] == ' ' {
				n++
			}
			i += n
			atStart = false
			if cur == nil && i < len(code) && code[i] != '\n' && code[i] != '#' {
				cur = &logicalLine{indent: n, line: line}
			}
			continue
		}
		add := func(t ftok) {
			if cur == nil {
				cur = &logicalLine{line: line}
			}
			cur.toks = append(cur.toks, t)
		}
		switch {
		case c == '\n':
			line++
			i++
			atStart = depth == 0
			if depth == 0 && cur != nil {
				if len(cur.toks) > 0 {
					out = append(out, *cur)
				}
				cur = nil
			}
		case c == '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\\':
			i++
		case c == '"' || c == '\'':
			v, end, msg := scanString(code, i)
			if msg != "" {
				add(ftok{'o', ""})
			} else {
				add(ftok{'s', v})
			}
			i = max(end, i+1)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(code) && (code[j] == '_' || code[j] >= 'a' && code[j] <= 'z' || code[j] >= 'A' && code[j] <= 'Z' || code[j] >= '0' && code[j] <= '9' ||
				code[j] == '.' && j+1 < len(code) && (code[j+1] == '_' || code[j+1] >= 'a' && code[j+1] <= 'z' || code[j+1] >= 'A' && code[j+1] <= 'Z')) {
				j++
			}
			add(ftok{'i', code[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(code) && (code[j] == '.' || code[j] == '_' || code[j] >= 'a' && code[j] <= 'z' || code[j] >= 'A' && code[j] <= 'Z' || code[j] >= '0' && code[j] <= '9' ||
				(code[j] == '-' || code[j] == '+') && (code[j-1] == 'e' || code[j-1] == 'E')) {
				j++
			}
			add(ftok{'n', code[i:j]})
			i = j
		case strings.IndexByte("([{", c) >= 0:
			depth++
			add(ftok{'p', string(c)})
			i++
		case strings.IndexByte(")]}", c) >= 0:
			depth = max(depth-1, 0)
			add(ftok{'p', string(c)})
			i++
		case c == ',' || c == ':' || c == '.':
			add(ftok{'p', string(c)})
			i++
		case strings.IndexByte(opChars, c) >= 0:
			j := i
			for j < len(code) && strings.IndexByte(opChars, code[j]) >= 0 {
				j++
			}
			op := code[i:j]
			if op[0] == '=' && (len(op) == 1 || op[1] != '=') {
				// an assignment, or keyword=-1
				add(ftok{'p', "="})
				i++
				continue
			}
			add(ftok{'o', op})
			i = j
		default:
			add(ftok{'o', string(c)})
			i++
		}
	}
	if cur != nil && len(cur.toks) > 0 {
		out = append(out, *cur)
	}
	return out
}

// lineBlock is a logical line and the lines indented under it.
type lineBlock struct {
	ll   logicalLine
	body []*lineBlock
}

// nestLines builds the blocks of lines by indentation.
func nestLines(lines []logicalLine) []*lineBlock {
	root := &lineBlock{}
	stack := []*lineBlock{root}
	indents := []int{-1}
	for _, l := range lines {
		for len(indents) > 1 && l.indent <= indents[len(indents)-1] {
			stack, indents = stack[:len(stack)-1], indents[:len(indents)-1]
		}
		b := &lineBlock{ll: l}
		parent := stack[len(stack)-1]
		parent.body = append(parent.body, b)
		stack, indents = append(stack, b), append(indents, l.indent)
	}
	return root.body
}

// codeFile is one parsed file of an archive's code.
type codeFile struct {
	path    string
	classes map[string]*classDef
	funcs   map[string]*funcDef
}

// classDef is a class of a code file: its attributes' declared types and
// its methods.
type classDef struct {
	attrs   map[string]string
	methods map[string]*funcDef
}

// funcDef is a def: a method or a function.
type funcDef struct {
	name   string
	qual   string // Class.method or function, for messages
	params []string
	ret    string // the declared return type, its tokens joined
	body   []*stmt
	file   string
	line   int
}

// parseCodeFile parses the classes and functions of one code file.
func parseCodeFile(path, code string) *codeFile {
	f := &codeFile{path: path, classes: map[string]*classDef{}, funcs: map[string]*funcDef{}}
	for _, b := range nestLines(logicalLines(code)) {
		t := b.ll.toks
		switch {
		case len(t) >= 2 && t[0] == (ftok{'i', "class"}) && t[1].kind == 'i':
			c := &classDef{attrs: map[string]string{}, methods: map[string]*funcDef{}}
			for _, m := range b.body {
				mt := m.ll.toks
				switch {
				case len(mt) >= 3 && mt[0].kind == 'i' && mt[1] == (ftok{'p', ":"}):
					c.attrs[mt[0].text] = joinToks(mt[2:])
				case len(mt) >= 6 && mt[0] == (ftok{'i', "__annotations__"}) && mt[1] == (ftok{'p', "["}) && mt[2].kind == 's' &&
					mt[3] == (ftok{'p', "]"}) && mt[4] == (ftok{'p', "="}):
					c.attrs[mt[2].text] = joinToks(mt[5:])
				default:
					if fn := parseDef(m, path); fn != nil {
						fn.qual = t[1].text + "." + fn.name
						c.methods[fn.name] = fn
					}
				}
			}
			f.classes[t[1].text] = c
		default:
			if fn := parseDef(b, path); fn != nil {
				fn.qual = fn.name
				f.funcs[fn.name] = fn
			}
		}
	}
	return f
}

func joinToks(t []ftok) string {
	var b strings.Builder
	for _, x := range t {
		if x.kind == 's' {
			b.WriteString("\"" + x.text + "\"")
			continue
		}
		b.WriteString(x.text)
	}
	return b.String()
}

// parseDef parses "def NAME(PARAMS) -> RET:" and its body; nil when b is
// not a def.
func parseDef(b *lineBlock, path string) *funcDef {
	t := b.ll.toks
	if len(t) < 4 || t[0] != (ftok{'i', "def"}) || t[1].kind != 'i' || t[2] != (ftok{'p', "("}) {
		return nil
	}
	fn := &funcDef{name: t[1].text, file: path, line: b.ll.line}
	depth, start, i, done := 0, 3, 3, false
	for ; i < len(t) && !done; i++ {
		switch {
		case t[i].kind == 'p' && strings.Contains("([{", t[i].text):
			depth++
		case t[i].kind == 'p' && strings.Contains(")]}", t[i].text) && depth > 0:
			depth--
		case t[i] == (ftok{'p', ")"}) || t[i] == (ftok{'p', ","}) && depth == 0:
			if i > start && t[start].kind == 'i' {
				fn.params = append(fn.params, t[start].text)
			}
			start, done = i+1, t[i].text == ")"
		}
	}
	// t[i-1] is the ')' closing the parameters.
	if !done {
		return nil
	}
	i--
	if i+1 < len(t) && t[i+1] == (ftok{'o', "->"}) && t[len(t)-1] == (ftok{'p', ":"}) && i+2 <= len(t)-1 {
		fn.ret = joinToks(t[i+2 : len(t)-1])
	}
	fn.body = parseStmts(b.body, 0)
	return fn
}

// stmt is one statement.
type stmt struct {
	kind    byte // 'a' assignment, 'e' expression, 'r' return, 'i' if, 'f' for, 'w' while, 'b' break or continue, 'p' pass, 'x' not understood
	targets []string
	tuple   bool // the targets are unpacked from a tuple
	value   *expr
	loopVar string
	body    []*stmt
	orelse  []*stmt
	names   []string // 'x': the names it mentions
	line    int
}

// maxNesting bounds the statement and expression nesting parsed.
const maxNesting = 100

// parseStmts parses a block's statements.
func parseStmts(blocks []*lineBlock, depth int) []*stmt {
	var out []*stmt
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		t := b.ll.toks
		st := &stmt{line: b.ll.line}
		if depth > maxNesting {
			st.kind, st.names = 'x', names(t)
			out = append(out, st)
			continue
		}
		head := ""
		if t[0].kind == 'i' {
			head = t[0].text
		}
		switch {
		case (head == "if" || head == "while" || head == "elif") && t[len(t)-1] == (ftok{'p', ":"}):
			st.kind = 'i'
			if head == "while" {
				st.kind = 'w'
			}
			st.value = parseExpr(t[1 : len(t)-1])
			st.body = parseStmts(b.body, depth+1)
			if head != "while" && i+1 < len(blocks) {
				nt := blocks[i+1].ll.toks
				switch {
				case len(nt) == 2 && nt[0] == (ftok{'i', "else"}) && nt[1] == (ftok{'p', ":"}):
					st.orelse = parseStmts(blocks[i+1].body, depth+1)
					i++
				case nt[0] == (ftok{'i', "elif"}):
					// the elif and what follows it in its chain
					n := consumed(blocks[i+1:])
					st.orelse = parseStmts(blocks[i+1:i+1+n], depth+1)
					i += n
				}
			}
		case head == "for" && len(t) >= 5 && t[1].kind == 'i' && t[2] == (ftok{'i', "in"}) && t[len(t)-1] == (ftok{'p', ":"}):
			st.kind, st.loopVar = 'f', t[1].text
			st.value = parseExpr(t[3 : len(t)-1])
			st.body = parseStmts(b.body, depth+1)
		case head == "return":
			st.kind = 'r'
			if len(t) > 1 {
				st.value = parseExprList(t[1:])
			}
		case head == "pass" && len(t) == 1:
			st.kind = 'p'
		case (head == "break" || head == "continue") && len(t) == 1:
			st.kind = 'b'
		default:
			if !assignment(st, t) {
				if t[len(t)-1] == (ftok{'p', ":"}) {
					// with, else without if, ...: opaque, and so is its body
					st.kind, st.names = 'x', names(t)
					st.body = parseStmts(b.body, depth+1)
					break
				}
				st.kind, st.value = 'e', parseExpr(t)
			}
		}
		out = append(out, st)
	}
	return out
}

// consumed counts the blocks an elif chain starting at blocks[0] takes:
// the elif itself and the elif or else blocks that follow it.
func consumed(blocks []*lineBlock) int {
	n := 1
	for n < len(blocks) {
		t := blocks[n].ll.toks
		if t[0] == (ftok{'i', "elif"}) {
			n++
			continue
		}
		if len(t) == 2 && t[0] == (ftok{'i', "else"}) && t[1] == (ftok{'p', ":"}) {
			n++
		}
		break
	}
	return n
}

// assignment parses "a = e", "a : T = e", "a, b, = e" and "self.x = e"
// into st.
func assignment(st *stmt, t []ftok) bool {
	depth, eq := 0, -1
	for i, x := range t {
		switch {
		case x.kind == 'p' && strings.Contains("([{", x.text):
			depth++
		case x.kind == 'p' && strings.Contains(")]}", x.text):
			depth--
		case x == (ftok{'p', "="}) && depth == 0:
			eq = i
		}
		if eq >= 0 {
			break
		}
	}
	if eq <= 0 || eq == len(t)-1 {
		return false
	}
	lhs := t[:eq]
	start := 0
	for i := 0; i <= len(lhs); i++ {
		if i < len(lhs) && lhs[i] != (ftok{'p', ","}) {
			continue
		}
		if part := lhs[start:i]; len(part) > 0 {
			switch {
			case part[0].kind == 'i' && (len(part) == 1 || part[1] == (ftok{'p', ":"})) && !strings.Contains(part[0].text, "."):
				st.targets = append(st.targets, part[0].text)
			default:
				st.targets = append(st.targets, "") // self.x, d[k], ...
			}
		}
		if i < len(lhs) {
			st.tuple = true
		}
		start = i + 1
	}
	st.kind, st.value = 'a', parseExprList(t[eq+1:])
	return true
}

// parseExprList parses "a, b" as a tuple, anything else as parseExpr.
func parseExprList(t []ftok) *expr {
	depth, start := 0, 0
	var parts []*expr
	for i, x := range t {
		switch {
		case x.kind == 'p' && strings.Contains("([{", x.text):
			depth++
		case x.kind == 'p' && strings.Contains(")]}", x.text):
			depth--
		case x == (ftok{'p', ","}) && depth == 0:
			parts = append(parts, parseExpr(t[start:i]))
			start = i + 1
		}
	}
	if parts == nil {
		return parseExpr(t)
	}
	if start < len(t) {
		parts = append(parts, parseExpr(t[start:]))
	}
	return &expr{kind: 't', args: parts}
}

// names returns the identifiers among t.
func names(t []ftok) []string {
	var out []string
	for _, x := range t {
		if x.kind == 'i' {
			out = append(out, x.text)
		}
	}
	return out
}

// expr is one expression.
type expr struct {
	kind byte   // 'n' name, 's' string, 'k' None/True/False, 'i' number, 'c' call, 'x' subscript, 'a' attribute, 't' tuple, 'l' list, 'd' dict, 'o' anything else
	text string // name, string value, constant, number, attribute name
	fn   *expr  // the callee, subscripted or attribute's object
	args []*expr
	kw   []string // keyword names of args ("" positional)
	keys []*expr  // a dict's keys (args are its values)
	src  string   // the tokens, joined (for annotate's type)
}

// exprParser parses one expression from tokens.
type exprParser struct {
	t     []ftok
	pos   int
	depth int
}

// parseExpr parses tokens as one expression; what it cannot read is an
// opaque expression holding the names it mentions.
func parseExpr(t []ftok) *expr {
	p := &exprParser{t: t}
	e := p.expr()
	if p.pos != len(t) || e == nil {
		o := &expr{kind: 'o'}
		for _, n := range names(t) {
			o.args = append(o.args, &expr{kind: 'n', text: n})
		}
		return o
	}
	return e
}

func (p *exprParser) peek() ftok {
	if p.pos < len(p.t) {
		return p.t[p.pos]
	}
	return ftok{}
}

func (p *exprParser) accept(t ftok) bool {
	if p.peek() == t {
		p.pos++
		return true
	}
	return false
}

func isKeyword(s string) bool {
	switch s {
	case "and", "or", "not", "is", "in", "if", "else", "lambda":
		return true
	}
	return false
}

// expr := binary ["if" binary "else" expr]
func (p *exprParser) expr() *expr {
	if p.depth++; p.depth > maxNesting {
		return nil
	}
	defer func() { p.depth-- }()
	e := p.binary()
	if e == nil {
		return nil
	}
	if p.accept(ftok{'i', "if"}) {
		c := p.binary()
		if c == nil || !p.accept(ftok{'i', "else"}) {
			return nil
		}
		f := p.expr()
		if f == nil {
			return nil
		}
		return &expr{kind: 'o', args: []*expr{e, c, f}}
	}
	return e
}

// binary := unary (operator unary)*
func (p *exprParser) binary() *expr {
	e := p.unary()
	if e == nil {
		return nil
	}
	parts := []*expr{e}
	for {
		t := p.peek()
		if !(t.kind == 'o' && t.text != "->" || t.kind == 'i' && (t.text == "and" || t.text == "or" || t.text == "is" || t.text == "in" || t.text == "not")) {
			break
		}
		p.pos++
		if t.text == "is" || t.text == "not" {
			p.accept(ftok{'i', "not"})
			p.accept(ftok{'i', "in"})
		}
		x := p.unary()
		if x == nil {
			return nil
		}
		parts = append(parts, x)
	}
	if len(parts) == 1 {
		return e
	}
	return &expr{kind: 'o', args: parts}
}

func (p *exprParser) unary() *expr {
	if t := p.peek(); t.kind == 'o' && (t.text == "-" || t.text == "+" || t.text == "~") || t == (ftok{'i', "not"}) {
		p.pos++
		if p.depth++; p.depth > maxNesting {
			return nil
		}
		x := p.unary()
		p.depth--
		if x == nil {
			return nil
		}
		return &expr{kind: 'o', args: []*expr{x}}
	}
	return p.postfix()
}

func (p *exprParser) postfix() *expr {
	start := p.pos
	e := p.primary()
	for e != nil {
		switch {
		case p.accept(ftok{'p', "("}):
			c := &expr{kind: 'c', fn: e}
			for !p.accept(ftok{'p', ")"}) {
				kw := ""
				if t := p.peek(); t.kind == 'i' && p.pos+1 < len(p.t) && p.t[p.pos+1] == (ftok{'p', "="}) {
					kw = t.text
					p.pos += 2
				}
				a := p.expr()
				if a == nil {
					return nil
				}
				c.args, c.kw = append(c.args, a), append(c.kw, kw)
				if !p.accept(ftok{'p', ","}) && p.peek() != (ftok{'p', ")"}) {
					return nil
				}
			}
			e = c
		case p.accept(ftok{'p', "["}):
			x := &expr{kind: 'x', fn: e}
			for !p.accept(ftok{'p', "]"}) {
				if p.accept(ftok{'p', ":"}) || p.accept(ftok{'p', ","}) {
					x.kind = 'o' // a slice or a type: its parts are opaque
					continue
				}
				a := p.expr()
				if a == nil {
					return nil
				}
				x.args = append(x.args, a)
			}
			if x.kind == 'x' && len(x.args) != 1 {
				x.kind = 'o'
			}
			if x.kind == 'o' {
				x.args = append(x.args, e)
			}
			e = x
		case p.peek() == (ftok{'p', "."}) && p.pos+1 < len(p.t) && p.t[p.pos+1].kind == 'i':
			e = &expr{kind: 'a', fn: e, text: p.t[p.pos+1].text}
			p.pos += 2
		default:
			if e.src == "" {
				e.src = joinToks(p.t[start:p.pos])
			}
			return e
		}
	}
	return nil
}

func (p *exprParser) primary() *expr {
	t := p.peek()
	switch {
	case t.kind == 'i' && (t.text == "None" || t.text == "True" || t.text == "False"):
		p.pos++
		return &expr{kind: 'k', text: t.text}
	case t.kind == 'i' && !isKeyword(t.text):
		p.pos++
		return &expr{kind: 'n', text: t.text}
	case t.kind == 's':
		p.pos++
		return &expr{kind: 's', text: t.text}
	case t.kind == 'n':
		p.pos++
		return &expr{kind: 'i', text: t.text}
	case p.accept(ftok{'p', "("}):
		e := &expr{kind: 't'}
		comma := false
		for !p.accept(ftok{'p', ")"}) {
			a := p.expr()
			if a == nil {
				return nil
			}
			e.args = append(e.args, a)
			if p.accept(ftok{'p', ","}) {
				comma = true
			} else if p.peek() != (ftok{'p', ")"}) {
				return nil
			}
		}
		if len(e.args) == 1 && !comma {
			return e.args[0]
		}
		return e
	case p.accept(ftok{'p', "["}):
		e := &expr{kind: 'l'}
		for !p.accept(ftok{'p', "]"}) {
			a := p.expr()
			if a == nil {
				return nil
			}
			e.args = append(e.args, a)
			if !p.accept(ftok{'p', ","}) && p.peek() != (ftok{'p', "]"}) {
				return nil
			}
		}
		return e
	case p.accept(ftok{'p', "{"}):
		e := &expr{kind: 'd'}
		for !p.accept(ftok{'p', "}"}) {
			k := p.expr()
			if k == nil || !p.accept(ftok{'p', ":"}) {
				return nil
			}
			v := p.expr()
			if v == nil {
				return nil
			}
			e.keys, e.args = append(e.keys, k), append(e.args, v)
			if !p.accept(ftok{'p', ","}) && p.peek() != (ftok{'p', "}"}) {
				return nil
			}
		}
		return e
	}
	return nil
}
