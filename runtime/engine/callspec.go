package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// CallSpecKey is the metadata key under which examples/aoti/export.py
// records the call spec (CallSpec's JSON form plus "version") in an
// AOTInductor package.
const CallSpecKey = "wfgen.call_spec"

// CallSpecVersion is the version of the recorded call spec this wfgen reads.
const CallSpecVersion = 1

// ErrNoCallSpec is the error for a package exported without the call spec:
// a compiled model does not check its inputs, so wfgen needs them from the
// export.
var ErrNoCallSpec = errors.New("the package has no wfgen call spec in its metadata (key " + CallSpecKey + "): " +
	"a compiled model does not check the dtypes and shapes of its inputs, so wfgen needs them from the export; " +
	"export it with examples/aoti/export.py (docs/aoti.md)")

// DecodeCallSpec decodes the call spec recorded in a package's metadata
// under CallSpecKey: its JSON form with "version" CallSpecVersion. It does
// not check the spec's dtypes and shapes (CallSpec.Check does).
func DecodeCallSpec(recorded string) (CallSpec, error) {
	if recorded == "" {
		return CallSpec{}, ErrNoCallSpec
	}
	var doc struct {
		Version int `json:"version"`
		CallSpec
	}
	if err := json.Unmarshal([]byte(recorded), &doc); err != nil {
		return CallSpec{}, fmt.Errorf("the package's %s metadata: %w", CallSpecKey, err)
	}
	if doc.Version != CallSpecVersion {
		return CallSpec{}, fmt.Errorf("the package's %s metadata has version %d; this wfgen reads version %d (re-export with this wfgen's examples/aoti/export.py)",
			CallSpecKey, doc.Version, CallSpecVersion)
	}
	return doc.CallSpec, nil
}

// Check checks the spec's dtypes, shapes and dimension ranges: every
// tensor input and output has a dtype the engine passes and a shape of
// sizes, names and "*", every named dimension has a range in Dims, and
// every range is a named range of sizes.
func (s *CallSpec) Check() error {
	check := func(what string, d tensor.DType, sh spec.Shape) error {
		if !d.Valid() {
			return fmt.Errorf("%s: dtype %q is not one the engine passes (%s)", what, d, dtypeNames())
		}
		for _, dim := range sh {
			if !dim.Valid() {
				return fmt.Errorf("%s: shape %s: %q is not a size, a name or *", what, sh, dim)
			}
			if dim.Named() {
				if _, ok := s.Dims[string(dim)]; !ok {
					return fmt.Errorf("%s: shape %s: dimension %s has no range in the call spec's dims", what, sh, dim)
				}
			}
		}
		return nil
	}
	for _, in := range s.Inputs {
		if in.Constant {
			continue
		}
		if err := check("input "+strconv.Quote(in.Name), in.DType, in.Shape); err != nil {
			return err
		}
	}
	for _, o := range s.Outputs {
		if err := check("output "+strconv.Quote(o.Name), o.DType, o.Shape); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Dims)) {
		r := s.Dims[name]
		if !spec.Dim(name).Named() || r.Min < 0 || (r.Max != 0 && r.Max < r.Min) {
			return fmt.Errorf("dimension %s: range %s is not a named range of sizes", name, r)
		}
	}
	return nil
}

func dtypeNames() string {
	s := make([]string, len(tensor.DTypes))
	for i, d := range tensor.DTypes {
		s[i] = string(d)
	}
	return strings.Join(s, ", ")
}

// CallSpec is the call a compiled checkpoint (an AOTInductor package) was
// exported for: its flattened inputs and outputs in order, with the dtypes
// and shapes fixed at export and the range of each dynamic dimension. It is
// the contract such a checkpoint is checked against (runtime/contract),
// where a TorchScript module has its MethodSchema.
type CallSpec struct {
	// Inputs are the call's flattened arguments in the package's order:
	// positional ones first, then keyword ones.
	Inputs []CallInput `json:"inputs"`
	// Outputs are the flattened return values in order.
	Outputs []CallOutput `json:"outputs"`
	// Returns is how the outputs come back from Module.Call: ReturnsTensor
	// (one tensor), ReturnsTuple ([]any) or ReturnsDict (map[string]any
	// keyed by output name).
	Returns string `json:"returns"`
	// Dims are the named dynamic dimensions of the shapes and the sizes the
	// export allows them.
	Dims map[string]DimRange `json:"dims,omitempty"`
}

