// Package contract checks a manifest task against the TorchScript method it
// runs (DESIGN.md, "The checkpoint contract"), so that a mismatch fails the
// load with both sides named instead of failing in the middle of a request.
//
// The rules, for a task and the schema of its method:
//
//   - The method exists in the module.
//   - Every call_kwargs field is an argument of the method whose type accepts
//     the field's kind: string (with or without choices) → str, int → int,
//     float → float, bool → bool, tensor/image/video → Tensor, string_list →
//     List[str], int_list → List[int], float_list → List[float], bool_list →
//     List[bool], tensor_list → List[Tensor]. An argument typed Optional[T]
//     accepts what T accepts, Union[...] what any member accepts, Any
//     everything, and number (Scalar) int, float and bool.
//   - An int field is accepted for a float argument, because the engine
//     (runtime/torch) converts an int to a float where the schema asks for
//     one; a float field for an int argument is not (the engine refuses it,
//     and the value would lose its fraction). A string field is accepted for
//     a Device argument (the engine parses it as a device name).
//   - A field the caller may leave out (not required, no default in the
//     manifest) is omitted from the call, so its argument needs a default in
//     the schema.
//   - Every argument without a default is a call_kwargs field, or a key of the
//     task's default_call_kwargs (or the variant's call_kwargs, see
//     CheckVariant): otherwise no call could ever supply it.
//   - Every default_call_kwargs (and variant call_kwargs) key that is not a
//     field is an argument, and its value suits the argument's type the way
//     the engine converts values: an integer value suits int, float and
//     number; a float value suits float and number but not int (the manifest
//     loader keeps integer literals as int64, so write 4, not 4.0, for an int
//     argument).
//   - When the method returns Dict[str, V], each artifact's kind is one V can
//     hold: video, image, embedding and tensor need Tensor; text needs str;
//     json needs str or a dict, list or scalar type without tensors. When it
//     returns one value that is not a dict, the task has exactly one artifact
//     and the value's type suits its kind. A method returning None suits a
//     task without artifacts only.
//   - When the method returns Dict[str, V] and its TorchScript code shows
//     every key the dict can hold (MethodReturns.Complete, read from the
//     archive by ReadReturns; see CheckLoaded), each required artifact's id
//     is one of those keys. When the code does not show them all (a helper
//     builds the dict, a key is computed) nothing is concluded at load:
//     runtime/client checks the returned keys on every call.
//
// A compiled checkpoint (an AOTInductor package) has no TorchScript
// schema: CheckCallSpec checks a task against the call spec it was
// exported for instead, and BatchRange reads the batch sizes it takes.
//
// A mismatch is a *MismatchError listing every problem with the field,
// what was expected and what was found; it matches ErrMismatch.
package contract

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

var tensorType = reflect.TypeFor[*tensor.Tensor]()

// ErrMismatch is matched (errors.Is) by every *MismatchError.
var ErrMismatch = errors.New("manifest does not match the checkpoint")

// Problem is one disagreement between a task and its method's schema.
type Problem struct {
	// Field names the thing that disagrees: `field "prompt"`,
	// `argument "steps"`, `artifact "video"`, `default_call_kwargs "seed"`,
	// `call_kwargs "seed"` (the variant's), "method" or "return".
	Field string
	// Expected is what the other side requires.
	Expected string
	// Found is what is there instead.
	Found string
}

// String formats the problem as "FIELD: expected EXPECTED, found FOUND".
func (p Problem) String() string {
	return fmt.Sprintf("%s: expected %s, found %s", p.Field, p.Expected, p.Found)
}

// MismatchError lists every problem found for one task.
type MismatchError struct {
	// Task is the task id.
	Task string
	// Method is the TorchScript method the task runs.
	Method string
	// Problems are the problems in a fixed order: method, fields in manifest
	// order, call kwargs by key, arguments in schema order, then the return.
	Problems []Problem

	task *spec.InferenceTaskProfile // as checked
}

