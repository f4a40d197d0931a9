package torch

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// CallSpecKey is the metadata key under which examples/aoti/export.py
// records the call spec in an AOTInductor package (engine.CallSpecKey).
const CallSpecKey = engine.CallSpecKey

// errNoCallSpec is the load error of a package exported without the call
// spec: a compiled model does not check its inputs, so the engine must.
var errNoCallSpec = engine.ErrNoCallSpec

// treeSpec is one node of a torch.utils._pytree treespec as
// treespec_dumps writes it: a leaf has no type.
type treeSpec struct {
	Type     *string    `json:"type"`
	Context  string     `json:"context"`
	Children []treeSpec `json:"children_spec"`
}

func (t *treeSpec) leaf() bool { return t.Type == nil }

func (t *treeSpec) typeName() string {
	if t.Type == nil {
		return "leaf"
	}
	return *t.Type
}

// kind is "tuple", "dict" or "" for another node type.
func (t *treeSpec) kind() string {
	switch t.typeName() {
	case "builtins.tuple", "builtins.list", "torch.fx.immutable_collections.immutable_list":
		return "tuple"
	case "builtins.dict", "collections.OrderedDict", "torch.fx.immutable_collections.immutable_dict":
		return "dict"
	}
	return ""
}

// keys returns a dict node's keys (its context, a JSON list of strings).
func (t *treeSpec) keys() ([]string, error) {
	var keys []any
	if err := json.Unmarshal([]byte(t.Context), &keys); err != nil {
		return nil, fmt.Errorf("dict context %q: %w", t.Context, err)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		s, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string", k)
		}
		out[i] = s
	}
	if len(out) != len(t.Children) {
		return nil, fmt.Errorf("dict has %d keys for %d values", len(out), len(t.Children))
	}
	return out, nil
}

// parseTreeSpec reads a treespec_dumps JSON document ([version, node]).
func parseTreeSpec(s string) (treeSpec, error) {
	var doc []json.RawMessage
	if err := json.Unmarshal([]byte(s), &doc); err != nil || len(doc) != 2 {
		return treeSpec{}, fmt.Errorf("not a pytree treespec ([version, node]): %.80q", s)
	}
	var version int
	if err := json.Unmarshal(doc[0], &version); err != nil || version != 1 {
		return treeSpec{}, fmt.Errorf("pytree treespec version %s, want 1", doc[0])
	}
	var root treeSpec
	if err := json.Unmarshal(doc[1], &root); err != nil {
		return treeSpec{}, fmt.Errorf("pytree treespec: %w", err)
	}
	return root, nil
}

// flatLeaves checks that every child of a tuple or dict node is a leaf;
// what names the children in messages ("positional argument", "output").
func flatLeaves(t *treeSpec, what string, names []string) error {
	for i := range t.Children {
		c := &t.Children[i]
		if c.leaf() {
			continue
		}
		name := strconv.Itoa(i)
		if i < len(names) {
			name = strconv.Quote(names[i])
		}
		return fmt.Errorf("%s %s is a nested %s: wfgen passes one tensor per argument and returns one tensor per output (flatten it in forward before exporting)",
			what, name, c.typeName())
	}
	return nil
}

// aotiPackage is what an AOTInductor package says about itself at load.
type aotiPackage struct {
	spec   engine.CallSpec
	device string // the device it was compiled for: "cpu" or "cuda"
}

