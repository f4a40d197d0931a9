package importer

import (
	"archive/zip"
	"bytes"
	"io"
	"path"
	"strings"
)

// Limits on what ReturnKeys reads from an archive; past them it reports
// no keys rather than reading on.
const (
	// MaxCodeBytes is the largest code or data.pkl entry read.
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

// ReturnKeys reads a TorchScript archive (a zip file, as torch.jit.save and
// Module::save write it) and returns, for each method of the root module's
// class, the string keys of the dict literals ({"video": ...}) and of the
// item assignments (d["video"] = ..., serialized as torch._set_item) in its
// code, in order of first appearance. It is a heuristic: the schema says a
// method returns Dict[str, V] but not which keys, and the code, when it
// builds the dict from literal keys, does. Anything it cannot read (not a
// zip, no code, an unknown layout, entries beyond MaxCodeBytes) yields no
// keys, never an error.
func ReturnKeys(r io.ReaderAt, size int64) map[string][]ReturnKey {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil
	}
	var root string
	for _, f := range zr.File {
		if dir, name := path.Split(f.Name); name == "data.pkl" && strings.Count(dir, "/") == 1 {
			root = dir
			break
		}
	}
	if root == "" {
		return nil
	}
	pkl, ok := readEntry(zr, root+"data.pkl")
	if !ok {
		return nil
	}
	module, class, ok := rootClass(pkl)
	if !ok {
		return nil
	}
	code, ok := readEntry(zr, root+"code/"+strings.ReplaceAll(module, ".", "/")+".py")
	if !ok {
		return nil
	}
	return classReturnKeys(string(code), class)
}

// readEntry reads one zip entry of at most MaxCodeBytes.
func readEntry(zr *zip.Reader, name string) ([]byte, bool) {
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		if f.UncompressedSize64 > MaxCodeBytes {
			return nil, false
		}
		rc, err := f.Open()
		if err != nil {
			return nil, false
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, MaxCodeBytes+1))
		if err != nil || len(data) > MaxCodeBytes {
			return nil, false
		}
		return data, true
	}
	return nil, false
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
		if !isIdent(part) {
			return "", "", false
		}
	}
	if !isIdent(class) {
		return "", "", false
	}
	return module, class, true
}

func isIdent(s string) bool {
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

// classReturnKeys finds "class CLASS(" in serialized TorchScript code and
// the return keys of each method defined directly in its body.
func classReturnKeys(code, class string) map[string][]ReturnKey {
	lines := strings.Split(code, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "class "+class+"(") {
			start = i
			break
		}
	}
	if start < 0 {
		return nil
	}
	// The class body: the following lines indented deeper than "class".
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if l := lines[i]; strings.TrimSpace(l) != "" && indent(l) == 0 {
			end = i
			break
		}
	}
	out := map[string][]ReturnKey{}
	for i := start + 1; i < end; i++ {
		l := lines[i]
		trimmed := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(trimmed, "def ") {
			continue
		}
		name, _, ok := strings.Cut(trimmed[len("def "):], "(")
		if !ok || !isIdent(name) {
			continue
		}
		ind := indent(l)
		j := i + 1
		for j < end && (strings.TrimSpace(lines[j]) == "" || indent(lines[j]) > ind) {
			j++
		}
		if keys := methodReturnKeys(strings.Join(lines[i:j], "\n")); len(keys) > 0 {
			out[name] = keys
		}
		i = j - 1
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// token is one lexical token of TorchScript code: a string literal (its
// value), an identifier or one punctuation character.
type token struct {
	kind byte // 's' string, 'i' identifier, 'p' punctuation
	text string
}

// lex splits code into tokens; numbers and other characters are dropped
// except the punctuation the key scanner needs.
func lex(code string) []token {
	var toks []token
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for j < len(code) && code[j] != c && code[j] != '\n' {
				if code[j] == '\\' && j+1 < len(code) {
					j++
					switch code[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'r':
						b.WriteByte('\r')
					default:
						b.WriteByte(code[j])
					}
				} else {
					b.WriteByte(code[j])
				}
				j++
			}
			toks = append(toks, token{'s', b.String()})
			i = j + 1
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
		case c == '#':
			for i < len(code) && code[i] != '\n' {
				i++
			}
		default:
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
	toks := lex(method)
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
	keys := make([]ReturnKey, len(order))
	for i, k := range order {
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