// Where says where in the manifest problem i lies, as JSON Pointer
// segments relative to the task ("inputs/2" for a field, "outputs/0" for
// an artifact, "default_call_kwargs/seed", "method", "outputs" for the
// return as a whole, "inputs" for an argument no field supplies) or, when
// variant is true, relative to the variant the task runs through
// ("call_kwargs/seed"). A path may name a key the manifest leaves out
// ("method"): its parent is then where the problem lies.
func (e *MismatchError) Where(i int) (path string, variant bool) {
	if e.task == nil || i < 0 || i >= len(e.Problems) {
		return "", false
	}
	return locate(e.task, e.Problems[i].Field)
}

// Error names the task and method and lists every problem, one per line.
func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %q does not match method %s of the checkpoint (%d problem", e.Task, e.Method, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteByte('s')
	}
	b.WriteString("):")
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// Check checks task against schema, the schema of the task's method, given
// methods, the module's method names. It returns nil or a *MismatchError.
func Check(task *spec.InferenceTaskProfile, methods []string, schema engine.MethodSchema) error {
	return check(task, nil, methods, schema, nil)
}

// CheckVariant is Check for a task run through one variant: the variant's
// call_kwargs are passed on every call too, so they count as supplied
// arguments and their keys and values are checked like default_call_kwargs.
// A nil variant is the same as Check.
func CheckVariant(task *spec.InferenceTaskProfile, variant *spec.InferenceVariantSpec, methods []string, schema engine.MethodSchema) error {
	return check(task, variant, methods, schema, nil)
}

// CheckLoaded is CheckVariant plus what the checkpoint's TorchScript code
// tells about the dicts its methods return: returns, by method name, as
// ReadReturns reads them from the archive (nil when unknown). A required
// artifact whose key the task's method never returns, by its code, is a
// problem. A streaming task also supplies the reserved arguments its
// method declares (ArgNumFrames, ArgControls, ArgState), which the
// runtime passes on every step. CheckTask reads methods and schema from a
// module or an archive's code and calls it.
func CheckLoaded(task *spec.InferenceTaskProfile, variant *spec.InferenceVariantSpec, methods []string, schema engine.MethodSchema, returns map[string]MethodReturns) error {
	var ret *MethodReturns
	if task != nil {
		if r, ok := returns[task.MethodName()]; ok {
			ret = &r
		}
	}
	return check(asCalled(task, argNames(schema)), variant, methods, schema, ret)
}

// CheckModule reads the method list and the task method's schema from a
// loaded module and runs CheckVariant (variant may be nil).
func CheckModule(task *spec.InferenceTaskProfile, variant *spec.InferenceVariantSpec, mod engine.Module) error {
	if task == nil || mod == nil {
		return errors.New("contract: nil task or module")
	}
	methods := mod.Methods()
	var schema engine.MethodSchema
	if slices.Contains(methods, task.MethodName()) {
		s, err := mod.Schema(task.MethodName())
		if err != nil {
			return fmt.Errorf("contract: task %q: schema of method %s: %w", task.TaskID, task.MethodName(), err)
		}
		schema = s
	}
	return check(task, variant, methods, schema, nil)
}

type checker struct {
	task     *spec.InferenceTaskProfile
	method   string
	problems []Problem
}

func (c *checker) add(field, expected, found string) {
	c.problems = append(c.problems, Problem{Field: field, Expected: expected, Found: found})
}

