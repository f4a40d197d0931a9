package ir

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/runtime/params"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// field checks and resolves input j of task t. ids maps the field ids seen
// so far to their index.
func (b *builder) field(t *Task, names *scope, ids map[string]int, j int) *Field {
	ts := t.Spec
	fs := &ts.Inputs[j]
	fp := manifest.Pointer("tasks", t.Index, "inputs", j)
	task := manifest.Sprintf("task %q", ts.TaskID)
	f := &Field{Spec: fs, Index: j, Kind: fs.Kind, Presence: fs.Presence(), Name: b.goName(fs.FieldID, fs.GoName, fp)}
	f.Type = fieldType(f)
	switch fs.Kind.Picture() {
	case spec.PictureImage:
		f.FromPicture = "Set" + f.Name + "FromImage"
	case spec.PictureVideo:
		f.FromPicture = "Set" + f.Name + "FromFrames"
	}
	if b.pruned(fp) {
		return f
	}
	if fs.Kind.HasParts() && fs.FieldID != "" && !b.pruned(fp+"/field_id") {
		f.Parts = b.parts(t, f, fp)
		f.Type = fieldType(f)
	}
	if fs.FieldID != "" && !b.pruned(fp+"/field_id") {
		if first, dup := ids[fs.FieldID]; dup {
			b.report(fp+"/field_id", false, "%s: duplicate field id %q (first defined at line %d)", task, fs.FieldID, b.f.Line(manifest.Pointer("tasks", t.Index, "inputs", first, "field_id")))
		} else {
			ids[fs.FieldID] = j
			names.declare(b, f.Name, manifest.Sprintf("%s field %q", task, fs.FieldID), nameAt(fp, "field_id", fs.GoName))
		}
		switch {
		case !identifier.MatchString(fs.FieldID):
			b.report(fp+"/field_id", false, "%s: field id %q is passed as a keyword argument, so it must be letters, digits and '_', not starting with a digit", task, fs.FieldID)
		case pythonReserved[fs.FieldID]:
			b.report(fp+"/field_id", false, "%s: field id %q is a reserved word in TorchScript and cannot be a keyword argument; rename it", task, fs.FieldID)
		}
	}
	name := manifest.Sprintf("%s field %q", task, fs.FieldID)
	kindOK := !b.pruned(fp+"/kind") && fs.Kind.Valid()
	if kindOK {
		b.problems(fp, name, fs.PartProblems())
		for _, c := range spec.Constraints {
			if c.Set(fs) && !fs.Kind.Allows(c) && !b.pruned(fp+"/"+string(c)) {
				b.report(fp+"/"+string(c), true, "%s: %s applies to kinds %s, not %s", name, c, kindNames(spec.KindsAllowing(c)), fs.Kind)
			}
		}
	}
	rulesOK := true
	if fs.Minimum != nil && fs.Maximum != nil && fs.Minimum.Cmp(*fs.Maximum) > 0 {
		b.report(fp+"/maximum", false, "%s: maximum %s is below minimum %s", name, fs.Maximum, fs.Minimum)
	}
	if fs.MinLength != nil && fs.MaxLength != nil && *fs.MinLength > *fs.MaxLength {
		b.report(fp+"/max_length", false, "%s: max_length %d is below min_length %d", name, *fs.MaxLength, *fs.MinLength)
	}
	if fs.MultipleOf != nil && *fs.MultipleOf < 1 && !b.pruned(fp+"/multiple_of") {
		b.report(fp+"/multiple_of", false, "%s: multiple_of must be at least 1, got %d", name, *fs.MultipleOf)
		rulesOK = false
	}
	if fs.Remainder != 0 {
		switch {
		case fs.MultipleOf == nil:
			b.report(fp+"/remainder", true, "%s: remainder only has a meaning with multiple_of", name)
			rulesOK = false
		case fs.Remainder >= *fs.MultipleOf || fs.Remainder < 0:
			b.report(fp+"/remainder", false, "%s: remainder %d must be below multiple_of %d", name, fs.Remainder, *fs.MultipleOf)
			rulesOK = false
		}
	}
	var re *regexp.Regexp
	if fs.Pattern != "" && !b.pruned(fp+"/pattern") {
		var err error
		if re, err = regexp.Compile(fs.Pattern); err != nil {
			b.report(fp+"/pattern", false, "%s: pattern is not a valid RE2 regular expression: %v", name, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			rulesOK = false
		}
	}
	b.choices(t, f, fp, name, re)
	if kindOK && fs.Image != nil && !b.pruned(fp+"/image") && fs.Kind.Allows(spec.ConstraintImage) {
		b.problems(fp+"/image", name, fs.Image.Problems())
		b.imageShape(fp, name, fs.Kind, fs.Shape, fs.Image, t.Spec.Batching != nil && t.Spec.Batching.Dim != "" && fs.IsStacked())
	}
	if !kindOK || !rulesOK || b.pruned(fp+"/default") {
		return f
	}
	if nv, ok := b.fieldValue(task, fs, fs.Default, fp+"/default", "default"); ok {
		fs.Default = nv
	}
	return f
}

// choices checks a field's choices and resolves its enum type.
func (b *builder) choices(t *Task, f *Field, fp, name string, re *regexp.Regexp) {
	fs := f.Spec
	if len(fs.Choices) == 0 || b.pruned(fp+"/choices") {
		return
	}
	seen := map[string]int{}
	good := true
	for j, ch := range fs.Choices {
		p := manifest.Sprintf("%s/choices/%d", fp, j)
		if b.pruned(p) {
			good = false
			continue
		}
		if ch == "" {
			b.report(p, false, "%s: choice %d is empty; choices must be non-empty strings", name, j)
			good = false
			continue
		}
		if first, dup := seen[ch]; dup {
			b.report(p, false, "%s: duplicate choice %q (first at line %d)", name, ch, b.f.Line(manifest.Sprintf("%s/choices/%d", fp, first)))
			good = false
			continue
		}
		seen[ch] = j
		if re != nil && !re.MatchString(ch) {
			b.report(p, false, "%s: choice %q does not match the field's pattern %q", name, ch, fs.Pattern)
		}
		if fs.Kind.Textual() && !fs.Kind.IsList() {
			if n := utf8.RuneCountInString(ch); fs.MinLength != nil && n < *fs.MinLength || fs.MaxLength != nil && n > *fs.MaxLength {
				b.report(p, false, "%s: choice %q breaks the field's length limits", name, ch)
			}
		}
	}
	if !good || !fs.Kind.Textual() {
		return
	}
	e := &Enum{Type: t.Name + f.Name, Consts: len(fs.Choices) <= MaxChoiceConsts}
	e.Set = "values" + e.Type
	b.pkg.declare(b, e.Type, name+" (choice type)", fp+"/choices")
	for j, ch := range fs.Choices {
		v := EnumValue{Value: ch}
		if e.Consts {
			v.Const = naming.Value(e.Type, ch)
			b.pkg.declare(b, v.Const, manifest.Sprintf("%s choice %q", name, ch), manifest.Sprintf("%s/choices/%d", fp, j))
		}
		e.Values = append(e.Values, v)
	}
	f.Choice = e
	f.Type = fieldType(f)
}

// fieldValue checks that v (a manifest value) fits field f — its kind and
// every rule — and reports each problem at p (a list item's at p/i). It
// returns v in the kind's Go form and whether it fits; nil always fits.
func (b *builder) fieldValue(task string, f *spec.InferenceFieldSpec, v any, p, what string) (any, bool) {
	if v == nil {
		return nil, true
	}
	name := manifest.Sprintf("%s field %q", task, f.FieldID)
	if f.Kind.TensorLike() {
		b.report(p, false, "%s: a field of kind %s cannot have a %s; its value is only known at call time", name, f.Kind, what)
		return nil, false
	}
	rules, err := params.CompileField(f)
	if err != nil {
		return nil, false // the rule itself was reported
	}
	nv, vs := rules.CheckValue(v)
	for _, x := range vs {
		at, item := p, strings.TrimPrefix(x.Path, f.FieldID)
		if i, ok := strings.CutPrefix(item, "["); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(i, "]")); err == nil {
				at = manifest.Sprintf("%s/%d", p, n)
			}
		}
		msg := manifest.Sprintf("%s: %s%s %s", name, what, item, x.Message)
		if x.Hint != "" {
			msg += " (" + x.Hint + ")"
		}
		b.report(at, false, "%s", msg)
	}
	return nv, len(vs) == 0
}

