package contract

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
)

// CheckCallSpec checks a task, run through variant (nil for none), against
// the call spec of a compiled checkpoint (an AOTInductor package,
// engine.CallSpecModule), where CheckLoaded checks a TorchScript method.
// The rules:
//
//   - The task runs "forward", the package's one call.
//   - Every call_kwargs field is a tensor input of the package, of kind
//     tensor, image or video, required (the package takes every input on
//     every call). A field naming an argument the export baked in as a
//     constant is a problem: no value of the field could change it.
//   - Every tensor input of the package is a call_kwargs field.
//   - A batchable task names its batch dimension (batching.dim): the
//     package takes the batch on every call, so a single call runs as a
//     batch of one.
//   - A default_call_kwargs (or variant call_kwargs) key that is not a
//     field names a baked-in constant and restates its value.
//   - The package returns one tensor (a task with exactly one artifact) or a
//     dict of tensors keyed by artifact_id (every required artifact one of
//     its keys); a tuple is a problem. Artifacts are tensor-like kinds.
//   - Where fields and artifacts declare a dtype, it is the package's; where
//     they declare a shape, it has the package's rank, its fixed sizes, and
//     named dimensions that bind consistently to the package's dimensions
//     across the task (a size within a dynamic dimension's exported range
//     for a fixed manifest size). A stacked field of a batchable task whose
//     shape does not start with batching.dim declares each item's shape: the
//     package's has the batch dimension in front.
//   - A named dimension the task constrains (dims) can take a size within
//     the package's range for it.
//
// A streaming task also supplies the reserved arguments (ArgNumFrames,
// ArgControls, ArgState) among the package's inputs, as CheckLoaded. A
// mismatch is a *MismatchError (method "forward") listing every problem;
// it matches ErrMismatch.
func CheckCallSpec(task *wfspec.InferenceTaskProfile, variant *wfspec.InferenceVariantSpec, spec engine.CallSpec) error {
	if task == nil {
		return errors.New("contract: nil task")
	}
	var args []string
	for _, in := range spec.Tensors() {
		args = append(args, in.Name)
	}
	task = asCalled(task, args)
	c := &checker{task: task, method: task.MethodName()}
	if c.method != wfspec.DefaultMethod {
		c.add("method", fmt.Sprintf("%q, the one call a compiled package runs", wfspec.DefaultMethod), fmt.Sprintf("method %q", c.method))
		return c.err()
	}
	s := &specChecker{checker: c, spec: &spec, bound: map[string]binding{}}
	if b := task.Batching; b != nil && b.Dim == "" {
		c.add("batching", "dim naming the batch dimension (a compiled package takes the batch in front of its inputs on every call, so a single call must run as a batch of one)",
			"batching without dim")
	}
	supplied := map[string]bool{}
	for _, f := range task.Inputs {
		if !f.CallKwarg() {
			continue
		}
		supplied[f.FieldID] = true
		s.field(&f)
	}
	for _, in := range spec.Tensors() {
		if supplied[in.Name] {
			continue
		}
		found := "no field"
		if f, ok := task.Field(in.Name); ok {
			found = fmt.Sprintf("field %q with target %s", f.FieldID, f.Target)
		}
		c.add(fmt.Sprintf("input %q", in.Name), fmt.Sprintf("a call_kwargs field %q of kind tensor, image or video (the package takes %s on every call)", in.Name, in), found)
	}
	s.kwargs("default_call_kwargs", task.DefaultCallKwargs)
	if variant != nil {
		s.kwargs("call_kwargs", variant.CallKwargs)
	}
	s.outputs()
	s.dims()
	return c.err()
}

// binding is the package dimension a manifest dimension name took, and where.
type binding struct {
	dim wfspec.Dim
	by  string
}

type specChecker struct {
	*checker
	spec  *engine.CallSpec
	bound map[string]binding
}

