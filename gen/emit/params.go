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
	g.paramsMethods(t)
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
	for _, f := range t.Fields {
		if f.Parts != nil {
			g.parts(t, f)
		}
	}

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

// parts emits the struct of a field with parts (tensor_dict,
// tensor_tuple): one tensor field per part, in the manifest's order
// (client.Task reads them by position), tagged with the part's name for
// the params' JSON form.
func (g *goFile) parts(t *ir.Task, f *ir.Field) {
	r := f.Parts
	tuple := f.Kind.Form() == spec.FormTuple
	fields := make([]jen.Code, 0, len(r.Fields))
	for k, p := range r.Fields {
		first := fmt.Sprintf("%s is key %q", p.Name, p.Spec.Name)
		if tuple {
			first = fmt.Sprintf("%s is element %d (%s)", p.Name, k, p.Spec.Name)
		}
		if c := (spec.TensorContract{DType: p.Spec.DType, Shape: p.Spec.Shape}); c.DType != "" || c.Shape != nil {
			first += ": " + c.String()
		}
		presence := "Required."
		if !f.Spec.PartRequired(k) {
			presence = "Optional: nil leaves the key out of the dict."
		}
		fields = append(fields, jen.Comment(docComment(first+".", p.Spec.Description, presence)).Line().Id(p.Name).Add(typeOf(p.Type)).Tag(map[string]string{"json": p.Spec.Name}))
	}
	what := fmt.Sprintf("the dict (Dict[str, Tensor]) that is field %q of task %q: one field per key the manifest declares", f.Spec.FieldID, t.Spec.TaskID)
	if tuple {
		what = fmt.Sprintf("the tuple (%s) that is field %q of task %q: one field per element, in order", f.Spec.TorchScriptType(), f.Spec.FieldID, t.Spec.TaskID)
	}
	g.add(docComment(fmt.Sprintf("%s holds %s.", r.Type, what)), jen.Type().Id(r.Type).Struct(fields...))
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

// paramsMethods emits the params' methods that apply the task's
// client.Task: Validate, CallKwargs, LoadKwargs and UnmarshalJSON.
func (g *goFile) paramsMethods(t *ir.Task) {
	recv := jen.Id("p").Op("*").Id(t.Params)
	kwargs := jen.Map(jen.String()).Any()
	g.add(docComment("Validate checks every rule of the manifest and reports all violations, each prefixed with its field path (the field id, [i] for list items)."),
		jen.Func().Params(recv.Clone()).Id("Validate").Params().Error().Add(short(jen.Return(jen.Id(t.Var).Dot("Validate").Call(jen.Id("p"))))))
	g.add(docComment("CallKwargs returns the call_kwargs fields keyed by field id, in the engine's value form; unset optional fields are left out."),
		jen.Func().Params(recv.Clone()).Id("CallKwargs").Params().Add(kwargs.Clone()).Add(short(jen.Return(jen.Id(t.Var).Dot("CallKwargs").Call(jen.Id("p"))))))
	g.add(docComment("LoadKwargs returns the load_kwargs fields, as CallKwargs does."),
		jen.Func().Params(recv.Clone()).Id("LoadKwargs").Params().Add(kwargs.Clone()).Add(short(jen.Return(jen.Id(t.Var).Dot("LoadKwargs").Call(jen.Id("p"))))))
	doc := "UnmarshalJSON decodes params keyed by field id: absent keys keep their defaults; unknown keys are an error"
	for _, f := range t.Fields {
		if f.Presence == spec.Required {
			doc += ", and so are missing required fields"
			break
		}
	}
	g.add(docComment(doc+"."),
		jen.Func().Params(recv).Id("UnmarshalJSON").Params(jen.Id("b").Index().Byte()).Error().Add(short(jen.Return(jen.Id(t.Var).Dot("DecodeJSON").Call(jen.Id("b"), jen.Id("p"))))))
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
		if f.Kind.Picture() == spec.PictureVideo {
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