// packageInfo reads the info dict wf_aoti_load returns: the pytree call
// spec, the number of compiled inputs and the metadata with the recorded
// call spec, and checks that they agree.
func packageInfo(info map[string]any) (aotiPackage, error) {
	str := func(k string) string { s, _ := info[k].(string); return s }
	p := aotiPackage{device: str("metadata.AOTI_DEVICE_KEY")}
	spec, err := engine.DecodeCallSpec(str("metadata." + CallSpecKey))
	if err != nil {
		return p, err
	}
	p.spec = spec
	in, err := parseTreeSpec(str("in_spec"))
	if err != nil {
		return p, fmt.Errorf("the package's input spec: %w", err)
	}
	out, err := parseTreeSpec(str("out_spec"))
	if err != nil {
		return p, fmt.Errorf("the package's output spec: %w", err)
	}
	if err := checkInputs(&p.spec, &in); err != nil {
		return p, err
	}
	if n, err := strconv.Atoi(str("num_inputs")); err != nil || n != len(p.spec.Tensors()) {
		return p, fmt.Errorf("the compiled model takes %s tensor inputs, but the recorded call spec has %d (%s)",
			str("num_inputs"), len(p.spec.Tensors()), p.spec.InputList())
	}
	if err := checkOutputs(&p.spec, &out); err != nil {
		return p, err
	}
	return p, p.spec.Check()
}

// checkInputs checks the recorded inputs against the pytree input spec:
// (args, kwargs) of leaves, the positional ones first, the keywords in order.
func checkInputs(spec *engine.CallSpec, in *treeSpec) error {
	if in.kind() != "tuple" || len(in.Children) != 2 || in.Children[0].kind() != "tuple" || in.Children[1].kind() != "dict" {
		return fmt.Errorf("the package's input spec is a %s, want a tuple (args, kwargs)", in.typeName())
	}
	args, kwargs := &in.Children[0], &in.Children[1]
	keys, err := kwargs.keys()
	if err != nil {
		return fmt.Errorf("the package's keyword arguments: %w", err)
	}
	var posNames, kwNames []string
	seen := map[string]bool{}
	ordered := true
	for _, x := range spec.Inputs {
		if x.Name == "" || seen[x.Name] {
			return fmt.Errorf("the recorded call spec has an input named %q twice or without a name", x.Name)
		}
		seen[x.Name] = true
		if x.Keyword {
			kwNames = append(kwNames, x.Name)
		} else {
			posNames = append(posNames, x.Name)
			ordered = ordered && len(kwNames) == 0
		}
	}
	if !ordered || len(posNames) != len(args.Children) || !slices.Equal(kwNames, keys) {
		return fmt.Errorf("the recorded call spec (%s) does not match the package's inputs: %d positional, keywords %q",
			spec.InputList(), len(args.Children), keys)
	}
	if err := flatLeaves(args, "positional argument", posNames); err != nil {
		return err
	}
	return flatLeaves(kwargs, "keyword argument", keys)
}

// checkOutputs checks the recorded outputs against the pytree output spec.
func checkOutputs(spec *engine.CallSpec, out *treeSpec) error {
	names := make([]string, len(spec.Outputs))
	for i, o := range spec.Outputs {
		names[i] = o.Name
	}
	mismatch := func(what string) error {
		return fmt.Errorf("the recorded call spec returns %s %q, but the package returns %s", spec.Returns, names, what)
	}
	switch {
	case out.leaf():
		if spec.Returns != engine.ReturnsTensor || len(names) != 1 {
			return mismatch("one tensor")
		}
	case out.kind() == "tuple":
		if spec.Returns != engine.ReturnsTuple || len(names) != len(out.Children) {
			return mismatch(fmt.Sprintf("a tuple of %d", len(out.Children)))
		}
		return flatLeaves(out, "output", names)
	case out.kind() == "dict":
		keys, err := out.keys()
		if err != nil {
			return fmt.Errorf("the package's outputs: %w", err)
		}
		if spec.Returns != engine.ReturnsDict || !slices.Equal(keys, names) {
			return mismatch(fmt.Sprintf("a dict with keys %q", keys))
		}
		return flatLeaves(out, "output", names)
	default:
		return fmt.Errorf("the package returns a %s: wfgen takes a tensor, a tuple or a dict of tensors", out.typeName())
	}
	return nil
}

