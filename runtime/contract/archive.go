package contract

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// Limits on what ReadReturns, ReadSignatures and ReadCallSpec read from an
// archive; past them ReadReturns reports nothing, the others an error.
const (
	// MaxCodeBytes is the largest archive entry read: code, constants.pkl,
	// a package's metadata.
	MaxCodeBytes = 8 << 20
	// MaxReturnKeys is the most keys kept for one method.
	MaxReturnKeys = 64
)

// ReturnKey is a string key the dict a method returns was seen to hold.
type ReturnKey struct {
	// Name is the key.
	Name string
	// Always is true when every dict literal with string keys in the
	// method's code holds the key, so the method most likely always
	// returns it.
	Always bool
}

// MethodReturns is what a method's TorchScript code tells about the dict it
// returns.
type MethodReturns struct {
	// Keys are the string keys of the dict literals ({"video": ...}) and of
	// the item assignments (d["video"] = ..., serialized as
	// torch._set_item) in the method's code, in order of first appearance.
	Keys []ReturnKey
	// Complete says the returned dict can hold no key outside Keys: every
	// return statement returns a dict literal whose keys are all string
	// literals, or a local variable that is only ever assigned such
	// literals (or another such variable), only given items with literal
	// keys, and never passed to a call. When false (a helper method built
	// the dict, a key is computed, the dict is updated from another one)
	// the code does not show every key.
	Complete bool
	// ArgumentKeys are, by argument name, the literal keys the method's
	// own code reads from a Dict[str, Tensor] argument when such reads are
	// its only uses (features["a"]; DictKeys.Arguments): the keys a
	// tensor_dict field must declare, required.
	ArgumentKeys map[string][]string
}

// ReadReturns reads a TorchScript archive (a zip file, as torch.jit.save
// and Module::save write it) and returns, for each method of the root
// module's class whose code has dict keys or returns a complete dict, what
// its code tells about the dict it returns. The schema says a method
// returns Dict[str, V] but not which keys; the code, when it builds the
// dict from literal keys, does. Anything it cannot read (not a zip, no
// code, an unknown layout, entries beyond MaxCodeBytes) yields nothing,
// never an error.
func ReadReturns(r io.ReaderAt, size int64) map[string]MethodReturns {
	a, err := openArchive(r, size)
	if err != nil {
		return nil
	}
	return classReturns(a.code, a.class)
}

// ReturnKeys is ReadReturns without the completeness: for each method with
// keys, its keys.
func ReturnKeys(r io.ReaderAt, size int64) map[string][]ReturnKey {
	var out map[string][]ReturnKey
	for m, ret := range ReadReturns(r, size) {
		if len(ret.Keys) == 0 {
			continue
		}
		if out == nil {
			out = map[string][]ReturnKey{}
		}
		out[m] = ret.Keys
	}
	return out
}

// scriptArchive is a TorchScript archive opened for reading its root module's
// code.
type scriptArchive struct {
	zr *zip.Reader
	// dir is the archive's folder, with a trailing slash ("m/").
	dir string
	// module and class name the root module's class: "__torch__.pkg" and
	// "Net" for __torch__.pkg.Net.
	module, class string
	// code is the text of the file that defines the class
	// (<folder>/code/__torch__/pkg.py for __torch__.pkg.Net).
	code string
}

