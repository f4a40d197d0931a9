package emit

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// task emits everything of one task: choice types, params, defaults,
// Validate, kwargs, JSON decoding, the result type and the client methods.
func (g *goFile) task(t *ir.Task) error {
	for _, f := range t.Fields {
		if f.Choice != nil {
			g.choice(t, f)
		}
	}
	if err := g.params(t); err != nil {
		return err
	}
	g.pictures(t)
	g.validate(t)
	g.kwargs(t, spec.TargetCallKwargs, "CallKwargs")
	g.kwargs(t, spec.TargetLoadKwargs, "LoadKwargs")
	if t.Batch != "" {
		g.batchItem(t)
	}
	g.unmarshal(t)
	g.result(t)
	g.taskMethods(t)
	return nil
}

func fieldDoc(f *ir.Field) string {
	fs := f.Spec
	first := fmt.Sprintf("%s is field %q", f.Name, fs.FieldID)
	if l := ir.OneLine(fs.Label); l != "" {
		first += " (" + l + ")"
	}
	first += "."
	facts := []string{"Kind " + string(fs.Kind)}
	if fs.Target == spec.TargetLoadKwargs {
		facts = append(facts, "passed when the model is loaded")
	}
	switch f.Presence {
	case spec.Required:
		facts = append(facts, "required")
	case spec.Optional:
		facts = append(facts, "optional: nil leaves it to the model")
	}
	if d := f.DefaultText(); d != "" {
		facts = append(facts, "default "+d)
	}
	facts = append(facts, f.Constraints()...)
	return docComment(first, fs.Description, strings.Join(facts, "; ")+".", deprecated(fs.Deprecated))
}

func (g *goFile) params(t *ir.Task) error {
	ts := t.Spec
	fields := make([]jen.Code, 0, len(t.Fields))
	for _, f := range t.Fields {
		fields = append(fields, jen.Comment(fieldDoc(f)).Line().Id(f.Name).Add(typeOf(f.Type)).Tag(map[string]string{"json": f.Spec.FieldID}))
	}
	first := fmt.Sprintf("%s are the inputs of task %q", t.Params, ts.TaskID)
	if l := ir.OneLine(ts.Label); l != "" {
		first += " (" + l + ")"
	}
	first += ". Start from " + t.Defaults + ", which fills in every default; optional fields without a default are nil when unset. The JSON form is keyed by field id."
	g.add(docComment(first, ts.Description, deprecated(ts.Deprecated)), jen.Type().Id(t.Params).Struct(fields...))

	var vals []jen.Code
	for _, f := range t.Fields {
		if f.Spec.Default == nil {
			continue
		}
		c, err := g.defaultValue(f)
		if err != nil {
			return fmt.Errorf("%s: task %q field %q default: %w", g.fam.File.Path, ts.TaskID, f.Spec.FieldID, err)
		}
		vals = append(vals, jen.Line().Id(f.Name).Op(":").Add(c))
	}
	if len(vals) > 0 {
		vals = append(vals, jen.Line())
	}
	g.add(docComment(fmt.Sprintf("%s returns the params of task %q with every default of the manifest filled in.", t.Defaults, ts.TaskID)),
		jen.Func().Id(t.Defaults).Params().Id(t.Params).Block(jen.Return(jen.Id(t.Params).Values(vals...))))
	return nil
}