func (s *specChecker) field(f *wfspec.InferenceFieldSpec) {
	name := fmt.Sprintf("field %q", f.FieldID)
	in, ok := s.spec.Input(f.FieldID)
	switch {
	case !ok:
		s.add(name, fmt.Sprintf("an input %s of the package", f.FieldID), "no such input (inputs: "+s.spec.InputList()+")")
		return
	case in.Constant:
		s.add(name, "a tensor input of the package",
			fmt.Sprintf("argument %s baked in at export as the constant %v, which no field can change: remove the field, or export with %s as a tensor input",
				in.Name, describeValue(in.Value), in.Name))
		return
	}
	if !f.Kind.Stacked() {
		s.add(name, fmt.Sprintf("a field of kind tensor, image or video for input %s", in), fmt.Sprintf("kind %s", f.Kind))
		return
	}
	if !f.Required {
		s.add(name, fmt.Sprintf("a required field (the package takes %s on every call)", in), "an optional field")
	}
	if f.DType != "" && f.DType != in.DType {
		s.add(name, fmt.Sprintf("dtype %s (input %s)", in.DType, in), "dtype "+string(f.DType))
	}
	if f.Shape == nil {
		return
	}
	pkg := in.Shape
	if b := s.task.Batching; b != nil && f.IsStacked() && (b.Dim == "" || len(f.Shape) == 0 || string(f.Shape[0]) != b.Dim) && len(pkg) > 0 {
		pkg = pkg[1:] // the field declares each item; the package takes the batch
	}
	s.shape(name, f.Shape, pkg, in.String())
}

// shape checks a declared shape against the package's, binding named
// dimensions.
func (s *specChecker) shape(name string, declared, pkg wfspec.Shape, what string) {
	if len(declared) != len(pkg) {
		s.add(name, fmt.Sprintf("a shape of rank %d (%s)", len(pkg), what), fmt.Sprintf("shape %s", declared))
		return
	}
	for i, m := range declared {
		p := pkg[i]
		switch {
		case m == wfspec.Wildcard || p == wfspec.Wildcard:
		case !m.Named():
			n, _ := m.Size()
			if why := s.fits(n, p); why != "" {
				s.add(name, fmt.Sprintf("dimension %d %s (%s)", i, why, what), fmt.Sprintf("shape %s", declared))
			}
		default:
			b, ok := s.bound[string(m)]
			if !ok {
				s.bound[string(m)] = binding{p, name}
				continue
			}
			if b.dim != p {
				s.add(name, fmt.Sprintf("dimension %s to be the package's %s, as for %s (%s)", m, b.dim, b.by, what),
					fmt.Sprintf("the package's %s at dimension %d", p, i))
			}
		}
	}
}

// fits says why fixed size n cannot be package dimension p, or "".
func (s *specChecker) fits(n int64, p wfspec.Dim) string {
	if k, fixed := p.Size(); fixed {
		if k != n {
			return fmt.Sprintf("of size %d", k)
		}
		return ""
	}
	if r := s.spec.Dims[string(p)]; !r.Contains(n) {
		return fmt.Sprintf("within %s's exported range %s", p, r)
	}
	return ""
}

func (s *specChecker) kwargs(label string, m map[string]any) {
	for _, k := range sortedKeys(m) {
		if f, ok := s.task.Field(k); ok && f.CallKwarg() {
			continue // a default of a field, checked with the field
		}
		name := fmt.Sprintf("%s %q", label, k)
		in, ok := s.spec.Input(k)
		switch {
		case !ok:
			s.add(name, "an input of the package", "no such input (inputs: "+s.spec.InputList()+")")
		case !in.Constant:
			s.add(name, fmt.Sprintf("a field for input %s (a manifest value is no tensor)", in), describeValue(m[k]))
		case !in.Restates(m[k]):
			s.add(name, fmt.Sprintf("%v, the value the export baked in (the package cannot take another)", describeValue(in.Value)), describeValue(m[k]))
		}
	}
}

