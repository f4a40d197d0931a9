package emit

import (
	"fmt"
	"reflect"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"
)

// spec emits Spec (the family's spec as a Go literal), the package
// variables built from it — the enum tables and the tasks (client.Task:
// the compiled field rules, bound to the params and result types) the
// methods apply — and the init function that registers the spec.
func (g *goFile) spec() error {
	lit, err := g.lit.expr(reflect.ValueOf(*g.fam.Spec), 0)
	if err != nil {
		return fmt.Errorf("%s: spec literal: %w", g.fam.File.Path, err)
	}
	g.add(docComment("Spec returns the family's inference spec exactly as the manifest gives it (with the manifest format's defaults applied). Every call returns a new copy that the caller may change."),
		jen.Func().Id("Spec").Params().Op("*").Qual(ir.SpecPath, "ModelInferenceSpec").Block(jen.Return(jen.Op("&").Add(lit))))

	vars := []jen.Code{
		jen.Id("family").Op("=").Id("Spec").Call(),
		jen.Id("variants").Op("=").Qual(ir.EnumPath, "Variants").Types(jen.Id("Variant")).Call(jen.Id("family")),
		jen.Id("tasks").Op("=").Qual(ir.EnumPath, "Tasks").Types(jen.Id("Task")).Call(jen.Id("family")),
	}
	for _, t := range g.fam.Tasks {
		vars = append(vars, jen.Id(t.Var).Op("=").Qual(ir.ClientPath, "NewTask").Types(jen.Id(t.Params), jen.Id(t.Result)).Call(jen.Id("family"), jen.Lit(t.Index), jen.Id(t.Defaults)))
		for _, f := range t.Fields {
			if f.Choice != nil {
				field := jen.Op("&").Id("family").Dot("Tasks").Index(jen.Lit(t.Index)).Dot("Inputs").Index(jen.Lit(f.Index))
				vars = append(vars, jen.Id(f.Choice.Set).Op("=").Qual(ir.EnumPath, "Choices").Types(jen.Id(f.Choice.Type)).Call(field))
			}
		}
	}
	g.add(docComment("The family's spec, and the enum tables and tasks built from it that the methods below apply."), jen.Var().Defs(vars...))
	g.add("", jen.Func().Id("init").Params().Add(
		short(jen.Qual(ir.SpecPath, "DefaultRegistry").Dot("MustRegister").Call(jen.Id("Spec").Call()))))
	return nil
}
