package importer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/artifactio"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// BatchDim is the name import gives the batch dimension of batched examples
// (Options.Batched).
const BatchDim = "N"

// Example is an example value of a Tensor argument (wfgen import
// --example NAME=FILE.npy). Its dtype becomes the field's dtype and its
// sizes the field's shape, with the first one named BatchDim when the
// examples are batched.
type Example struct {
	// File names the example in the skeleton's comments.
	File string
	// Tensor is the value; Skeleton reads only its dtype and shape, Import
	// also passes it to the method to learn the outputs' dtypes and shapes.
	// For a List[Tensor] argument it is the list's first item.
	Tensor *tensor.Tensor
	// More are the further items of a List[Tensor] argument's example, in
	// order (--example ARG=A.npy --example ARG=B.npy), with their files;
	// a Tensor argument has one example.
	More []Example
}

// Items returns the example's tensors: Tensor, then More's.
func (e Example) Items() []*tensor.Tensor {
	out := []*tensor.Tensor{e.Tensor}
	for _, m := range e.More {
		out = append(out, m.Tensor)
	}
	return out
}

// Add returns e with next as its list's next item (a repeated --example
// of a List[Tensor] argument).
func (e Example) Add(next Example) Example {
	e.More = append(slices.Clone(e.More), next)
	return e
}

// listContract is the dtype and shape the items of a List[Tensor]
// argument's example share: the dtype when all have it, and when all have
// the same rank a shape with each size they agree on and "*" where they
// differ; nil when the ranks differ.
func listContract(items []*tensor.Tensor) (dtype tensor.DType, shape spec.Shape) {
	dtype = items[0].DType
	for _, t := range items[1:] {
		if t.DType != dtype {
			dtype = ""
		}
		if len(t.Shape) != len(items[0].Shape) {
			return dtype, nil
		}
	}
	shape = exampleShape(items[0].Shape, false)
	for _, t := range items[1:] {
		for i, n := range t.Shape {
			if n != items[0].Shape[i] {
				shape[i] = "*"
			}
		}
	}
	return dtype, shape
}

// ReadExample parses a --example argument, "NAME=FILE.npy", and reads the
// NumPy file (float32, float16, int64, int32, uint8 or bool; see
// artifactio.DecodeNPY).
func ReadExample(arg string) (string, Example, error) {
	name, file, ok := strings.Cut(arg, "=")
	if !ok || name == "" || file == "" {
		return "", Example{}, fmt.Errorf("--example %q: want NAME=FILE.npy (an argument name and a NumPy file)", arg)
	}
	if !isIdent(name) {
		return "", Example{}, fmt.Errorf("--example %q: %q is not an argument name", arg, name)
	}
	t, err := artifactio.ReadNPY(file)
	if err != nil {
		return "", Example{}, fmt.Errorf("--example %s: %w", name, err)
	}
	return name, Example{File: file, Tensor: t}, nil
}

