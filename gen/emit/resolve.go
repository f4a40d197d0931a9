package emit

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime"
)

// Family is one manifest resolved for emission: every Go name chosen and
// checked for collisions, every field mapped to its Go type.
type Family struct {
	// File is the manifest the family comes from.
	File *manifest.File
	// Spec is the family's spec (File.Spec).
	Spec *runtime.ModelInferenceSpec
	// Package is the Go package name, also the output folder name.
	Package string
	// Variants are the family's variants in manifest order.
	Variants []*Variant
	// Tasks are the family's tasks in manifest order.
	Tasks []*Task
	// DefaultVariant is the variant used when none is named.
	DefaultVariant *Variant
	// DefaultTask is the task used when none is named.
	DefaultTask *Task
}

// Variant is one resolved variant.
type Variant struct {
	// Spec is the variant's spec.
	Spec *runtime.InferenceVariantSpec
	// Const is the name of its Variant constant (VariantDefault).
	Const string
}

// Task is one resolved task.
type Task struct {
	// Spec is the task's spec.
	Spec *runtime.InferenceTaskProfile
	// Name is the exported base name (TextToVideo) and the client method name.
	Name string
	// Const is the name of its Task constant (TaskTextToVideo).
	Const string
	// Params, Result and Defaults name the params type, the result type and
	// the function returning default params.
	Params, Result, Defaults string
	// Fields are the task's inputs.
	Fields []*Field
	// Artifacts are the task's outputs.
	Artifacts []*Artifact
}

// Field is one resolved input field.
type Field struct {
	// Spec is the field's spec.
	Spec *runtime.InferenceFieldSpec
	// Name is the Go struct field name.
	Name string
	// Optional is true when the field may be absent: not required and without
	// default. Scalars are then pointers; tensors and lists are nil.
	Optional bool
	// Choice names the field's own string type when it has choices ("" if none).
	Choice string
	// Choices are the choice values with their constant names.
	Choices []Choice
	// Pattern is the index of the field's compiled pattern variable, or -1.
	Pattern int
}

// Choice is one allowed value of a choice field.
type Choice struct {
	// Value is the string value.
	Value string
	// Const is the constant's name.
	Const string
}

// Artifact is one resolved output artifact.
type Artifact struct {
	// Spec is the artifact's spec.
	Spec *runtime.InferenceArtifactSpec
	// Name is the Go field name in the result struct.
	Name string
}

// Fixed names every generated package declares, with what declares them.
var packageNames = []string{
	"FamilyID", "Variant", "Variants", "ParseVariant", "DefaultVariant",
	"Task", "Tasks", "ParseTask", "DefaultTask", "Spec", "Client", "New", "WithVariant",
}

// Methods of the generated types; fields and task methods cannot reuse them.
var (
	clientMethods = []string{"Close", "Runtime", "Variant"}
	paramsMethods = []string{"Validate", "CallKwargs", "LoadKwargs", "UnmarshalJSON"}
)

// resolver collects diagnostics for one file.
type resolver struct {
	file  *manifest.File
	diags []validate.Diagnostic
	// patterns counts pattern variables.
	patterns int
}

func (r *resolver) errorf(pointer, format string, args ...any) {
	line, col := r.file.Position(pointer)
	r.diags = append(r.diags, validate.Diagnostic{File: r.file.Path, Line: line, Column: col, Path: pointer, Message: fmt.Sprintf(format, args...)})
}

// declare records name in scope and reports a collision at pointer.
func (r *resolver) declare(s *naming.Scope, name, origin, pointer string) {
	if c := s.Declare(name, origin); c != nil {
		r.errorf(pointer, "%s", c.Error())
	}
}

// goName returns the go_name override when set (checking it) or the derived
// name.
func (r *resolver) goName(id, override, pointer string) string {
	if override == "" {
		return naming.Exported(id)
	}
	if err := naming.CheckExported(override); err != nil {
		r.errorf(pointer+"/go_name", "%v", err)
		return naming.Exported(id)
	}
	return override
}

// constName names an enum constant: prefix + go_name when set, else prefix
// followed by the words of the id (naming.Append: "Variant1_3B").
// An override that is not legal was reported by goName and is ignored.
func constName(prefix, id, override string) string {
	if override != "" && naming.CheckExported(override) == nil {
		return prefix + override
	}
	return naming.Append(prefix, id)
}

