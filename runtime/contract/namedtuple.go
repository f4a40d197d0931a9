package contract

import (
	"strings"
)

// namedField is one field of a NamedTuple class: its name and type.
type namedField struct {
	name string
	typ  Type
}

// namedTuples reads the NamedTuple classes of a TorchScript archive's code
// on demand: torch.jit's printer writes one as
//
//	class GoogLeNetOutputs(NamedTuple):
//	  logits : Tensor
//	  aux_logits2 : Optional[Tensor]
//
// in the code file of its module (code/__torch__/torchvision/models/googlenet.py
// for __torch__.torchvision.models.googlenet.GoogLeNetOutputs). A method's
// schema names such a class as its type; libtorch's value is a tuple.
type namedTuples struct {
	a     *scriptArchive
	files map[string]string // module → code ("" when unreadable)
}

// fields returns the fields of the NamedTuple class qualified
// ("__torch__.pkg.Outputs"), in order; ok is false when the archive
// defines no such NamedTuple or one of its fields cannot be read.
func (n *namedTuples) fields(qualified string) (fields []namedField, ok bool) {
	dot := strings.LastIndexByte(qualified, '.')
	if dot < 0 {
		return nil, false
	}
	module, class := qualified[:dot], qualified[dot+1:]
	if module != "__torch__" && !strings.HasPrefix(module, "__torch__.") || !isIdentifier(class) {
		return nil, false
	}
	code, read := n.files[module]
	if !read {
		if b, err := n.a.read("code/" + strings.ReplaceAll(module, ".", "/") + ".py"); err == nil {
			code = string(b)
		}
		if n.files == nil {
			n.files = map[string]string{}
		}
		n.files[module] = code
	}
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		if l != "class "+class+"(NamedTuple):" {
			continue
		}
		for _, f := range lines[i+1:] {
			if strings.TrimSpace(f) == "" {
				continue
			}
			if indent(f) == 0 {
				break
			}
			name, typ, ok := strings.Cut(strings.TrimSpace(f), " : ")
			if !ok || !isIdentifier(name) {
				return nil, false
			}
			t, err := ParseType(strings.TrimSpace(typ))
			if err != nil {
				return nil, false
			}
			fields = append(fields, namedField{name: name, typ: t})
		}
		return fields, true
	}
	return nil, false
}

// expand returns t with each NamedTuple class in it replaced by the Tuple
// of its fields' types (expanded too), as the engine prints a schema's
// types: the tuple is what libtorch returns, and what an artifact maps.
func (n *namedTuples) expand(t Type, depth int) Type {
	if depth > maxTypeDepth {
		return t
	}
	if len(t.Elems) == 0 && strings.HasPrefix(t.Name, "__torch__.") {
		if fs, ok := n.fields(t.Name); ok {
			out := Type{Name: "Tuple", Elems: make([]Type, len(fs))}
			for i, f := range fs {
				out.Elems[i] = n.expand(f.typ, depth+1)
			}
			return out
		}
		return t
	}
	if len(t.Elems) == 0 {
		return t
	}
	out := Type{Name: t.Name, Elems: make([]Type, len(t.Elems))}
	for i, e := range t.Elems {
		out.Elems[i] = n.expand(e, depth+1)
	}
	return out
}

// names returns the field names of the NamedTuple a return type (written
// as the archive's code declares it) is, under Optional; nil when it is
// none.
func (n *namedTuples) names(ret string) []string {
	t, err := ParseType(ret)
	if err != nil {
		return nil
	}
	for t.Name == "Optional" && len(t.Elems) == 1 {
		t = t.Elems[0]
	}
	if len(t.Elems) > 0 {
		return nil
	}
	fs, ok := n.fields(t.Name)
	if !ok {
		return nil
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return names
}

// expandText is expand on a type as written: one ParseType cannot read is
// returned as it is.
func (n *namedTuples) expandText(typ string) string {
	t, err := ParseType(typ)
	if err != nil || !strings.Contains(typ, "__torch__.") {
		return typ
	}
	return n.expand(t, 0).String()
}