func check(task *spec.InferenceTaskProfile, variant *spec.InferenceVariantSpec, methods []string, schema engine.MethodSchema, ret *MethodReturns) error {
	if task == nil {
		return errors.New("contract: nil task")
	}
	c := &checker{task: task, method: task.MethodName()}
	if !slices.Contains(methods, c.method) {
		found := "no methods"
		if len(methods) > 0 {
			found = "methods " + strings.Join(methods, ", ")
		}
		c.add("method", fmt.Sprintf("a method named %q", c.method), found)
		return c.err()
	}
	if schema.Name != "" && schema.Name != c.method {
		c.add("method", fmt.Sprintf("the schema of %s", c.method), "the schema of "+schema.Name)
		return c.err()
	}

	args := map[string]engine.Argument{}
	argTypes := map[string]Type{}
	for _, a := range schema.Arguments {
		args[a.Name] = a
		t, err := ParseType(a.Type)
		if err != nil {
			c.add(fmt.Sprintf("argument %q", a.Name), "a TorchScript type", err.Error())
			continue
		}
		argTypes[a.Name] = t
	}
	supplied := map[string]bool{}
	if task.SessionBatching != nil {
		if _, ok := args[ArgControls]; !ok {
			c.add("session_batching", fmt.Sprintf("an argument %s: Tensor of %s (a batch of sessions' steps has one row of controls per session)", ArgControls, c.method),
				"no such argument ("+argList(schema)+")")
		}
	}

	c.checkFields(schema, args, argTypes, supplied)
	c.checkArgumentKeys(ret)

	kwargs := []struct {
		label string
		m     map[string]any
	}{{"default_call_kwargs", task.DefaultCallKwargs}}
	if variant != nil {
		kwargs = append(kwargs, struct {
			label string
			m     map[string]any
		}{"call_kwargs", variant.CallKwargs})
	}
	for _, kw := range kwargs {
		for _, k := range sortedKeys(kw.m) {
			supplied[k] = true
			if f, ok := task.Field(k); ok && f.CallKwarg() {
				continue // a default for a field, checked with the field
			}
			a, ok := args[k]
			if !ok {
				c.add(fmt.Sprintf("%s %q", kw.label, k), "an argument of "+c.method, "no such argument ("+argList(schema)+")")
				continue
			}
			t, ok := argTypes[k]
			if !ok {
				continue // its type did not parse; reported above
			}
			if why := valueMismatch(t, kw.m[k]); why != "" {
				c.add(fmt.Sprintf("%s %q", kw.label, k), fmt.Sprintf("a value for argument %s: %s", k, a.Type), why)
			}
		}
	}

	for _, a := range schema.Arguments {
		if a.HasDefault || supplied[a.Name] {
			continue
		}
		found := "no field"
		if f, ok := task.Field(a.Name); ok {
			found = fmt.Sprintf("field %q with target %s", f.FieldID, f.Target)
		}
		c.add(fmt.Sprintf("argument %q", a.Name),
			fmt.Sprintf("a call_kwargs field %q (the argument has no default)", a.Name), found)
	}

	c.checkReturn(schema, ret)
	return c.err()
}

func (c *checker) checkFields(schema engine.MethodSchema, args map[string]engine.Argument, argTypes map[string]Type, supplied map[string]bool) {
	for _, f := range c.task.Inputs {
		if !f.CallKwarg() {
			continue
		}
		supplied[f.FieldID] = true
		field := fmt.Sprintf("field %q", f.FieldID)
		want, ok := fieldType(&f)
		if !ok {
			c.add(field, "a field kind ("+spec.FieldKindList()+")", fmt.Sprintf("kind %q", f.Kind))
			continue
		}
		a, ok := args[f.FieldID]
		if !ok {
			c.add(field, fmt.Sprintf("an argument %s: %s of %s", f.FieldID, want, c.method), "no such argument ("+argList(schema)+")")
			continue
		}
		_, hasDefault := c.task.DefaultCallKwargs[f.FieldID]
		hasDefault = hasDefault || f.Default != nil
		if !f.Required && !hasDefault && !a.HasDefault {
			c.add(field, fmt.Sprintf("a default for argument %s (the field is optional without a default, so a call may omit it)", a.Name),
				fmt.Sprintf("%s: %s without a default", a.Name, a.Type))
		}
		t, ok := argTypes[f.FieldID]
		if !ok {
			continue
		}
		if !accepts(t, want) {
			c.add(field, fmt.Sprintf("argument %s of type %s (field kind %s)", a.Name, want, f.Kind), fmt.Sprintf("%s: %s", a.Name, a.Type))
		}
	}
}

// checkArgumentKeys checks each tensor_dict field against the keys the
// method's code reads from its argument, when the code shows them all
// (MethodReturns.ArgumentKeys): each is a key the field declares (a key it
// does not declare can never be passed, and reading it fails the call).
// Whether a key is required is the manifest's to say: the code may read
// it on some paths only.
func (c *checker) checkArgumentKeys(ret *MethodReturns) {
	if ret == nil {
		return
	}
	for i := range c.task.Inputs {
		f := &c.task.Inputs[i]
		keys, ok := ret.ArgumentKeys[f.FieldID]
		if !ok || !f.CallKwarg() || f.Kind.Form() != spec.FormDict {
			continue
		}
		for _, key := range keys {
			if _, ok := f.PartOf(key); !ok {
				c.add(fmt.Sprintf("field %q", f.FieldID), fmt.Sprintf("a part named %q (%s reads %s[%q])", key, c.method, f.FieldID, key), "parts "+f.PartList())
			}
		}
	}
}