// checkExamples checks that every example names a Tensor argument of some
// method, and, when batched, that each method's examples agree on a
// leading batch size and include a required argument to batch along. It
// returns the batch size per method that takes examples.
func checkExamples(methods []engine.MethodSchema, opts Options) (map[string]int64, error) {
	batch := map[string]int64{}
	names := make([]string, 0, len(opts.Examples))
	for n := range opts.Examples {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ex := opts.Examples[n]
		if !isIdent(n) || reserved[n] {
			return nil, fmt.Errorf("--example %s: %q cannot be a field id (a keyword-argument name)", n, n)
		}
		if ex.Tensor == nil {
			return nil, fmt.Errorf("--example %s: no tensor", n)
		}
		for i, t := range ex.Items() {
			if t == nil {
				return nil, fmt.Errorf("--example %s: item %d: no tensor", n, i)
			}
			if err := t.Check(); err != nil {
				return nil, fmt.Errorf("--example %s: %w", n, err)
			}
		}
		found := false
		for _, m := range methods {
			for _, a := range m.Arguments {
				if a.Name != n {
					continue
				}
				found = true
				kind, _, ok := FieldKind(a.Type)
				list := ok && kind.IsList() && kind.TensorLike()
				switch {
				case !ok || !kind.Stacked() && !list:
					return nil, fmt.Errorf("--example %s: argument %s of %s is %s; examples are for Tensor and List[Tensor] arguments", n, n, m.Name, a.Type)
				case !list && len(ex.More) > 0:
					return nil, fmt.Errorf("--example %s: argument %s of %s is %s, one tensor, and has %d examples; only a List[Tensor] argument takes several (its items, in order)", n, n, m.Name, a.Type, len(ex.More)+1)
				case list && opts.Batched:
					return nil, fmt.Errorf("--example %s: argument %s of %s is %s, which batching does not stack; import without --batched", n, n, m.Name, a.Type)
				}
				if !opts.Batched {
					continue
				}
				if len(ex.Tensor.Shape) == 0 {
					return nil, fmt.Errorf("--example %s: a scalar has no batch dimension (--batched: the first dimension of every example is the batch)", n)
				}
				size := ex.Tensor.Shape[0]
				if prev, ok := batch[m.Name]; ok && prev != size {
					return nil, fmt.Errorf("--batched: the examples of %s disagree on the batch size (first dimension): %d and %d (%s)", m.Name, prev, size, n)
				}
				batch[m.Name] = size
			}
		}
		if !found {
			var have []string
			for _, m := range methods {
				var args []string
				for _, a := range m.Arguments {
					args = append(args, a.Name)
				}
				have = append(have, fmt.Sprintf("%s(%s)", m.Name, strings.Join(args, ", ")))
			}
			return nil, fmt.Errorf("--example %s: no imported method has an argument %s (%s)", n, n, strings.Join(have, "; "))
		}
	}
	for _, m := range methods {
		if _, ok := batch[m.Name]; !ok {
			continue
		}
		required := false
		for _, a := range m.Arguments {
			_, has := opts.Examples[a.Name]
			required = required || has && !a.HasDefault
		}
		if !required {
			return nil, fmt.Errorf("--batched: %s takes no required Tensor argument with an example, so its items would share one call; give an example for a required one", m.Name)
		}
	}
	return batch, nil
}

// exampleShape is the declared shape of a field or artifact whose example
// value (or observed output) has the given sizes: the sizes, the first
// named BatchDim when the task is batched.
func exampleShape(sizes []int64, batched bool) spec.Shape {
	s := make(spec.Shape, len(sizes))
	for i, n := range sizes {
		s[i] = spec.Dim(fmt.Sprint(n))
	}
	if batched && len(s) > 0 {
		s[0] = BatchDim
	}
	return s
}

// Output is what a method returned when Import ran it on the examples: the
// dtype and shape of each tensor it returned, keyed by artifact id (the
// dict's key, or "output" for a single tensor).
type Output map[string]*tensor.Tensor

// runExamples calls each method whose required arguments all have
// examples, once, with the examples, and returns the tensors each returned.
// A method that fails is reported in warnings and left out.
func runExamples(mod engine.Module, methods []engine.MethodSchema, opts Options) (map[string]Output, []string) {
	if len(opts.Examples) == 0 {
		return nil, nil
	}
	outs := map[string]Output{}
	var warnings []string
	for _, m := range methods {
		kwargs := map[string]any{}
		runnable := true
		for _, a := range m.Arguments {
			if ex, ok := opts.Examples[a.Name]; ok {
				kwargs[a.Name] = ex.Tensor
				if kind, _, _ := FieldKind(a.Type); kind.IsList() {
					kwargs[a.Name] = ex.Items()
				}
			} else if !a.HasDefault {
				runnable = false
			}
		}
		if !runnable || len(kwargs) == 0 {
			continue
		}
		v, err := mod.Call(context.Background(), m.Name, kwargs, engine.CallOptions{})
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("running %s on the examples failed, so its outputs have no dtype or shape: %s", m.Name, firstLine(err.Error())))
			continue
		}
		out := Output{}
		switch x := v.(type) {
		case *tensor.Tensor:
			out["output"] = x
		case map[string]any:
			for k, e := range x {
				if t, ok := e.(*tensor.Tensor); ok {
					out[k] = t
				}
			}
		case []any:
			if returnOf(m.Returns).tuple == nil {
				break // a list: one artifact of kind tensor_list
			}
			for i, e := range x {
				if t, ok := e.(*tensor.Tensor); ok {
					out[tupleArtifactID(i)] = t
				}
			}
		}
		outs[m.Name] = out
	}
	return outs, warnings
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
