package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/pixels"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Params is what a generated params type provides to run its task.
type Params interface {
	// Validate checks every rule of the manifest.
	Validate() error
	// CallKwargs returns the fields passed to the task's method.
	CallKwargs() map[string]any
	// LoadKwargs returns the fields passed when the model is loaded.
	LoadKwargs() map[string]any
}

// CallOptions are the per-call settings a generated task method takes.
type CallOptions struct {
	// Outputs, when set, is reused memory for the call's output tensors
	// (tensor.OutputBuffer): the result's tensors share it until the next
	// call given the same buffer, so a loop allocates no output memory.
	// Engines that cannot use it, and remote backends, ignore it.
	Outputs *tensor.OutputBuffer
}

// CallOption sets one per-call option.
type CallOption func(*CallOptions)

// WithOutputBuffer makes the call write its output tensors into b (see
// tensor.OutputBuffer): the results of one call are valid until the next
// call with the same buffer.
func WithOutputBuffer(b *tensor.OutputBuffer) CallOption {
	return func(o *CallOptions) { o.Outputs = b }
}

// engine returns the engine call options: base with these applied.
func (o CallOptions) engine(base engine.CallOptions) engine.CallOptions {
	if o.Outputs != nil {
		base.Outputs = o.Outputs
	}
	return base
}

// Backend runs the tasks of one family variant with untyped kwargs and
// outputs keyed by artifact id. *Client runs them in-process through the
// engine; a remote client runs them on a server. The typed entry points
// (Run, RunBatch, RunStream) that generated methods call work on either, so
// a generated in-process client and a generated remote client share their
// method bodies.
type Backend interface {
	// Run runs one task (see Client.Run).
	Run(ctx context.Context, task string, call, load map[string]any, opts ...CallOption) (map[string]any, error)
	// RunBatch runs a batchable task over many items (see Client.RunBatch).
	RunBatch(ctx context.Context, task string, items []map[string]any, opts ...batch.Option) ([]map[string]any, error)
	// Stream starts a realtime session of a streaming task (see Client.Stream).
	Stream(ctx context.Context, task string, call map[string]any, opts ...stream.Option) (*stream.Session, error)
}

var _ Backend = (*Client)(nil)

// Decoder sets a generated result from a task's outputs keyed by artifact
// id (the result type's fromOutputs method).
type Decoder[R any] func(r *R, out map[string]any) error

// TaskRef names a task of a family for the typed entry points (Run,
// RunBatch, RunStream) that generated methods call.
type TaskRef struct {
	// Family is the family id.
	Family string
	// Task is the task id.
	Task string
}

// where prefixes errors of the typed entry points.
func (t TaskRef) where() string { return t.Family + " " + t.Task }

// notNew is the error of a method called on a generated Client that New did
// not create.
func (t TaskRef) notNew() error { return fmt.Errorf("%s: client not created with New", t.where()) }

// Run validates p, runs the task on c with the per-call options and decodes
// its outputs: the body of every generated task method. An invalid p, a runtime failure or an output
// that does not match the task's artifacts is an error, never a partial
// result.
func Run[R any](ctx context.Context, c Backend, t TaskRef, p Params, decode Decoder[R], opts ...CallOption) (*R, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), err)
	}
	if isNil(c) {
		return nil, t.notNew()
	}
	out, err := c.Run(ctx, t.Task, p.CallKwargs(), p.LoadKwargs(), opts...)
	if err != nil {
		return nil, err
	}
	r := new(R)
	if err := decode(r, out); err != nil {
		return nil, fmt.Errorf("%s: %w", t.where(), err)
	}
	return r, nil
}

// BatchParams is what the generated params of a batchable task add to
// Params, so that an in-process batch reads its items in place, without a
// kwargs map per item.
type BatchParams[P any] interface {
	*P
	Params
	// StackedInput returns the j-th of the task's stacked inputs (call_kwargs
	// inputs of kind tensor, image or video, in declaration order; see
	// spec.InferenceFieldSpec.IsStacked), nil when unset.
	StackedInput(j int) *tensor.Tensor
	// BatchDiff returns the id of the first other call_kwargs input whose
	// value differs between the params and q, "" when there is none: the
	// items of a batch share those inputs.
	BatchDiff(q *P) string
}