// defaultValue renders a field default (normalised by ir.Build to the
// kind's Go form) in the field's Go type.
func (g *goFile) defaultValue(f *ir.Field) (jen.Code, error) {
	scalar := func(v any) (jen.Code, error) {
		switch x := v.(type) {
		case string:
			if f.Choice == nil {
				return jen.Lit(x), nil
			}
			for _, c := range f.Choice.Values {
				if c.Value == x && c.Const != "" {
					return jen.Id(c.Const), nil
				}
			}
			return jen.Id(f.Choice.Type).Call(jen.Lit(x)), nil
		case bool:
			return jen.Lit(x), nil
		case int64:
			return jen.Op(strconv.FormatInt(x, 10)), nil
		case float64:
			return jen.Op(floatLiteral(x, false)), nil
		}
		return nil, fmt.Errorf("a default of type %T cannot be written as Go", v)
	}
	var items []any
	switch x := f.Spec.Default.(type) {
	case []string:
		items = toAny(x)
	case []int64:
		items = toAny(x)
	case []float64:
		items = toAny(x)
	case []bool:
		items = toAny(x)
	default:
		c, err := scalar(x)
		if err != nil {
			return nil, err
		}
		if f.Type.Pointer {
			return jen.New(c), nil
		}
		return c, nil
	}
	out := make([]jen.Code, len(items))
	for i, it := range items {
		c, err := scalar(it)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return typeOf(f.Type).Values(out...), nil
}

func toAny[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// checkFunc is the runtime/params function that checks a field, or "" when
// the field has nothing to check.
func checkFunc(f *ir.Field) string {
	s := f.Spec
	hasRules := false
	for _, c := range spec.Constraints {
		hasRules = hasRules || c.Set(s)
	}
	switch f.Kind {
	case spec.KindString:
		if !hasRules && f.Presence != spec.Required {
			return ""
		}
		if f.Type.Pointer {
			return "OptString"
		}
		return "String"
	case spec.KindInt, spec.KindFloat:
		if !hasRules {
			return ""
		}
		name := map[spec.Kind]string{spec.KindInt: "Int", spec.KindFloat: "Float"}[f.Kind]
		if f.Type.Pointer {
			return "Opt" + name
		}
		return name
	case spec.KindBool:
		return ""
	case spec.KindTensor, spec.KindImage, spec.KindVideo:
		return "Tensor"
	}
	if !hasRules && f.Presence != spec.Required && f.Kind != spec.KindTensorList {
		return ""
	}
	return map[spec.Kind]string{
		spec.KindStringList: "Strings", spec.KindIntList: "Ints", spec.KindFloatList: "Floats",
		spec.KindBoolList: "Bools", spec.KindTensorList: "Tensors",
	}[f.Kind]
}

func (g *goFile) validate(t *ir.Task) {
	doc := docComment("Validate checks every constraint of the manifest and reports all violations, each prefixed with its field path (the field id, and [i] for list items), joined with errors.Join.")
	recv := jen.Id("p").Op("*").Id(t.Params)
	var body []jen.Code
	for _, f := range t.Fields {
		if fn := checkFunc(f); fn != "" {
			body = append(body, jen.Qual(ir.ParamsPath, fn).Call(jen.Op("&").Id("c"), jen.Lit(f.Index), jen.Id("p").Dot(f.Name)))
		}
	}
	if len(body) == 0 {
		g.add(doc, jen.Func().Params(recv).Id("Validate").Params().Error().Add(short(jen.Return(jen.Nil()))))
		return
	}
	stmts := append([]jen.Code{jen.Id("c").Op(":=").Id(t.Rules).Dot("Check").Call()}, body...)
	stmts = append(stmts, jen.Return(jen.Id("c").Dot("Err").Call()))
	g.add(doc, jen.Func().Params(recv).Id("Validate").Params().Error().Block(stmts...))
}

// wireValue returns the engine value form of a set field value.
func wireValue(f *ir.Field) jen.Code {
	val := jen.Id("p").Dot(f.Name)
	switch {
	case f.Type.Slice && f.Choice != nil:
		return jen.Qual(ir.ParamsPath, "StringList").Call(val)
	case f.Type.Slice:
		return jen.Qual(ir.ParamsPath, "List").Call(val)
	case f.Kind.TensorLike():
		return val
	}
	if f.Type.Pointer {
		val = jen.Op("*").Add(val)
	}
	if f.Choice != nil {
		return jen.String().Call(val)
	}
	return val
}

func (g *goFile) kwargs(t *ir.Task, target, method string) {
	var body []jen.Code
	for _, f := range t.Fields {
		if f.Spec.Target != target {
			continue
		}
		set := jen.Id("kw").Index(jen.Lit(f.Spec.FieldID)).Op("=").Add(wireValue(f))
		if f.Type.Pointer || f.Type.Slice {
			body = append(body, jen.If(jen.Id("p").Dot(f.Name).Op("!=").Nil()).Block(set))
		} else {
			body = append(body, set)
		}
	}
	doc := docComment(fmt.Sprintf("%s returns the fields whose target is %s, keyed by field id, in the engine's value form (string, int64, float64, bool, *tensor.Tensor, []any); unset optional fields are left out.", method, target))
	fn := jen.Func().Params(jen.Id("p").Op("*").Id(t.Params)).Id(method).Params().Map(jen.String()).Any()
	if len(body) == 0 {
		g.add(doc, fn.Add(short(jen.Return(jen.Map(jen.String()).Any().Values()))))
		return
	}
	stmts := append([]jen.Code{jen.Id("kw").Op(":=").Make(jen.Map(jen.String()).Any(), jen.Lit(len(body)))}, body...)
	stmts = append(stmts, jen.Return(jen.Id("kw")))
	g.add(doc, fn.Block(stmts...))
}

// batchItem emits what client.BatchParams asks of a batchable task's
// params: StackedInput and BatchDiff.
func (g *goFile) batchItem(t *ir.Task) {
	recv := jen.Id("p").Op("*").Id(t.Params)
	var cases, diffs []jen.Code
	var stacked []string
	for _, f := range t.Fields {
		if f.Spec.Target != spec.TargetCallKwargs {
			continue
		}
		if f.Spec.IsStacked() {
			cases = append(cases, jen.Case(jen.Lit(len(stacked))).Block(jen.Return(jen.Id("p").Dot(f.Name))))
			stacked = append(stacked, strconv.Quote(f.Spec.FieldID))
			continue
		}
		a, b := jen.Id("p").Dot(f.Name), jen.Id("q").Dot(f.Name)
		var differ jen.Code
		switch {
		case f.Kind == spec.KindTensorList:
			differ = jen.Op("!").Qual(ir.ClientPath, "SameTensors").Call(a, b)
		case f.Type.Slice:
			differ = jen.Op("!").Qual(ir.ClientPath, "SameList").Call(a, b)
		case f.Type.Pointer:
			differ = jen.Op("!").Qual(ir.ClientPath, "SameOptional").Call(a, b)
		default:
			differ = jen.Add(a).Op("!=").Add(b)
		}
		diffs = append(diffs, jen.If(differ).Block(jen.Return(jen.Lit(f.Spec.FieldID))))
	}
	g.add(docComment(fmt.Sprintf("StackedInput returns the j-th input that batching stacks (%s), nil when unset: client.RunBatch reads the items of a batch in place.", strings.Join(stacked, ", "))),
		jen.Func().Params(recv.Clone()).Id("StackedInput").Params(jen.Id("j").Int()).Op("*").Qual(ir.TensorPath, "Tensor").Block(
			jen.Switch(jen.Id("j")).Block(cases...),
			jen.Return(jen.Nil())))
	diffs = append(diffs, jen.Return(jen.Lit("")))
	g.add(docComment("BatchDiff returns the id of the first other call input whose value differs between p and q, \"\" when there is none: the items of one batch share those inputs."),
		jen.Func().Params(recv).Id("BatchDiff").Params(jen.Id("q").Op("*").Id(t.Params)).String().Block(diffs...))
}

func (g *goFile) unmarshal(t *ir.Task) {
	doc := "UnmarshalJSON decodes params keyed by field id. Absent keys keep their defaults (see " + t.Defaults + "); unknown keys are an error"
	for _, f := range t.Fields {
		if f.Presence == spec.Required {
			doc += ", and so is a missing required field"
			break
		}
	}
	g.add(docComment(doc+"."),
		jen.Func().Params(jen.Id("p").Op("*").Id(t.Params)).Id("UnmarshalJSON").Params(jen.Id("b").Index().Byte()).Error().Block(
			jen.Type().Id("plain").Id(t.Params),
			jen.Id("q").Op(":=").Id("plain").Call(jen.Id(t.Defaults).Call()),
			jen.If(jen.Err().Op(":=").Id(t.Rules).Dot("DecodeJSON").Call(jen.Id("b"), jen.Op("&").Id("q")), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%s %s params: %w"), jen.Id("FamilyID"), jen.Id(t.Const), jen.Err()))),
			jen.Op("*").Id("p").Op("=").Id(t.Params).Call(jen.Id("q")),
			jen.Return(jen.Nil())))
}

// pictures emits the picture setters of a task's image and video fields.
func (g *goFile) pictures(t *ir.Task) {
	for _, f := range t.Fields {
		if f.FromPicture == "" {
			continue
		}
		field := jen.Op("&").Id("family").Dot("Tasks").Index(jen.Lit(t.Index)).Dot("Inputs").Index(jen.Lit(f.Index))
		dst := jen.Op("&").Id("p").Dot(f.Name)
		recv := jen.Id("p").Op("*").Id(t.Params)
		if f.Kind == spec.KindVideo {
			g.add(docComment(fmt.Sprintf("%s sets %s to the tensor of frames, converted as field %q declares (layout, channels, range, normalisation, dtype and shape; see package runtime/pixels). %s is unchanged on an error.", f.FromPicture, f.Name, f.Spec.FieldID, f.Name)),
				jen.Func().Params(recv).Id(f.FromPicture).Params(jen.Id("frames").Index().Qual("image", "Image")).Error().Add(
					short(jen.Return(jen.Qual(ir.PixelsPath, "SetFrames").Call(dst, jen.Id("frames"), field)))))
			continue
		}
		g.add(docComment(fmt.Sprintf("%s sets %s to the tensor of a picture (a decoded PNG or JPEG), converted as field %q declares (layout, channels, range, normalisation, dtype and shape; see package runtime/pixels). %s is unchanged on an error.", f.FromPicture, f.Name, f.Spec.FieldID, f.Name)),
			jen.Func().Params(recv).Id(f.FromPicture).Params(jen.Id("img").Qual("image", "Image")).Error().Add(
				short(jen.Return(jen.Qual(ir.PixelsPath, "SetImage").Call(dst, jen.Id("img"), field)))))
	}
}