// Resolve chooses and checks every Go name of a valid manifest and maps its
// fields to Go types. Problems (name collisions, go_name or go_package
// overrides that are not legal, constraints the generator cannot express)
// are returned as diagnostics pointing into the manifest.
func Resolve(file *manifest.File) (*Family, []validate.Diagnostic) {
	r := &resolver{file: file}
	spec := file.Spec
	if spec == nil {
		r.errorf("", "manifest has not been decoded")
		return nil, r.diags
	}
	fam := &Family{File: file, Spec: spec}
	if spec.GoPackage != "" {
		if err := naming.CheckPackage(spec.GoPackage); err != nil {
			r.errorf("/go_package", "go_package: %v", err)
		}
	}
	fam.Package = validate.PackageOf(file)

	var pkg naming.Scope
	for _, n := range packageNames {
		pkg.Declare(n, "the generated declaration "+n)
	}
	for i := range spec.Variants {
		v := &spec.Variants[i]
		ptr := manifest.JoinPointer("variants", strconv.Itoa(i))
		r.goName(v.VariantID, v.GoName, ptr) // reports an illegal override
		rv := &Variant{Spec: v, Const: constName("Variant", v.VariantID, v.GoName)}
		r.declare(&pkg, rv.Const, fmt.Sprintf("variant %q", v.VariantID), ptr+"/variant_id")
		fam.Variants = append(fam.Variants, rv)
		if v.VariantID == spec.DefaultVariantID {
			fam.DefaultVariant = rv
		}
	}
	if fam.DefaultVariant == nil {
		r.errorf("/default_variant_id", "default variant %q is not a variant of the family", spec.DefaultVariantID)
	}

	var client naming.Scope
	for _, n := range clientMethods {
		client.Declare(n, "the Client method "+n)
	}
	for i := range spec.Tasks {
		t := r.task(&pkg, &client, &spec.Tasks[i], manifest.JoinPointer("tasks", strconv.Itoa(i)))
		fam.Tasks = append(fam.Tasks, t)
		if t.Spec.TaskID == spec.DefaultTaskID {
			fam.DefaultTask = t
		}
	}
	if fam.DefaultTask == nil {
		r.errorf("/default_task_id", "default task %q is not a task of the family", spec.DefaultTaskID)
	}
	if len(r.diags) > 0 {
		return nil, r.diags
	}
	return fam, nil
}

func (r *resolver) task(pkg, client *naming.Scope, ts *runtime.InferenceTaskProfile, ptr string) *Task {
	name := r.goName(ts.TaskID, ts.GoName, ptr)
	t := &Task{
		Spec:     ts,
		Name:     name,
		Const:    constName("Task", ts.TaskID, ts.GoName),
		Params:   name + "Params",
		Result:   name + "Result",
		Defaults: "Default" + name + "Params",
	}
	origin := fmt.Sprintf("task %q", ts.TaskID)
	idPtr := ptr + "/task_id"
	r.declare(pkg, t.Const, origin, idPtr)
	r.declare(pkg, t.Params, origin+" (params type)", idPtr)
	r.declare(pkg, t.Result, origin+" (result type)", idPtr)
	r.declare(pkg, t.Defaults, origin+" (default params function)", idPtr)
	r.declare(client, t.Name, origin+" (client method)", idPtr)
	if ts.Batching != nil {
		r.declare(client, t.Name+"Batch", origin+" (batch client method)", idPtr)
	}
	if ts.Stream {
		r.declare(client, t.Name+"Stream", origin+" (stream client method)", idPtr)
	}

	var fields naming.Scope
	for _, n := range paramsMethods {
		fields.Declare(n, "the params method "+n)
	}
	for i := range ts.Inputs {
		f := r.field(pkg, &fields, t, &ts.Inputs[i], ptr+"/inputs/"+strconv.Itoa(i))
		if f != nil {
			t.Fields = append(t.Fields, f)
		}
	}
	var arts naming.Scope
	for i := range ts.Outputs {
		a := &ts.Outputs[i]
		aptr := ptr + "/outputs/" + strconv.Itoa(i)
		ra := &Artifact{Spec: a, Name: r.goName(a.ArtifactID, a.GoName, aptr)}
		r.declare(&arts, ra.Name, fmt.Sprintf("artifact %q", a.ArtifactID), aptr+"/artifact_id")
		if !isArtifactKind(a.Kind) {
			r.errorf(aptr+"/kind", "artifact kind %q is not one of %s", a.Kind, strings.Join(runtime.ArtifactKinds, ", "))
		}
		t.Artifacts = append(t.Artifacts, ra)
	}
	return t
}

func isArtifactKind(k string) bool {
	for _, a := range runtime.ArtifactKinds {
		if a == k {
			return true
		}
	}
	return false
}

// kindInfo describes what a field kind accepts.
type kindInfo struct {
	numeric, integer, stringy, list, tensor bool
}

var kinds = map[string]kindInfo{
	runtime.KindString:     {stringy: true},
	runtime.KindInt:        {numeric: true, integer: true},
	runtime.KindFloat:      {numeric: true},
	runtime.KindBool:       {},
	runtime.KindTensor:     {tensor: true},
	runtime.KindImage:      {tensor: true},
	runtime.KindVideo:      {tensor: true},
	runtime.KindStringList: {stringy: true, list: true},
	runtime.KindIntList:    {numeric: true, integer: true, list: true},
	runtime.KindFloatList:  {numeric: true, list: true},
	runtime.KindBoolList:   {list: true},
	runtime.KindTensorList: {tensor: true, list: true},
}