// openArchive opens a TorchScript archive: the <folder>/data.pkl entry, the
// root object's class from its first opcode, and the code file that
// defines the class (<folder>/code/__torch__/pkg.py for __torch__.pkg.Net,
// <folder>/code/__torch__.py for __torch__.Net), read up to MaxCodeBytes.
func openArchive(r io.ReaderAt, size int64) (*scriptArchive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a TorchScript archive (a zip file): %w", err)
	}
	a := &scriptArchive{zr: zr}
	for _, f := range zr.File {
		if dir, name := path.Split(f.Name); name == "data.pkl" && strings.Count(dir, "/") == 1 {
			a.dir = dir
			break
		}
	}
	if a.dir == "" {
		return nil, errors.New("not a TorchScript archive: no <folder>/data.pkl entry")
	}
	// The root object's class is the first opcode's operand.
	pkl, err := a.readPrefix("data.pkl", 4096)
	if err != nil {
		return nil, err
	}
	module, class, ok := rootClass(pkl)
	if !ok {
		return nil, fmt.Errorf("%sdata.pkl does not start with a TorchScript module class (__torch__...): not an archive torch.jit.save or Module::save wrote", a.dir)
	}
	a.module, a.class = module, class
	code, err := a.read("code/" + strings.ReplaceAll(module, ".", "/") + ".py")
	if err != nil {
		return nil, fmt.Errorf("the code of class %s.%s: %w", module, class, err)
	}
	a.code = string(code)
	return a, nil
}