// checkLoadDType refuses a load dtype other than the package's floating
// dtype (the one its floating inputs, else outputs, have).
func checkLoadDType(spec *engine.CallSpec, want tensor.DType) error {
	if want == "" {
		return nil
	}
	var have tensor.DType
	for _, in := range spec.Inputs {
		if !in.Constant && in.DType.IsFloating() {
			have = in.DType
			break
		}
	}
	for _, o := range spec.Outputs {
		if have == "" && o.DType.IsFloating() {
			have = o.DType
		}
	}
	if have != "" && have != want {
		return fmt.Errorf("dtype %s: the package was compiled for %s and cannot be cast; load it with %s or without a dtype", want, have, have)
	}
	return nil
}

// bindInputs checks a call's keyword arguments against the call spec and
// returns the tensors the compiled call takes, in order: every tensor input
// given as a tensor of its dtype and shape, the named dimensions agreeing
// across inputs and within their exported range. A baked-in constant may
// be given only with its value (a default call kwarg restating it); any
// other argument is an error naming the inputs.
func bindInputs(spec *engine.CallSpec, kwargs map[string]any) ([]*tensor.Tensor, error) {
	for k, v := range kwargs {
		in, ok := spec.Input(k)
		switch {
		case !ok:
			return nil, fmt.Errorf("unexpected argument %q (inputs: %s)", k, spec.InputList())
		case in.Constant && !in.Restates(v):
			return nil, fmt.Errorf("argument %q was baked into the package at export as %v; it cannot be %v (re-export to change it)",
				k, in.Value, describe(v))
		}
	}
	dims := map[string]int64{}
	by := map[string]string{}
	var out []*tensor.Tensor
	for _, in := range spec.Inputs {
		if in.Constant {
			continue
		}
		v, ok := kwargs[in.Name]
		if !ok {
			return nil, fmt.Errorf("missing input %q (%s)", in.Name, in)
		}
		t, ok := v.(*tensor.Tensor)
		if !ok || t == nil {
			return nil, fmt.Errorf("input %q must be a tensor (%s), not %s", in.Name, in, describe(v))
		}
		got := fmt.Sprintf("%s%v", t.DType, t.Shape)
		if t.DType != in.DType || len(t.Shape) != len(in.Shape) {
			return nil, fmt.Errorf("input %q: want %s, got %s", in.Name, in, got)
		}
		for i, d := range in.Shape {
			n := t.Shape[i]
			if size, fixed := d.Size(); fixed {
				if n != size {
					return nil, fmt.Errorf("input %q: want %s, got %s (dimension %d)", in.Name, in, got, i)
				}
				continue
			}
			if !d.Named() {
				continue
			}
			name := string(d)
			if r := spec.Dims[name]; !r.Contains(n) {
				return nil, fmt.Errorf("input %q: dimension %s is %d, outside the range %s the package was exported for", in.Name, name, n, r)
			}
			if prev, ok := dims[name]; ok && prev != n {
				return nil, fmt.Errorf("input %q: dimension %s is %d, but input %q has %d", in.Name, name, n, by[name], prev)
			}
			dims[name], by[name] = n, in.Name
		}
		out = append(out, t)
	}
	return out, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case *tensor.Tensor:
		if x == nil {
			return "a nil tensor"
		}
		return fmt.Sprintf("a %s%v tensor", x.DType, x.Shape)
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// assembleOutputs puts the compiled call's output tensors back into the
// structure the package returns: one tensor, a tuple ([]any) or a dict.
func assembleOutputs(spec *engine.CallSpec, v any) (any, error) {
	list, ok := v.([]any)
	if !ok || len(list) != len(spec.Outputs) {
		return nil, fmt.Errorf("the package returned %T with %d values, want %d tensors", v, len(list), len(spec.Outputs))
	}
	switch spec.Returns {
	case engine.ReturnsTensor:
		return list[0], nil
	case engine.ReturnsDict:
		m := make(map[string]any, len(list))
		for i, o := range spec.Outputs {
			m[o.Name] = list[i]
		}
		return m, nil
	}
	return list, nil
}