func (r *resolver) field(pkg, fields *naming.Scope, t *Task, fs *runtime.InferenceFieldSpec, ptr string) *Field {
	k, ok := kinds[fs.Kind]
	if !ok {
		r.errorf(ptr+"/kind", "field kind %q is not one of %s", fs.Kind, strings.Join(runtime.FieldKinds, ", "))
		return nil
	}
	if !validJSONKey(fs.FieldID) {
		r.errorf(ptr+"/field_id", "field id %q cannot be a JSON key of a Go struct field: use letters, digits and _ (it is also the keyword argument name)", fs.FieldID)
	}
	f := &Field{Spec: fs, Name: r.goName(fs.FieldID, fs.GoName, ptr), Pattern: -1}
	f.Optional = !fs.Required && fs.Default == nil
	r.declare(fields, f.Name, fmt.Sprintf("task %q field %q", t.Spec.TaskID, fs.FieldID), ptr+"/field_id")

	// Every constraint must apply to the kind: the generated Validate checks
	// all of them, so none may be silently dropped.
	if (fs.Minimum != nil || fs.Maximum != nil) && !k.numeric {
		r.errorf(ptr, "minimum and maximum apply to int and float kinds (and their lists), not %s", fs.Kind)
	}
	if fs.MultipleOf != nil {
		if !k.integer {
			r.errorf(ptr+"/multiple_of", "multiple_of applies to int and int_list fields, not %s", fs.Kind)
		} else if *fs.MultipleOf < 1 {
			r.errorf(ptr+"/multiple_of", "multiple_of must be at least 1, got %d", *fs.MultipleOf)
		}
	} else if fs.Remainder != 0 {
		r.errorf(ptr+"/remainder", "remainder needs multiple_of")
	}
	if (fs.MinLength != nil || fs.MaxLength != nil) && !(k.stringy || k.list) {
		r.errorf(ptr, "min_length and max_length apply to strings and lists, not %s", fs.Kind)
	}
	if fs.Pattern != "" {
		if !k.stringy {
			r.errorf(ptr+"/pattern", "pattern applies to string and string_list fields, not %s", fs.Kind)
		} else if _, err := regexp.Compile(fs.Pattern); err != nil {
			r.errorf(ptr+"/pattern", "pattern is not an RE2 regular expression: %v", err)
		} else {
			f.Pattern = r.patterns
			r.patterns++
		}
	}
	if k.tensor && fs.Default != nil {
		r.errorf(ptr+"/default", "%s fields cannot have a default", fs.Kind)
	}
	if len(fs.Choices) > 0 {
		if !k.stringy {
			r.errorf(ptr+"/choices", "choices apply to string and string_list fields, not %s", fs.Kind)
			return f
		}
		f.Choice = t.Name + f.Name
		r.declare(pkg, f.Choice, fmt.Sprintf("task %q field %q (choice type)", t.Spec.TaskID, fs.FieldID), ptr+"/choices")
		for i, c := range fs.Choices {
			ch := Choice{Value: c, Const: naming.Append(f.Choice, c)}
			if len(naming.Words(c)) == 0 {
				// Nothing in the value can name it ("*", "+"): use its position.
				ch.Const = fmt.Sprintf("%sValue%d", f.Choice, i+1)
			}
			r.declare(pkg, ch.Const, fmt.Sprintf("task %q field %q choice %q", t.Spec.TaskID, fs.FieldID, c), ptr+"/choices/"+strconv.Itoa(i))
			f.Choices = append(f.Choices, ch)
		}
	}
	if fs.Default != nil {
		if err := checkDefault(fs, k); err != nil {
			r.errorf(ptr+"/default", "default: %v", err)
		}
	}
	return f
}

// checkDefault checks that the default has a Go form for the field's type.
// (The validator already checked it against the kind and constraints.)
func checkDefault(fs *runtime.InferenceFieldSpec, k kindInfo) error {
	if k.list {
		items, ok := listItems(fs.Default)
		if !ok {
			return fmt.Errorf("want a list, got %T", fs.Default)
		}
		for i, it := range items {
			if err := checkScalar(fs.Kind, it); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		return nil
	}
	return checkScalar(fs.Kind, fs.Default)
}

func checkScalar(kind string, v any) error {
	switch kind {
	case runtime.KindString, runtime.KindStringList:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("want a string, got %T", v)
		}
	case runtime.KindBool, runtime.KindBoolList:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("want a bool, got %T", v)
		}
	case runtime.KindInt, runtime.KindIntList:
		if _, ok := intValue(v); !ok {
			return fmt.Errorf("want an integer, got %v (%T)", v, v)
		}
	case runtime.KindFloat, runtime.KindFloatList:
		if _, ok := floatValue(v); !ok {
			return fmt.Errorf("want a number, got %v (%T)", v, v)
		}
	default:
		return fmt.Errorf("%s values cannot be written as Go constants", kind)
	}
	return nil
}

// listItems returns the items of any slice value.
func listItems(v any) ([]any, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// intValue converts a decoded number to int64 when it is integral.
func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}

// floatValue converts a decoded number to float64.
func floatValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	}
	return 0, false
}

// validJSONKey mirrors encoding/json's rule for struct tag names.
func validJSONKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