func (c *checker) checkReturn(schema engine.MethodSchema, ret *MethodReturns) {
	outs := c.task.Outputs
	rt, err := returnType(schema)
	if err != nil {
		c.add("return", "a TorchScript type", err.Error())
		return
	}
	inner := rt
	for inner.Name == "Optional" {
		inner = inner.Elems[0]
	}
	positions, explicit := c.task.ArtifactPositions()
	switch {
	case tupleArtifacts(c.task, inner):
		c.checkTuple(rt, inner, positions, explicit)
	case explicit:
		c.add("return", fmt.Sprintf("a Tuple whose elements are %s (the artifacts give tuple positions)", artifactList(outs)), rt.String())
	case inner.Name == "Dict" && !c.task.RecordReturned():
		if !accepts(inner.Elems[0], Type{Name: "str"}) {
			c.add("return", "Dict[str, ...] keyed by artifact_id", rt.String())
			return
		}
		for _, a := range outs {
			if !artifactAccepts(inner.Elems[1], a.Kind) {
				c.add(fmt.Sprintf("artifact %q", a.ArtifactID), fmt.Sprintf("dict values for artifact kind %s (%s)", a.Kind, artifactNeeds(a.Kind)),
					fmt.Sprintf("values of type %s (return %s)", inner.Elems[1], rt))
			}
		}
		c.checkKeys(ret)
	case inner.Name == "NoneType":
		if len(outs) > 0 {
			c.add("return", fmt.Sprintf("a value for %s", artifactList(outs)), "NoneType (the method returns nothing)")
		}
	case len(outs) != 1:
		c.add("return", fmt.Sprintf("Dict[str, ...] keyed by artifact_id for %s", artifactList(outs)), fmt.Sprintf("%s (one value)", rt))
	case !artifactAccepts(inner, outs[0].Kind):
		c.add(fmt.Sprintf("artifact %q", outs[0].ArtifactID), fmt.Sprintf("a return type for artifact kind %s (%s)", outs[0].Kind, artifactNeeds(outs[0].Kind)),
			rt.String())
	}
}

// checkTuple checks the artifacts of a method returning a tuple (inner,
// rt without Optional): each is the element at its position, of a type
// its kind holds; without positions, the tuple has one element per
// artifact, a nested tuple's elements counting as elements
// (tupleElements).
func (c *checker) checkTuple(rt, inner Type, positions []int, explicit bool) {
	outs := c.task.Outputs
	leaves := tupleElements(inner, explicit)
	of := fmt.Sprintf("%s, a Tuple of %d", rt, len(leaves))
	if len(leaves) != len(inner.Elems) {
		of = fmt.Sprintf("%s, %d elements with its nested tuples'", rt, len(leaves))
	}
	if !explicit && len(outs) != len(leaves) {
		c.add("return", fmt.Sprintf("a Tuple of %d, one element per artifact in order, for %s (or positions on the artifacts)", len(outs), artifactList(outs)), of)
		return
	}
	for i := range outs {
		a := &outs[i]
		p := positions[i]
		if p >= len(leaves) {
			c.add(fmt.Sprintf("artifact %q", a.ArtifactID), fmt.Sprintf("element %d of the tuple %s returns", p, c.method), of)
			continue
		}
		if e := leaves[p].Type; !artifactAccepts(e, a.Kind) {
			c.add(fmt.Sprintf("artifact %q", a.ArtifactID), fmt.Sprintf("tuple element %d of a type for artifact kind %s (%s)", p, a.Kind, artifactNeeds(a.Kind)),
				fmt.Sprintf("%s (return %s)", e, rt))
		}
	}
}

// returnType is the type a method returns: its schema's one return type,
// NoneType for none, a Tuple of several.
func returnType(schema engine.MethodSchema) (Type, error) {
	switch len(schema.Returns) {
	case 0:
		return Type{Name: "NoneType"}, nil
	case 1:
		return ParseType(schema.Returns[0])
	}
	rt := Type{Name: "Tuple"}
	for _, r := range schema.Returns {
		t, err := ParseType(r)
		if err != nil {
			return Type{}, err
		}
		rt.Elems = append(rt.Elems, t)
	}
	return rt, nil
}

