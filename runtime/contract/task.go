package contract

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
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
// that its method declares (args) and no field of the task names; with
// session_batching the controls are a float32 tensor [B, C] instead of a
// List[float] (BatchedSteps has the whole call).
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
			f := spec.InferenceFieldSpec{FieldID: a, Kind: spec.KindFloatList, Target: spec.TargetCallKwargs, Required: true}
			if t.SessionBatching != nil {
				f.Kind, f.DType = spec.KindTensor, tensor.Float32 // a row per session
			}
			cp.Inputs = append(cp.Inputs, f)
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
	case "method", "batching", "session_batching":
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

// StepsDim names the leading dimension of a batch of sessions' steps in
// the shapes BatchedSteps declares.
const StepsDim = "sessions"

// BatchedSteps returns the task that one call of a session-batched
// streaming task's method (spec.SessionBatchingSpec) runs, as a batchable
// task of its own: the method's reserved arguments are fields (num_frames
// an int shared by the batch; controls, a float32 tensor [C], and state, a
// tensor, stacked per session, state left out while the sessions have
// none), its outputs are the video artifact and "state", each with the
// leading dimension StepsDim, and its batching is invariant at the task's
// max batch size. args are the names of the method's arguments. It returns
// nil for a task without session_batching. runtime/client runs the steps
// of its sessions through it with the batch executor.
func BatchedSteps(t *spec.InferenceTaskProfile, args []string) *spec.InferenceTaskProfile {
	if t == nil || t.SessionBatching == nil {
		return nil
	}
	cp := asCalled(t, args)
	cp.Stream = false
	cp.SessionBatching = nil
	cp.Batching = &spec.BatchingSpec{MaxBatchSize: t.SessionBatching.MaxBatchSize, Invariant: true, Dim: StepsDim}
	rows := func(s spec.Shape) spec.Shape {
		if len(s) == 0 {
			return nil
		}
		return append(spec.Shape{StepsDim}, s...)
	}
	cp.Outputs = nil
	for _, a := range t.Outputs {
		if a.Kind.Picture() == spec.PictureVideo {
			a.Shape = rows(a.Shape)
			cp.Outputs = append(cp.Outputs, a)
			break
		}
	}
	if slices.Contains(args, ArgState) {
		cp.Outputs = append(cp.Outputs, spec.InferenceArtifactSpec{ArtifactID: ArgState, Kind: spec.ArtifactTensor})
	}
	return cp
}
