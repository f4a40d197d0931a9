package emit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"
)

// enumConst is one constant of an enum type.
type enumConst struct {
	name, value, doc string
}

// enumDecl is a string type whose methods apply a runtime/enum table.
type enumDecl struct {
	typ, what, doc string
	consts         []enumConst
	set            string // the table's package variable
	// ids: the variant and task types, which also have a list function
	// (plural), Parse<typ> and Default<typ>.
	ids          bool
	plural       string
	defaultConst string
}

// enum emits the type, its constants and its one-line methods.
func (g *goFile) enum(e enumDecl) {
	typ, set := e.typ, jen.Id(e.set)
	g.add(docComment(e.doc), jen.Type().Id(typ).String())
	if len(e.consts) > 0 {
		defs := make([]jen.Code, len(e.consts))
		for i, c := range e.consts {
			defs[i] = jen.Comment(c.doc).Line().Id(c.name).Id(typ).Op("=").Lit(c.value)
		}
		g.add(docComment(fmt.Sprintf("The %ss of %s, in manifest order.", e.what, typ)), jen.Const().Defs(defs...))
	}
	recv := jen.Id("v").Id(typ)
	if e.ids {
		g.add(docComment(fmt.Sprintf("Default%s is the %s used when none is named.", typ, e.what)),
			jen.Const().Id("Default"+typ).Op("=").Id(e.defaultConst))
		g.add(docComment(fmt.Sprintf("%s returns every %s in manifest order.", e.plural, e.what)),
			jen.Func().Id(e.plural).Params().Index().Id(typ).Add(short(jen.Return(set.Clone().Dot("Values").Call()))))
		g.add(docComment(fmt.Sprintf("Parse%s returns the %s with id or alias s; \"\" selects Default%s. An unknown id is an error wrapping spec.ErrUnknownID that names the known ids.", typ, e.what, typ)),
			jen.Func().Id("Parse"+typ).Params(jen.Id("s").String()).Params(jen.Id(typ), jen.Error()).Add(short(jen.Return(set.Clone().Dot("Parse").Call(jen.Id("s"))))))
	}
	g.add(docComment(fmt.Sprintf("Valid reports whether v is one of the %ss of %s.", e.what, typ)),
		jen.Func().Params(recv).Id("Valid").Params().Bool().Add(short(jen.Return(set.Clone().Dot("Valid").Call(jen.Id("v"))))))
	g.add(docComment(fmt.Sprintf("String returns the %s.", map[bool]string{true: e.what + " id", false: "value"}[e.ids])),
		jen.Func().Params(recv).Id("String").Params().String().Add(short(jen.Return(jen.String().Call(jen.Id("v"))))))
	g.add(docComment(fmt.Sprintf("MarshalText returns the %s; a value that is not one of the %ss is an error.", map[bool]string{true: e.what + " id", false: "value"}[e.ids], e.what)),
		jen.Func().Params(recv).Id("MarshalText").Params().Params(jen.Index().Byte(), jen.Error()).Add(short(jen.Return(set.Clone().Dot("MarshalText").Call(jen.Id("v"))))))
	doc := "UnmarshalText sets v from one of the allowed values; any other value is an error."
	if e.ids {
		doc = fmt.Sprintf("UnmarshalText sets v from an id or alias, as Parse%s does; unknown ids are an error.", typ)
	}
	g.add(docComment(doc),
		jen.Func().Params(jen.Id("v").Op("*").Id(typ)).Id("UnmarshalText").Params(jen.Id("b").Index().Byte()).Error().Add(short(jen.Return(set.Clone().Dot("UnmarshalText").Call(jen.Id("v"), jen.Id("b"))))))
}

func (g *goFile) variantEnum() {
	var consts []enumConst
	for _, v := range g.fam.Variants {
		doc := fmt.Sprintf("%s is variant %q", v.Const, v.Spec.VariantID)
		if l := ir.OneLine(v.Spec.Label); l != "" {
			doc += " (" + l + ")"
		}
		doc += ", status " + strconv.Quote(v.Spec.Status) + "."
		if len(v.Spec.Aliases) > 0 {
			doc += " Aliases: " + strings.Join(quoteAll(v.Spec.Aliases), ", ") + "."
		}
		consts = append(consts, enumConst{name: v.Const, value: v.Spec.VariantID, doc: docComment(doc, deprecated(v.Spec.Deprecated))})
	}
	g.enum(enumDecl{
		typ: "Variant", what: "variant", plural: "Variants", ids: true, set: "variants",
		doc:          "Variant is a variant of the family: a concrete checkpoint and its runtime settings.",
		consts:       consts,
		defaultConst: g.fam.DefaultVariant.Const,
	})
}

func (g *goFile) taskEnum() {
	var consts []enumConst
	for _, t := range g.fam.Tasks {
		doc := fmt.Sprintf("%s is task %q", t.Const, t.Spec.TaskID)
		if l := ir.OneLine(t.Spec.Label); l != "" {
			doc += " (" + l + ")"
		}
		doc += "."
		if len(t.Spec.Aliases) > 0 {
			doc += " Aliases: " + strings.Join(quoteAll(t.Spec.Aliases), ", ") + "."
		}
		consts = append(consts, enumConst{name: t.Const, value: t.Spec.TaskID, doc: docComment(doc, deprecated(t.Spec.Deprecated))})
	}
	g.enum(enumDecl{
		typ: "Task", what: "task", plural: "Tasks", ids: true, set: "tasks",
		doc:          "Task is a task of the family: one runnable profile with typed inputs and outputs.",
		consts:       consts,
		defaultConst: g.fam.DefaultTask.Const,
	})
}

// choice emits the string type of a field with choices.
func (g *goFile) choice(t *ir.Task, f *ir.Field) {
	e := f.Choice
	var consts []enumConst
	if e.Consts {
		for _, v := range e.Values {
			consts = append(consts, enumConst{name: v.Const, value: v.Value, doc: docComment(fmt.Sprintf("%s is the choice %q.", v.Const, v.Value))})
		}
	}
	doc := fmt.Sprintf("%s holds the allowed values of field %q of task %q.", e.Type, f.Spec.FieldID, t.Spec.TaskID)
	if !e.Consts {
		doc += fmt.Sprintf(" It has %d values, too many for a constant each (more than %d): they are in the task's spec.", len(e.Values), ir.MaxChoiceConsts)
	}
	g.enum(enumDecl{typ: e.Type, what: "value", doc: doc, consts: consts, set: e.Set})
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}