// parts resolves the struct of field f of task t (at fp), a kind with
// parts: its type name (the task's Go name then the field's), declared in
// the package, and a field per part, named by the part's name (or
// go_name) and unique within the struct.
func (b *builder) parts(t *Task, f *Field, fp string) *Record {
	r := &Record{Type: t.Name + f.Name}
	what := manifest.Sprintf("task %q field %q", t.Spec.TaskID, f.Spec.FieldID)
	b.pkg.declare(b, r.Type, what+" (parts type)", nameAt(fp, "field_id", f.Spec.GoName))
	var names scope
	seen := map[string]bool{}
	for k := range f.Spec.Fields {
		p := &f.Spec.Fields[k]
		pp := manifest.Sprintf("%s/fields/%d", fp, k)
		rf := &RecordField{Spec: p, Name: b.goName(p.Name, p.GoName, pp), Type: goTypeOf(f.Kind.GoType())}
		r.Fields = append(r.Fields, rf)
		dup := seen[p.Name] // reported by spec's part rules
		seen[p.Name] = true
		if p.Name != "" && !dup && !b.pruned(pp+"/name") {
			names.declare(b, rf.Name, manifest.Sprintf("%s part %q", what, p.Name), nameAt(pp, "name", p.GoName))
		}
	}
	return r
}