// RunBatch validates every item (all violations are reported with their
// item index), runs the task over the items in batches (see
// Client.RunBatch) and decodes each item's outputs: the body of every
// generated <Task>Batch method. With batch.WithPerItemErrors, items that
// failed on their own are nil and the error lists them.
//
// In-process, the items' tensors are copied straight into each forward
// call's input buffer and every output is a view of the call's output:
// nothing is allocated per item but what the results hold. Decoders must
// not keep the map they are given.
func RunBatch[P any, PP BatchParams[P], R any](ctx context.Context, c Backend, t TaskRef, ps []P, decode Decoder[R], opts ...batch.Option) ([]*R, error) {
	if isNil(c) {
		return nil, t.notNew()
	}
	var errs []error
	for i := range ps {
		if err := checkEvery(ctx, i); err != nil {
			return nil, fmt.Errorf("%s: stopped while validating item %d of %d: %w", t.where(), i, len(ps), err)
		}
		if err := PP(&ps[i]).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("item %d: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), errors.Join(errs...))
	}
	local, ok := c.(*Client)
	if !ok {
		items := make([]map[string]any, len(ps))
		for i := range ps {
			items[i] = PP(&ps[i]).CallKwargs()
		}
		outs, err := c.RunBatch(ctx, t.Task, items, opts...)
		if outs == nil {
			return nil, err
		}
		res := make([]*R, len(outs))
		for i, out := range outs {
			if out == nil {
				continue
			}
			r := new(R)
			if derr := decode(r, out); derr != nil {
				return nil, fmt.Errorf("%s: item %d: %w", t.where(), i, derr)
			}
			res[i] = r
		}
		return res, err
	}
	task, err := local.spec.Task(t.Task)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", local.where(""), err)
	}
	var call map[string]any
	if len(ps) > 0 {
		call = PP(&ps[0]).CallKwargs()
	}
	items := typedItems(task, len(ps), call,
		func(i, j int) *tensor.Tensor { return PP(&ps[i]).StackedInput(j) },
		func(i int) string { return PP(&ps[i]).BatchDiff(&ps[0]) })
	outs, err := local.runStacked(ctx, task, items, CallOptions{}, opts...)
	if outs == nil {
		return nil, err
	}
	res := make([]*R, len(outs))
	rs := make([]R, len(outs))
	m := make(map[string]any, len(task.Outputs))
	for i, o := range outs {
		if !o.ran() {
			continue
		}
		o.fill(m)
		if derr := decode(&rs[i], m); derr != nil {
			return nil, fmt.Errorf("%s: item %d: %w", t.where(), i, derr)
		}
		res[i] = &rs[i]
	}
	return res, err
}

// RunStream validates p and starts a realtime session of the task (see
// Client.Stream): the body of every generated <Task>Stream method.
func RunStream(ctx context.Context, c Backend, t TaskRef, p Params, opts ...stream.Option) (*stream.Session, error) {
	if isNil(c) {
		return nil, t.notNew()
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), err)
	}
	return c.Stream(ctx, t.Task, p.CallKwargs(), opts...)
}

// checkEvery is how often (in items) loops over a batch's items check their
// context: often enough that a deadline is honoured within a fraction of a
// batch's time, rarely enough to cost nothing measurable.
const itemCheckInterval = 256

// checkEvery returns ctx's error at every itemCheckInterval-th item i, nil
// otherwise: preparing a large batch honours a deadline long before the
// first forward call.
func checkEvery(ctx context.Context, i int) error {
	if i%itemCheckInterval != 0 {
		return nil
	}
	return ctx.Err()
}

// isNil reports whether b is nil or a nil pointer (the runtime of a
// generated client that New did not create).
func isNil(b Backend) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Artifacts decodes a task's outputs into the fields of a generated result,
// artifact by artifact (see Decode). It keeps the first error.
type Artifacts struct {
	out  map[string]any
	spec *spec.ModelInferenceSpec
	arts []spec.InferenceArtifactSpec
	err  error
}

// NewArtifacts starts decoding the outputs of task index task of spec.
func NewArtifacts(out map[string]any, spec *spec.ModelInferenceSpec, task int) Artifacts {
	return Artifacts{out: out, spec: spec, arts: spec.Tasks[task].Outputs}
}

// Err returns the first problem found, or nil.
func (o *Artifacts) Err() error { return o.err }

// Decode sets *dst from artifact i of the task: dst is the result field of
// the artifact's Go type (*tensor.Video, *tensor.Image,
// *tensor.Embedding, *tensor.Tensor, string or *string for text,
// json.RawMessage); a video plays at the family's VideoFPS. A required artifact the model did not return, or a
// value the kind cannot hold, is an error naming the artifact; after the
// first error Decode does nothing.
func Decode[T any](o *Artifacts, i int, dst *T) {
	if o.err != nil {
		return
	}
	a := &o.arts[i]
	v, ok := o.out[a.ArtifactID]
	if !ok || v == nil {
		if a.Required {
			o.err = fmt.Errorf("artifact %q: required, but the model returned none", a.ArtifactID)
		}
		return
	}
	var err error
	if t, ok := v.(*tensor.Tensor); ok && (a.Kind == spec.ArtifactImage || a.Kind == spec.ArtifactVideo) &&
		(a.Image != nil || (a.DType != "" && a.DType != tensor.Uint8)) {
		// A picture the manifest declares in another layout, range or
		// dtype becomes uint8 [H,W,C] first.
		if v, err = pixels.Artifact(t, a); err != nil {
			o.err = fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
			return
		}
	}
	switch d := any(dst).(type) {
	case **tensor.Video:
		*d, err = tensor.AsVideo(v, float64(o.spec.VideoFPS(a)))
	case **tensor.Image:
		*d, err = tensor.AsImage(v)
	case **tensor.Embedding:
		*d, err = tensor.AsEmbedding(v)
	case **tensor.Tensor:
		*d, err = tensor.AsTensor(v)
	case *string:
		*d, err = tensor.AsText(v)
	case **string:
		var s string
		if s, err = tensor.AsText(v); err == nil {
			*d = &s
		}
	case *json.RawMessage:
		*d, err = tensor.AsJSON(v)
	default:
		err = fmt.Errorf("no decoding into %T", dst)
	}
	if err != nil {
		o.err = fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
	}
}