// How a CallSpec's outputs are returned.
const (
	ReturnsTensor = "tensor"
	ReturnsTuple  = "tuple"
	ReturnsDict   = "dict"
)

// CallInput is one flattened argument of a CallSpec.
type CallInput struct {
	// Name is the argument name: the keyword, or the parameter's name for a
	// positional argument.
	Name string `json:"name"`
	// Keyword says the export passed the argument by keyword.
	Keyword bool `json:"keyword,omitempty"`
	// Constant says the export baked the argument in as Value: a non-tensor
	// argument the compiled code no longer takes, so a call cannot change it.
	Constant bool `json:"constant,omitempty"`
	// Value is the baked-in value of a constant argument.
	Value any `json:"value,omitempty"`
	// DType is a tensor argument's element type.
	DType tensor.DType `json:"dtype,omitempty"`
	// Shape is a tensor argument's shape: fixed sizes and names of Dims.
	Shape spec.Shape `json:"shape,omitempty"`
}

// Restates reports whether v, a manifest or call value, is the value a
// constant input was baked in with: numbers compare by value whatever their
// Go type (the recorded value is JSON-decoded, so a float64), booleans,
// strings and None exactly.
func (in CallInput) Restates(v any) bool {
	num := func(x any) (float64, bool) {
		switch n := x.(type) {
		case float64:
			return n, true
		case float32:
			return float64(n), true
		case int:
			return float64(n), true
		case int32:
			return float64(n), true
		case int64:
			return float64(n), true
		}
		return 0, false
	}
	if a, ok := num(in.Value); ok {
		b, ok := num(v)
		return ok && a == b
	}
	switch c := in.Value.(type) {
	case nil:
		return v == nil
	case bool:
		b, ok := v.(bool)
		return ok && b == c
	case string:
		s, ok := v.(string)
		return ok && s == c
	}
	return false
}

// CallOutput is one flattened return value of a CallSpec.
type CallOutput struct {
	// Name is the key of a returned dict, or "output<i>".
	Name string `json:"name"`
	// DType is the tensor's element type.
	DType tensor.DType `json:"dtype,omitempty"`
	// Shape is the tensor's shape: fixed sizes and names of Dims.
	Shape spec.Shape `json:"shape,omitempty"`
}

// DimRange is the range of sizes a dynamic dimension was exported for.
type DimRange struct {
	// Min is the smallest size.
	Min int64 `json:"min"`
	// Max is the largest size; 0 means no bound.
	Max int64 `json:"max,omitempty"`
}

// Contains reports whether size n is in the range.
func (r DimRange) Contains(n int64) bool { return n >= r.Min && (r.Max == 0 || n <= r.Max) }

// String writes the range as [min, max] ("[2, ∞)" without a bound).
func (r DimRange) String() string {
	if r.Max == 0 {
		return fmt.Sprintf("[%d, ∞)", r.Min)
	}
	return fmt.Sprintf("[%d, %d]", r.Min, r.Max)
}

// Tensors returns the inputs the compiled call takes (the non-constant
// ones), in order.
func (s *CallSpec) Tensors() []CallInput {
	var out []CallInput
	for _, in := range s.Inputs {
		if !in.Constant {
			out = append(out, in)
		}
	}
	return out
}

// Input returns the input with the given name.
func (s *CallSpec) Input(name string) (CallInput, bool) {
	for _, in := range s.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return CallInput{}, false
}

// String writes an input as in messages: "x: float32[batch,32]",
// "scale = 2 (constant)".
func (in CallInput) String() string {
	if in.Constant {
		return fmt.Sprintf("%s = %v (constant)", in.Name, in.Value)
	}
	return in.Name + ": " + spec.TensorContract{DType: in.DType, Shape: in.Shape}.String()
}

// InputList writes the inputs as in messages.
func (s *CallSpec) InputList() string {
	if len(s.Inputs) == 0 {
		return "no inputs"
	}
	parts := make([]string, len(s.Inputs))
	for i, in := range s.Inputs {
		parts[i] = in.String()
	}
	return strings.Join(parts, ", ")
}

// CallSpecModule is a Module compiled for one call (an AOTInductor
// package): its one method runs the call its CallSpec describes.
type CallSpecModule interface {
	Module
	// CallSpec returns the call spec of method (the module's one method).
	CallSpec(method string) (CallSpec, error)
}