// entry returns the archive's entry name (relative to its folder).
func (a *scriptArchive) entry(name string) (*zip.File, error) {
	full := a.dir + name
	for _, f := range a.zr.File {
		if f.Name == full {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no entry %s", full)
}

// read reads the archive's entry name (relative to its folder) whole
// (readEntry).
func (a *scriptArchive) read(name string) ([]byte, error) {
	f, err := a.entry(name)
	if err != nil {
		return nil, err
	}
	return readEntry(f)
}

// readEntry reads one zip entry whole; one beyond MaxCodeBytes is an
// error, whatever its header claims.
func readEntry(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > MaxCodeBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d this reader reads", f.Name, f.UncompressedSize64, MaxCodeBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxCodeBytes+1))
	if errors.Is(err, zip.ErrFormat) {
		// archive/zip stops reading past the size the header gives.
		return nil, fmt.Errorf("%s: corrupt, or holds more than the %d bytes its header says: %w", f.Name, f.UncompressedSize64, err)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	if len(data) > MaxCodeBytes {
		return nil, fmt.Errorf("%s: more than the %d bytes this reader reads", f.Name, MaxCodeBytes)
	}
	return data, nil
}

// readPrefix reads up to n bytes from the start of the entry name.
func (a *scriptArchive) readPrefix(name string, n int64) ([]byte, error) {
	f, err := a.entry(name)
	if err != nil {
		return nil, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, n))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return data, nil
}

// rootClass reads the class of the pickled root object from the start of
// data.pkl: protocol 2 ("\x80\x02") followed by a GLOBAL opcode
// ("c__torch__\nM\n") naming the module and class.
func rootClass(pkl []byte) (module, class string, ok bool) {
	if len(pkl) < 3 || pkl[0] != 0x80 || pkl[2] != 'c' {
		return "", "", false
	}
	rest := pkl[3:]
	i := bytes.IndexByte(rest, '\n')
	if i < 0 {
		return "", "", false
	}
	module, rest = string(rest[:i]), rest[i+1:]
	j := bytes.IndexByte(rest, '\n')
	if j < 0 {
		return "", "", false
	}
	class = string(rest[:j])
	if module != "__torch__" && !strings.HasPrefix(module, "__torch__.") {
		return "", "", false
	}
	for _, part := range strings.Split(module, ".") {
		if !isIdentifier(part) {
			return "", "", false
		}
	}
	if !isIdentifier(class) {
		return "", "", false
	}
	return module, class, true
}

// isIdentifier reports whether s is a Python identifier (ASCII).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// classMethod is one method defined directly in a class's body.
type classMethod struct {
	name string
	// line is the 0-based line of its "def", col the 0-based column of the
	// "d".
	line, col int
	// text is the method's code, from "def" to the end of its body (its
	// first line without the indentation).
	text string
}

// classMethods finds "class CLASS(" in serialized TorchScript code and
// returns the methods defined directly in its body, in order, and the
// names of the body's hook functions (__forward_pre_hooks__ and
// __forward_hooks__ list them; they are defined like methods but are not
// methods of the module). found is false when no line starts the class.
func classMethods(code, class string) (methods []classMethod, hooks map[string]bool, found bool) {
	lines := strings.Split(code, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "class "+class+"(") {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, nil, false
	}
	// The class body: the following lines indented deeper than "class".
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if l := lines[i]; strings.TrimSpace(l) != "" && indent(l) == 0 {
			end = i
			break
		}
	}
	for i := start + 1; i < end; i++ {
		l := lines[i]
		trimmed := strings.TrimLeft(l, " ")
		if strings.HasPrefix(trimmed, "__forward_pre_hooks__ ") || strings.HasPrefix(trimmed, "__forward_hooks__ ") {
			for _, t := range lex(trimmed, false) {
				if t.kind == 's' {
					if hooks == nil {
						hooks = map[string]bool{}
					}
					hooks[t.text] = true
				}
			}
			continue
		}
		if !strings.HasPrefix(trimmed, "def ") {
			continue
		}
		name, _, ok := strings.Cut(trimmed[len("def "):], "(")
		if !ok || !isIdentifier(name) {
			continue
		}
		ind := indent(l)
		j := i + 1
		for j < end && (strings.TrimSpace(lines[j]) == "" || indent(lines[j]) > ind) {
			j++
		}
		methods = append(methods, classMethod{name: name, line: i, col: ind, text: strings.Join(append([]string{trimmed}, lines[i+1:j]...), "\n")})
		i = j - 1
	}
	return methods, hooks, true
}

// classReturns returns what the code of each method of class tells about
// its returned dict (see classMethods), for the methods whose code shows
// something.
func classReturns(code, class string) map[string]MethodReturns {
	methods, _, _ := classMethods(code, class)
	out := map[string]MethodReturns{}
	for _, m := range methods {
		ret := methodReturns(m.text)
		ret.ArgumentKeys = argumentKeys(m.text)
		if len(ret.Keys) > 0 || ret.Complete || ret.ArgumentKeys != nil {
			out[m.name] = ret
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// token is one lexical token of TorchScript code: a string literal (its
// value), an identifier, one punctuation character or a line end.
type token struct {
	kind byte // 's' string, 'i' identifier, 'p' punctuation, 'n' line end, 'o' other
	text string
}

// lex splits code into tokens: string literals, identifiers, the
// punctuation "{}()[],:" and "=" (an assignment, not part of ==, <=, >=,
// !=). A number or any other operator is an 'o' token; line ends are 'n'
// tokens when lines is true and dropped otherwise.
func lex(code string, lines bool) []token {
	var toks []token
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case c == '"' || c == '\'':
			v, end, msg := scanString(code, i)
			if msg != "" {
				toks = append(toks, token{'o', ""}) // not a literal the printer writes
			} else {
				toks = append(toks, token{'s', v})
			}
			i = max(end, i+1)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(code) && (code[j] == '_' || code[j] == '.' || code[j] >= 'a' && code[j] <= 'z' || code[j] >= 'A' && code[j] <= 'Z' || code[j] >= '0' && code[j] <= '9') {
				j++
			}
			toks = append(toks, token{'i', code[i:j]})
			i = j
		case strings.IndexByte("{}()[],:", c) >= 0:
			toks = append(toks, token{'p', string(c)})
			i++
		case c == '=' && !(i+1 < len(code) && code[i+1] == '=') && !(i > 0 && strings.IndexByte("=<>!", code[i-1]) >= 0):
			toks = append(toks, token{'p', "="})
			i++
		case c == '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		case c == '\n':
			if lines {
				toks = append(toks, token{'n', ""})
			}
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		default:
			if n := len(toks); n == 0 || toks[n-1].kind != 'o' {
				toks = append(toks, token{'o', ""})
			}
			i++
		}
	}
	return toks
}

// methodReturnKeys scans one method (its "def" line to the end of its
// body) for the string keys of statement-level dict literals and of
// torch._set_item calls, skipping the signature (defaults may be dicts
// too). A key is Always when every such literal holds it.
func methodReturnKeys(method string) []ReturnKey {
	toks := lex(method, false)
	// Skip the signature: up to the ':' at bracket depth 0 after "def".
	depth, body := 0, len(toks)
	for i, t := range toks {
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case ":":
			if depth == 0 {
				body = i + 1
			}
		}
		if body < len(toks) {
			break
		}
	}
	toks = toks[min(body, len(toks)):]

	type literal struct{ keys []string }
	var (
		order   []string
		seen    = map[string]bool{}
		stack   []*literal // one entry per open bracket; nil for ( and [
		dicts   []*literal
		setItem = map[string]bool{}
	)
	add := func(k string) {
		if !seen[k] && len(order) < MaxReturnKeys {
			seen[k] = true
			order = append(order, k)
		}
	}
	for i, t := range toks {
		switch {
		case t.kind == 'p' && (t.text == "(" || t.text == "["):
			stack = append(stack, nil)
		case t.kind == 'p' && t.text == "{":
			stack = append(stack, &literal{})
		case t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}"):
			if n := len(stack); n > 0 {
				if l := stack[n-1]; l != nil && len(l.keys) > 0 {
					dicts = append(dicts, l)
				}
				stack = stack[:n-1]
			}
		case t.kind == 's':
			// {"k": ... or , "k": ... directly inside a dict literal that is
			// not nested in another expression (a returned dict is built
			// at statement level in serialized code).
			if n := len(stack); n == 1 && stack[0] != nil && i > 0 && i+1 < len(toks) &&
				toks[i+1] == (token{'p', ":"}) && (toks[i-1] == (token{'p', "{"}) || toks[i-1] == (token{'p', ","})) {
				stack[0].keys = append(stack[0].keys, t.text)
				add(t.text)
			}
		case t.kind == 'i' && strings.HasSuffix(t.text, "_set_item"):
			// torch._set_item(d, "k", v)
			if i+4 < len(toks) && toks[i+1] == (token{'p', "("}) && toks[i+2].kind == 'i' &&
				toks[i+3] == (token{'p', ","}) && toks[i+4].kind == 's' {
				setItem[toks[i+4].text] = true
				add(toks[i+4].text)
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	everyPath := setOnEveryPath(method)
	keys := make([]ReturnKey, len(order))
	for i, k := range order {
		if setItem[k] && everyPath[k] && len(dicts) == 0 {
			// Set at the body's top level, before its one return: every
			// path holds it (a segmentation model's "out").
			keys[i] = ReturnKey{Name: k, Always: true}
			continue
		}
		always := len(dicts) > 0 && !setItem[k]
		for _, d := range dicts {
			found := false
			for _, x := range d.keys {
				found = found || x == k
			}
			always = always && found
		}
		keys[i] = ReturnKey{Name: k, Always: always}
	}
	return keys
}

// methodReturns scans one method for its return keys (methodReturnKeys) and
// decides whether they are complete: see MethodReturns.Complete. The scan
// reads the serialized code statement by statement and tracks, for every
// local name, the literal keys it can be given. Names joined by an
// assignment (a = b) share one set, so that an item given through either
// counts for both. Any other use of a name that could add keys (a call
// argument, an assignment from anything but a dict literal or a name, an
// item with a computed key) makes its set unknown.
func methodReturns(method string) MethodReturns {
	ret := MethodReturns{Keys: methodReturnKeys(method)}
	keys, ok := returnedKeys(method)
	if !ok || len(keys) > MaxReturnKeys {
		return ret
	}
	have := map[string]bool{}
	for _, k := range ret.Keys {
		have[k.Name] = true
	}
	for _, k := range keys {
		if !have[k] {
			if len(ret.Keys) == MaxReturnKeys {
				return ret
			}
			have[k] = true
			ret.Keys = append(ret.Keys, ReturnKey{Name: k})
		}
	}
	ret.Complete = true
	return ret
}

// localDict is what is known of the dicts a group of local names can hold.
type localDict struct {
	keys     []string
	assigned bool // some statement assigns a dict to a name of the group
	unknown  bool // a key may come from elsewhere
}

// returnedKeys returns every key the method's returned dict can hold, and
// false when the code does not show them all.
func returnedKeys(method string) ([]string, bool) {
	stmts := statements(lex(method, true))
	if len(stmts) == 0 {
		return nil, false
	}
	// Union-find over local names joined by "a = b".
	parent := map[string]string{}
	var find func(string) string
	find = func(n string) string {
		p, ok := parent[n]
		if !ok || p == n {
			parent[n] = n
			return n
		}
		r := find(p)
		parent[n] = r
		return r
	}
	isName := func(t token) bool { return t.kind == 'i' && !strings.Contains(t.text, ".") }
	for _, st := range stmts {
		if len(st) == 3 && isName(st[0]) && st[1] == (token{'p', "="}) && isName(st[2]) {
			parent[find(st[0].text)] = find(st[2].text)
		}
	}
	dicts := map[string]*localDict{}
	dict := func(n string) *localDict {
		r := find(n)
		if dicts[r] == nil {
			dicts[r] = &localDict{}
		}
		return dicts[r]
	}
	var returned []string // names returned
	var literal []string  // keys of returned dict literals
	returns, complete := 0, true
	for _, st := range stmts {
		// uses are the tokens whose names escape unless the statement's
		// form says otherwise.
		uses := st
		switch {
		case st[0] == (token{'i', "return"}):
			returns++
			switch rest := st[1:]; {
			case len(rest) == 1 && isName(rest[0]):
				returned = append(returned, rest[0].text)
				uses = nil
			default:
				if ks, ok := dictValue(rest); ok {
					literal = append(literal, ks...)
				} else {
					complete = false
				}
				uses = rest
			}
		case len(st) >= 3 && isName(st[0]) && st[1] == (token{'p', "="}):
			d := dict(st[0].text)
			rhs := st[2:]
			switch ks, ok := dictValue(rhs); {
			case len(rhs) == 1 && isName(rhs[0]):
				uses = nil // an alias: the names share a set
			case ok:
				d.assigned = true
				d.keys = append(d.keys, ks...)
				uses = rhs
			default:
				d.unknown = true
				uses = rhs
			}
		case len(st) >= 6 && st[0].kind == 'i' && strings.HasSuffix(st[0].text, "_set_item") && st[1] == (token{'p', "("}) &&
			isName(st[2]) && st[3] == (token{'p', ","}):
			d := dict(st[2].text)
			if st[4].kind == 's' && st[5] == (token{'p', ","}) {
				d.keys = append(d.keys, st[4].text)
			} else {
				d.unknown = true
			}
			uses = st[4:]
		}
		// Every other name in the statement may be given keys there (a
		// call argument, a loop target, ...), unless it only has an item
		// read (d["k"]).
		for i, t := range uses {
			if t.kind != 'i' {
				continue
			}
			name, _, dotted := strings.Cut(t.text, ".")
			if !dotted && i+1 < len(uses) && uses[i+1] == (token{'p', "["}) {
				continue
			}
			dict(name).unknown = true
		}
	}
	if !complete || returns == 0 {
		return nil, false
	}
	keys := literal
	for _, n := range returned {
		d := dict(n)
		if d.unknown || !d.assigned {
			return nil, false
		}
		keys = append(keys, d.keys...)
	}
	slices.Sort(keys)
	return slices.Compact(keys), true
}

// dictValue reads toks as a dict literal whose keys are all string
// literals ({"a": x, "b": y}, or {}), or such a literal wrapped in
// annotate(T, ...), and returns its keys.
func dictValue(toks []token) ([]string, bool) {
	isOpen := func(t token) bool { return t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{") }
	isClose := func(t token) bool { return t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}") }
	if len(toks) >= 4 && toks[0] == (token{'i', "annotate"}) && toks[1] == (token{'p', "("}) && toks[len(toks)-1] == (token{'p', ")"}) {
		// annotate(TYPE, VALUE): VALUE follows the ',' at depth 0 inside.
		inner := toks[2 : len(toks)-1]
		depth := 0
		for i, t := range inner {
			switch {
			case isOpen(t):
				depth++
			case isClose(t):
				depth--
			case t == (token{'p', ","}) && depth == 0:
				return dictValue(inner[i+1:])
			}
		}
		return nil, false
	}
	if len(toks) < 2 || toks[0] != (token{'p', "{"}) || toks[len(toks)-1] != (token{'p', "}"}) {
		return nil, false
	}
	const (
		wantKey = iota
		wantColon
		inValue
	)
	var keys []string
	state, depth := wantKey, 0
	for _, t := range toks[1 : len(toks)-1] {
		if depth > 0 || isOpen(t) || isClose(t) {
			if state != inValue {
				return nil, false
			}
			switch {
			case isOpen(t):
				depth++
			case isClose(t):
				if depth--; depth < 0 {
					return nil, false // the first '}' closes: not one literal
				}
			}
			continue
		}
		switch {
		case state == wantKey && t.kind == 's':
			keys = append(keys, t.text)
			state = wantColon
		case state == wantColon && t == (token{'p', ":"}):
			state = inValue
		case state == inValue && t == (token{'p', ","}):
			state = wantKey
		case state != inValue:
			return nil, false
		}
	}
	if depth != 0 || state == wantColon {
		return nil, false
	}
	return keys, true
}

// statements skips a method's signature (up to the ':' at bracket depth 0
// after "def") and splits the rest of toks at line ends outside brackets,
// dropping empty statements.
func statements(toks []token) [][]token {
	depth, body := 0, -1
	for i, t := range toks {
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case ":":
			if depth == 0 {
				body = i + 1
			}
		}
		if body >= 0 {
			break
		}
	}
	if body < 0 {
		return nil
	}
	var out [][]token
	var cur []token
	depth = 0
	for _, t := range toks[body:] {
		switch {
		case t.kind == 'n' && depth == 0:
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		case t.kind == 'n':
			continue
		case t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{"):
			depth++
		case t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}"):
			depth = max(depth-1, 0)
		}
		cur = append(cur, t)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// setOnEveryPath returns the keys that a method's code sets with a
// torch._set_item statement at its body's top indentation, when the body's
// only return is its last statement, at that indentation: every path
// through the method sets them. Anything else (a return in a branch, a set
// inside an if) gives no key.
func setOnEveryPath(method string) map[string]bool {
	lines := strings.Split(method, "\n")
	// The body starts after the signature: the first line ending with ':'
	// from the def on.
	start := -1
	for i, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), ":") {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }
	base, last := -1, -1
	for i := start; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			continue
		}
		if base < 0 {
			base = indent(lines[i])
		}
		last = i
	}
	if base < 0 {
		return nil
	}
	for i := start; i <= last; i++ {
		t := strings.TrimSpace(lines[i])
		if (t == "return" || strings.HasPrefix(t, "return ")) && (i != last || indent(lines[i]) != base) {
			return nil // a return before the end, or in a branch
		}
	}
	if t := strings.TrimSpace(lines[last]); t != "return" && !strings.HasPrefix(t, "return ") {
		return nil
	}
	out := map[string]bool{}
	for i := start; i < last; i++ {
		if indent(lines[i]) != base {
			continue
		}
		toks := lex(lines[i], false)
		for j := 0; j+4 < len(toks); j++ {
			if toks[j].kind == 'i' && strings.HasSuffix(toks[j].text, "_set_item") && toks[j+1] == (token{'p', "("}) &&
				toks[j+2].kind == 'i' && toks[j+3] == (token{'p', ","}) && toks[j+4].kind == 's' {
				out[toks[j+4].text] = true
			}
		}
	}
	return out
}