// checkKeys checks that every required artifact is a key the method's
// returned dict can hold, when its code shows them all.
func (c *checker) checkKeys(ret *MethodReturns) {
	if ret == nil || !ret.Complete {
		return
	}
	have := map[string]bool{}
	keys := make([]string, len(ret.Keys))
	for i, k := range ret.Keys {
		have[k.Name] = true
		keys[i] = strconv.Quote(k.Name)
	}
	found := "no keys"
	if len(keys) > 0 {
		found = "only the keys " + strings.Join(keys, ", ")
	}
	for _, a := range c.task.Outputs {
		if a.Required && !have[a.ArtifactID] {
			c.add(fmt.Sprintf("artifact %q", a.ArtifactID), fmt.Sprintf("a key %q in the dict %s returns (the artifact is required)", a.ArtifactID, c.method),
				found+" (every key the method's TorchScript code can return)")
		}
	}
}

func (c *checker) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return &MismatchError{Task: c.task.TaskID, Method: c.method, Problems: c.problems, task: c.task}
}

// fieldType is the TorchScript type a field is passed as (its kind's; a
// tuple's has one element per part).
func fieldType(f *spec.InferenceFieldSpec) (Type, bool) {
	s := f.TorchScriptType()
	if s == "" {
		return Type{}, false
	}
	t, err := ParseType(s)
	return t, err == nil
}

// accepts reports whether an argument of type arg accepts a value of type v.
func accepts(arg, v Type) bool {
	switch arg.Name {
	case "Any":
		return true
	case "Optional":
		return v.Name == "NoneType" || accepts(arg.Elems[0], v)
	case "Union":
		for _, m := range arg.Elems {
			if accepts(m, v) {
				return true
			}
		}
		return false
	case "number":
		return v.Name == "int" || v.Name == "float" || v.Name == "number" || v.Name == "bool"
	case "float":
		return v.Name == "float" || v.Name == "int"
	case "Device":
		return v.Name == "Device" || v.Name == "str"
	case "List":
		return v.Name == "List" && accepts(arg.Elems[0], v.Elems[0])
	case "Dict":
		return v.Name == "Dict" && accepts(arg.Elems[0], v.Elems[0]) && accepts(arg.Elems[1], v.Elems[1])
	case "Tuple":
		if v.Name != "Tuple" || len(v.Elems) != len(arg.Elems) {
			return false
		}
		for i := range arg.Elems {
			if !accepts(arg.Elems[i], v.Elems[i]) {
				return false
			}
		}
		return true
	}
	return len(arg.Elems) == 0 && len(v.Elems) == 0 && arg.Name == v.Name
}

// artifactAccepts reports whether a returned value of type t can be an
// artifact of the kind.
func artifactAccepts(t Type, kind spec.ArtifactKind) bool {
	switch t.Name {
	case "Any":
		return true
	case "Optional":
		return artifactAccepts(t.Elems[0], kind)
	case "Union":
		for _, m := range t.Elems {
			if artifactAccepts(m, kind) {
				return true
			}
		}
		return false
	}
	switch kind.Holds() {
	case spec.HoldsTensor:
		return t.Name == "Tensor"
	case spec.HoldsText:
		return t.Name == "str"
	case spec.HoldsJSON:
		return jsonable(t, 0)
	case spec.HoldsTensorList:
		return t.Name == "List" && len(t.Elems) == 1 && t.Elems[0].Name == "Tensor"
	case spec.HoldsRecord:
		return tensorDict(t)
	case spec.HoldsRecordList:
		return t.Name == "List" && len(t.Elems) == 1 && tensorDict(t.Elems[0])
	}
	return false
}

// tensorDict reports whether t is Dict[str, Tensor], what one dict of a
// record artifact is.
func tensorDict(t Type) bool {
	return t.Name == "Dict" && len(t.Elems) == 2 && t.Elems[0].Name == "str" && t.Elems[1].Name == "Tensor"
}