func (s *specChecker) outputs() {
	outs := s.task.Outputs
	names := make([]string, len(s.spec.Outputs))
	for i, o := range s.spec.Outputs {
		names[i] = strconv.Quote(o.Name)
	}
	if _, explicit := s.task.ArtifactPositions(); explicit {
		s.add("return", "artifacts without tuple positions (a package's outputs are one tensor or a dict of them)", "artifacts with positions")
		return
	}
	switch s.spec.Returns {
	case engine.ReturnsTensor:
		if len(outs) != 1 {
			s.add("return", fmt.Sprintf("a dict of tensors keyed by artifact_id for %s", artifactList(outs)), "one tensor")
			return
		}
		s.artifact(&outs[0], s.spec.Outputs[0])
	case engine.ReturnsDict:
		for i := range outs {
			a := &outs[i]
			j := slices.IndexFunc(s.spec.Outputs, func(o engine.CallOutput) bool { return o.Name == a.ArtifactID })
			if j < 0 {
				if a.Required {
					s.add(fmt.Sprintf("artifact %q", a.ArtifactID), fmt.Sprintf("a key %q in the dict the package returns (the artifact is required)", a.ArtifactID),
						"only the keys "+strings.Join(names, ", "))
				}
				continue
			}
			s.artifact(a, s.spec.Outputs[j])
		}
	default:
		s.add("return", "one tensor, or a dict of tensors keyed by artifact_id (return one from forward before exporting)",
			fmt.Sprintf("a %s of %d tensors", s.spec.Returns, len(s.spec.Outputs)))
	}
}

func (s *specChecker) artifact(a *wfspec.InferenceArtifactSpec, o engine.CallOutput) {
	name := fmt.Sprintf("artifact %q", a.ArtifactID)
	what := wfspec.TensorContract{DType: o.DType, Shape: o.Shape}.String()
	if a.Kind.Holds() != wfspec.HoldsTensor {
		s.add(name, fmt.Sprintf("an artifact kind holding a tensor (the package returns %s)", what), "kind "+string(a.Kind))
		return
	}
	if a.DType != "" && a.DType != o.DType {
		s.add(name, fmt.Sprintf("dtype %s (the package returns %s)", o.DType, what), "dtype "+string(a.DType))
	}
	if a.Shape != nil {
		s.shape(name, a.Shape, o.Shape, "the package returns "+what)
	}
}

// dims checks the task's constraints of named dimensions against the
// ranges of the package dimensions they bound to.
func (s *specChecker) dims() {
	for _, name := range sortedKeys(anyMap(s.task.Dims)) {
		b, ok := s.bound[name]
		if !ok {
			continue
		}
		d := s.task.Dims[name]
		if n, fixed := b.dim.Size(); fixed {
			if why := d.Check(n); why != "" {
				s.add(fmt.Sprintf("dims %q", name), fmt.Sprintf("a constraint the package's size %d meets (%s binds it)", n, b.by), why)
			}
			continue
		}
		r, ok := s.spec.Dims[string(b.dim)]
		if !ok {
			continue
		}
		lo, hi := r.Min, r.Max
		if d.Minimum != nil && *d.Minimum > lo {
			lo = *d.Minimum
		}
		if d.Maximum != nil && (hi == 0 || *d.Maximum < hi) {
			hi = *d.Maximum
		}
		if hi != 0 && lo > hi {
			s.add(fmt.Sprintf("dims %q", name), fmt.Sprintf("sizes the package takes: %s is %s (%s binds it)", b.dim, r, b.by),
				describeDimSpec(d))
		}
	}
}

func describeDimSpec(d wfspec.DimSpec) string {
	var parts []string
	if d.Minimum != nil {
		parts = append(parts, fmt.Sprintf("minimum %d", *d.Minimum))
	}
	if d.Maximum != nil {
		parts = append(parts, fmt.Sprintf("maximum %d", *d.Maximum))
	}
	return strings.Join(parts, ", ")
}

func anyMap[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// BatchRange returns the batch sizes a compiled package takes for a
// batchable task: the range of the leading dimension of the input its first
// stacked field feeds (a fixed size n is the range [n, n]). ok is false
// when the task is not batchable or that dimension is not known.
func BatchRange(task *wfspec.InferenceTaskProfile, spec engine.CallSpec) (r engine.DimRange, ok bool) {
	if task == nil || task.Batching == nil {
		return r, false
	}
	for _, f := range task.Inputs {
		if !f.IsStacked() {
			continue
		}
		in, found := spec.Input(f.FieldID)
		if !found || in.Constant || len(in.Shape) == 0 {
			continue
		}
		d := in.Shape[0]
		if n, fixed := d.Size(); fixed {
			return engine.DimRange{Min: n, Max: n}, true
		}
		r, ok = spec.Dims[string(d)]
		return r, ok
	}
	return r, false
}
