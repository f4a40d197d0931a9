package contract

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Reserved argument names a streaming task's method may take besides its
// fields: the frames wanted, the controls in the realtime spec's order, and
// the session state from the previous step. runtime/client passes them on
// every step; the check counts them as supplied.
const (
	ArgNumFrames = "num_frames"
	ArgControls  = "controls"
	ArgState     = "state"
)

// Schemas is where a check reads a TorchScript checkpoint's methods: a
// module the engine loaded (engine.Module), or the Signatures its code
// declares (ReadSignatures), which give the same names, types and
// defaults without libtorch.
type Schemas interface {
	// Methods lists the method names.
	Methods() []string
	// Schema returns the schema of one method.
	Schema(method string) (engine.MethodSchema, error)
}

// CheckTask is the check of one task against a TorchScript checkpoint:
// what a load runs (runtime/client, on the module the engine loaded) and
// what "wfgen validate" runs when the checkpoint is at hand (on the
// archive's code), so that both decide alike. It reads the method names
// and the task method's schema from src and runs CheckLoaded with the
// keys returns (ReadReturns of the same archive; nil when unknown) tells
// of the dicts the methods return. It returns nil, a *MismatchError, or
// the error of a schema src could not give (a signature the code reader
// cannot read).
func CheckTask(task *spec.InferenceTaskProfile, variant *spec.InferenceVariantSpec, src Schemas, returns map[string]MethodReturns) error {
	if task == nil || src == nil {
		return fmt.Errorf("contract: nil task or schemas")
	}
	methods := src.Methods()
	var schema engine.MethodSchema
	if slices.Contains(methods, task.MethodName()) {
		s, err := src.Schema(task.MethodName())
		if err != nil {
			return fmt.Errorf("task %q: the schema of method %s: %w", task.TaskID, task.MethodName(), err)
		}
		schema = s
	}
	return CheckLoaded(task, variant, methods, schema, returns)
}

// asCalled returns the task as its method is called: a streaming task also
// supplies the reserved arguments (ArgNumFrames, ArgControls, ArgState)
// that its method declares (args) and no field of the task names.
func asCalled(t *spec.InferenceTaskProfile, args []string) *spec.InferenceTaskProfile {
	if t == nil || !t.Stream {
		return t
	}
	cp := *t
	cp.Inputs = slices.Clone(t.Inputs)
	for _, a := range args {
		if _, ok := t.Field(a); ok {
			continue
		}
		switch a {
		case ArgNumFrames:
			cp.Inputs = append(cp.Inputs, spec.InferenceFieldSpec{FieldID: a, Kind: spec.KindInt, Target: spec.TargetCallKwargs, Required: true})
		case ArgControls:
			cp.Inputs = append(cp.Inputs, spec.InferenceFieldSpec{FieldID: a, Kind: spec.KindFloatList, Target: spec.TargetCallKwargs, Required: true})
		case ArgState:
			cp.Inputs = append(cp.Inputs, spec.InferenceFieldSpec{FieldID: a, Kind: spec.KindTensor, Target: spec.TargetCallKwargs})
		}
	}
	return &cp
}

// argNames returns the names of a schema's arguments.
func argNames(s engine.MethodSchema) []string {
	names := make([]string, len(s.Arguments))
	for i, a := range s.Arguments {
		names[i] = a.Name
	}
	return names
}

// locate says where in the manifest a problem of task lies (see
// MismatchError.Where), from what the problem names: a field, artifact, argument
// or input (the field of that name, else the task's inputs), a
// default_call_kwargs or dims key, the variant's call_kwargs key, the
// method, batching, or the return (the task's outputs).
func locate(task *spec.InferenceTaskProfile, what string) (path string, variant bool) {
	kind, quoted, _ := strings.Cut(what, " ")
	name, err := strconv.Unquote(quoted)
	if err != nil {
		name = ""
	}
	field := func() string {
		for i := range task.Inputs {
			if task.Inputs[i].FieldID == name {
				return "inputs/" + strconv.Itoa(i)
			}
		}
		return "inputs"
	}
	switch kind {
	case "field", "argument", "input":
		return field(), false
	case "artifact":
		for i := range task.Outputs {
			if task.Outputs[i].ArtifactID == name {
				return "outputs/" + strconv.Itoa(i), false
			}
		}
		return "outputs", false
	case "default_call_kwargs", "dims":
		return kind + "/" + escapeSegment(name), false
	case "call_kwargs":
		return "call_kwargs/" + escapeSegment(name), true
	case "method", "batching":
		return kind, false
	case "return":
		return "outputs", false
	}
	return "", false
}

// escapeSegment escapes a JSON Pointer segment (RFC 6901).
func escapeSegment(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TupleArtifacts reports whether the artifacts of task are the elements of
// the tuple its method returns (schema): the artifacts give positions, or
// the method returns a Tuple (Optional or not) that is not one json
// artifact's value whole. runtime/client maps a call's output onto the
// artifacts by the same rule the check holds them to.
func TupleArtifacts(task *spec.InferenceTaskProfile, schema engine.MethodSchema) bool {
	if task == nil {
		return false
	}
	if _, explicit := task.ArtifactPositions(); explicit {
		return true
	}
	rt, err := returnType(schema)
	if err != nil {
		return false
	}
	for rt.Name == "Optional" {
		rt = rt.Elems[0]
	}
	return tupleArtifacts(task, rt)
}

// tupleArtifacts is TupleArtifacts for a return type without Optional.
func tupleArtifacts(task *spec.InferenceTaskProfile, rt Type) bool {
	if _, explicit := task.ArtifactPositions(); explicit {
		return rt.Name == "Tuple"
	}
	return rt.Name == "Tuple" && !(len(task.Outputs) == 1 && task.Outputs[0].Kind.Holds() == spec.HoldsJSON && jsonable(rt, 0))
}