func jsonable(t Type, depth int) bool {
	if depth > maxTypeDepth {
		return false
	}
	switch t.Name {
	case "str", "int", "float", "bool", "number", "NoneType", "Any":
		return true
	case "Dict":
		return t.Elems[0].Name == "str" && jsonable(t.Elems[1], depth+1)
	case "List", "Optional", "Tuple", "Union":
		for _, e := range t.Elems {
			if !jsonable(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

func artifactNeeds(kind spec.ArtifactKind) string {
	if info, ok := kind.Info(); ok {
		return info.Returns
	}
	return "a known artifact kind: " + spec.ArtifactKindList()
}

// valueMismatch says why a manifest value does not suit an argument type, or
// returns "" when it does.
func valueMismatch(t Type, v any) string {
	if valueAccepts(t, reflect.ValueOf(v), 0) {
		return ""
	}
	if f, ok := v.(float64); ok && t.Name == "int" && f == math.Trunc(f) {
		return describeValue(v) + " (write an integer literal for an int argument)"
	}
	return describeValue(v)
}

func valueAccepts(t Type, v reflect.Value, depth int) bool {
	if depth > maxTypeDepth {
		return false
	}
	// Look through interfaces and pointers (a *Tensor is a value itself).
	for v.IsValid() && (v.Kind() == reflect.Interface || (v.Kind() == reflect.Pointer && v.Type() != tensorType)) {
		if v.IsNil() {
			v = reflect.Value{}
			break
		}
		v = v.Elem()
	}
	switch t.Name {
	case "Any":
		return true
	case "Optional":
		return !v.IsValid() || valueAccepts(t.Elems[0], v, depth+1)
	case "Union":
		for _, m := range t.Elems {
			if valueAccepts(m, v, depth+1) {
				return true
			}
		}
		return false
	case "NoneType":
		return !v.IsValid()
	}
	if !v.IsValid() {
		return false
	}
	switch t.Name {
	case "str":
		return v.Kind() == reflect.String
	case "bool":
		return v.Kind() == reflect.Bool
	case "int":
		return isInt(v)
	case "float":
		return isInt(v) || isFloat(v)
	case "number":
		return isInt(v) || isFloat(v) || v.Kind() == reflect.Bool
	case "Device":
		return v.Kind() == reflect.String
	case "Tensor":
		return v.Type() == tensorType && !v.IsNil()
	case "List":
		if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
			return false
		}
		for i := range v.Len() {
			if !valueAccepts(t.Elems[0], v.Index(i), depth+1) {
				return false
			}
		}
		return true
	case "Tuple":
		if (v.Kind() != reflect.Slice && v.Kind() != reflect.Array) || v.Len() != len(t.Elems) {
			return false
		}
		for i := range v.Len() {
			if !valueAccepts(t.Elems[i], v.Index(i), depth+1) {
				return false
			}
		}
		return true
	case "Dict":
		if v.Kind() != reflect.Map || v.Type().Key().Kind() != reflect.String || t.Elems[0].Name != "str" {
			return false
		}
		for _, k := range v.MapKeys() {
			if !valueAccepts(t.Elems[1], v.MapIndex(k), depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

func isInt(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func isFloat(v reflect.Value) bool { return v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64 }

func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case string:
		return fmt.Sprintf("str %q", x)
	case float64, float32:
		return fmt.Sprintf("float %v", x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("int %v", x)
	case bool:
		return fmt.Sprintf("bool %v", x)
	case *tensor.Tensor:
		return "a tensor"
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		return fmt.Sprintf("a list %v", v)
	case reflect.Map:
		return fmt.Sprintf("a dict %v", v)
	}
	return fmt.Sprintf("a %T", v)
}

func argList(s engine.MethodSchema) string {
	if len(s.Arguments) == 0 {
		return "the method takes no arguments"
	}
	parts := make([]string, len(s.Arguments))
	for i, a := range s.Arguments {
		parts[i] = a.Name + ": " + a.Type
	}
	return "arguments: " + strings.Join(parts, ", ")
}

func artifactList(outs []spec.InferenceArtifactSpec) string {
	if len(outs) == 0 {
		return "no artifacts"
	}
	ids := make([]string, len(outs))
	for i, a := range outs {
		ids[i] = fmt.Sprintf("%q", a.ArtifactID)
	}
	word := "artifacts"
	if len(outs) == 1 {
		word = "artifact"
	}
	return fmt.Sprintf("%d %s (%s)", len(outs), word, strings.Join(ids, ", "))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
