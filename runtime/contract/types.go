package contract

import (
	"fmt"
	"strings"
)

// Type is a parsed TorchScript type.
//
// Name is a base type ("Tensor", "int", "float", "str", "bool", "number",
// "NoneType", "Any", a class name such as "__torch__.M") or a constructor
// ("List", "Optional", "Dict", "Tuple", "Union") whose arguments are Elems.
type Type struct {
	// Name is the base type or constructor name.
	Name string
	// Elems are the constructor's type arguments.
	Elems []Type
}

// String prints t in annotation form: "List[int]", "Optional[str]",
// "Dict[str, Tensor]", "Tuple[Tensor, int]".
func (t Type) String() string {
	if len(t.Elems) == 0 {
		if t.Name == "Tuple" {
			return "Tuple[()]"
		}
		return t.Name
	}
	parts := make([]string, len(t.Elems))
	for i, e := range t.Elems {
		parts[i] = e.String()
	}
	return t.Name + "[" + strings.Join(parts, ", ") + "]"
}

// arity is the number of type arguments of a constructor (-1: one or more,
// -2: any number).
var arity = map[string]int{"List": 1, "Optional": 1, "Dict": 2, "Tuple": -2, "Union": -1, "Future": 1, "RRef": 1, "Await": 1}

const maxTypeDepth = 64

// ParseType parses a TorchScript type in either printed form libtorch
// produces: the annotation form (Type::annotation_str, Python's str of a
// schema type) — "List[int]", "Optional[str]", "Dict[str, Tensor]",
// "Tuple[Tensor, int]", "Union[int, str]" — or the schema form
// (Type::str, FunctionSchema printing) — "int[]", "str?", "Dict(str, Tensor)",
// "(Tensor, int)", "Union(int, str)". "Scalar" is read as "number" and "None"
// as "NoneType". An alias annotation on Tensor ("Tensor(a)") is dropped.
func ParseType(s string) (Type, error) {
	p := typeParser{s: s}
	t, err := p.parse(0)
	if err != nil {
		return Type{}, fmt.Errorf("type %q: %w", s, err)
	}
	p.space()
	if p.i != len(p.s) {
		return Type{}, fmt.Errorf("type %q: unexpected %q at offset %d", s, p.s[p.i:], p.i)
	}
	return t, nil
}

type typeParser struct {
	s string
	i int
}

func (p *typeParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *typeParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *typeParser) parse(depth int) (Type, error) {
	if depth > maxTypeDepth {
		return Type{}, fmt.Errorf("nested deeper than %d", maxTypeDepth)
	}
	var t Type
	switch c := p.peek(); {
	case c == '(':
		p.i++
		elems, err := p.list(depth, ')')
		if err != nil {
			return Type{}, err
		}
		t = Type{Name: "Tuple", Elems: elems}
	case isIdentStart(c):
		start := p.i
		for p.i < len(p.s) && isIdent(p.s[p.i]) {
			p.i++
		}
		t.Name = p.s[start:p.i]
		switch t.Name {
		case "Scalar":
			t.Name = "number"
		case "None":
			t.Name = "NoneType"
		}
		if t.Name == "Tensor" && p.i < len(p.s) && p.s[p.i] == '(' {
			// An alias annotation such as Tensor(a) or Tensor(a!): not part
			// of the type.
			end := strings.IndexByte(p.s[p.i:], ')')
			if end < 0 {
				return Type{}, fmt.Errorf("unclosed alias annotation at offset %d", p.i)
			}
			p.i += end + 1
		}
		args := p.i < len(p.s) && (p.s[p.i] == '(' || (p.s[p.i] == '[' && !strings.HasPrefix(p.s[p.i:], "[]")))
		if args {
			closer := byte(']')
			if p.s[p.i] == '(' {
				closer = ')'
			}
			p.i++
			if t.Name == "Tuple" && closer == ']' && p.emptyTuple() {
				// "Tuple[()]" is the empty tuple.
			} else {
				elems, err := p.list(depth, closer)
				if err != nil {
					return Type{}, err
				}
				t.Elems = elems
			}
		}
		if err := checkArity(t); err != nil {
			return Type{}, err
		}
	case c == 0:
		return Type{}, fmt.Errorf("missing type at offset %d", p.i)
	default:
		return Type{}, fmt.Errorf("unexpected %q at offset %d", c, p.i)
	}
	// Suffixes of the schema form: T[] and T?.
	for {
		if strings.HasPrefix(p.s[p.i:], "[]") {
			p.i += 2
			t = Type{Name: "List", Elems: []Type{t}}
		} else if p.i < len(p.s) && p.s[p.i] == '?' {
			p.i++
			t = Type{Name: "Optional", Elems: []Type{t}}
		} else {
			return t, nil
		}
	}
}

// emptyTuple consumes "()]" (spaces allowed) and reports whether it was there.
func (p *typeParser) emptyTuple() bool {
	start := p.i
	for _, want := range []byte("()]") {
		if p.peek() != want {
			p.i = start
			return false
		}
		p.i++
	}
	return true
}

// list parses "T, T, ...closer" after the opening bracket.
func (p *typeParser) list(depth int, closer byte) ([]Type, error) {
	var out []Type
	if p.peek() == closer {
		p.i++
		return out, nil
	}
	for {
		t, err := p.parse(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		switch p.peek() {
		case ',':
			p.i++
		case closer:
			p.i++
			return out, nil
		default:
			return nil, fmt.Errorf("expected ',' or %q at offset %d", closer, p.i)
		}
	}
}

func checkArity(t Type) error {
	n, ok := arity[t.Name]
	switch {
	case !ok:
		if len(t.Elems) > 0 {
			return fmt.Errorf("%s takes no type arguments", t.Name)
		}
	case n == -1 && len(t.Elems) == 0:
		return fmt.Errorf("%s needs at least one type argument", t.Name)
	case n >= 0 && len(t.Elems) != n:
		return fmt.Errorf("%s takes %d type argument(s), got %d", t.Name, n, len(t.Elems))
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.' }