// fieldType is the Go type of a field in the params struct: its kind's
// (spec.Kind.GoType), the choice type for a string with choices, and a
// pointer to an optional single value that is not a tensor.
func fieldType(f *Field) GoType {
	rt := f.Kind.GoType()
	if rt == nil { // a kind that is not valid, reported at its key
		b, _ := spec.BaseTensor.Info()
		rt = b.Go
	}
	t := goTypeOf(rt)
	if f.Choice != nil {
		t.Pkg, t.Name = "", f.Choice.Type
	}
	if f.Parts != nil { // the generated struct, a pointer to it when optional
		return GoType{Name: f.Parts.Type, Pointer: f.Presence == spec.Optional}
	}
	if !t.Slice && !f.Kind.TensorLike() && f.Presence == spec.Optional {
		t.Pointer = true
	}
	return t
}

// goTypeOf is the GoType of t: a named or predeclared type, a pointer to
// one, or a slice of either.
func goTypeOf(t reflect.Type) GoType {
	if g, ok := aliased[t]; ok {
		return g
	}
	var g GoType
	if t.Kind() == reflect.Slice && t.Name() == "" {
		g.Slice, t = true, t.Elem()
	}
	if t.Kind() == reflect.Pointer {
		g.Pointer, t = true, t.Elem()
	}
	g.Pkg, g.Name = t.PkgPath(), t.Name()
	return g
}

// aliased spells the types of the runtime's tables that are aliases as Go
// source declares them: reflect names an alias by the type it stands for
// (json.RawMessage is jsontext.Value from Go 1.27 on), and generated code
// must be the same whichever Go runs the generator.
var aliased = map[reflect.Type]GoType{
	reflect.TypeFor[json.RawMessage](): {Pkg: "encoding/json", Name: "RawMessage"},
}

func kindNames(ks []spec.Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// imageShape checks that a picture's declared shape has the rank and the
// channel count its image spec implies: [H, W, C] or [C, H, W], a video
// with a leading frame dimension, a stacked input with the batch dimension
// before all.
func (b *builder) imageShape(at, name string, kind spec.Kind, shape spec.Shape, img *spec.ImageSpec, batched bool) {
	if shape == nil {
		return
	}
	lead := kind.Picture().Rank() - spec.PictureImage.Rank() // a video's frames
	if batched {
		lead++
	}
	layout := img.LayoutName()
	if len(shape) != lead+3 {
		b.report(at+"/shape", false, "%s: shape %s has %d dimensions, but a %s %s in layout %s has %d", name, shape, len(shape),
			map[bool]string{true: "batched", false: "single"}[batched], kind, layout, lead+3)
		return
	}
	c := lead + 2
	if layout == spec.LayoutCHW {
		c = lead
	}
	if n, fixed := shape[c].Size(); fixed && n != int64(img.ChannelCount()) {
		b.report(at+"/shape", false, "%s: shape %s has %d channels, but channels %s has %d", name, shape, n, img.ChannelOrder(), img.ChannelCount())
	}
}
