package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/params"
	"github.com/worldfoundry/wfgen/runtime/pixels"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

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

func callOptions(opts []CallOption) CallOptions {
	var co CallOptions
	for _, o := range opts {
		o(&co)
	}
	return co
}

// Backend runs the tasks of one family variant: *Client in this process
// through the engine, *remote.Client on a server. A generated Client sits
// on one, whichever constructor made it (New, Open, NewClient), as
// grpc's generated clients sit on one ClientConnInterface: its methods are
// the same either way, and give the same results.
//
// The task is resolved once, by the caller (a generated Task, a server
// that read the request): a backend is given the task itself, a task of
// its Spec, and the inputs as Inputs.
type Backend interface {
	// Spec returns the family's spec.
	Spec() *spec.ModelInferenceSpec
	// Variant returns the variant the backend runs.
	Variant() *spec.InferenceVariantSpec
	// Call runs one call of task with the inputs' one item and returns its
	// outputs keyed by artifact id (see Client.Call).
	Call(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, opts ...CallOption) (map[string]any, error)
	// CallBatch runs a batchable task over the inputs' items and hands
	// each item that ran its outputs (see Client.CallBatch).
	CallBatch(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, each func(item int, out map[string]any) error, opts ...batch.Option) error
	// CallStream starts a realtime session of a streaming task with the
	// inputs' one item (see Client.CallStream).
	CallStream(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, opts ...stream.Option) (*stream.Session, error)
	// Close releases what the backend holds.
	Close() error
}

// Loader is the optional capability of a backend that holds the model in
// this process (*Client): load it now rather than on first use, and say
// on which device and dtype it runs. Find it with a type assertion on the
// interface: b.(client.Loader).
type Loader interface {
	Load() (device string, dtype tensor.DType, err error)
}

// Restorer is the optional capability of a backend that restores
// snapshots of its streams (this package's Client, in process; a remote
// client, on its server): RestoreStream continues a snapshot in a new
// session, ForkStream in n (docs/streaming.md). Find it with a type
// assertion: b.(client.Restorer).
type Restorer interface {
	RestoreStream(ctx context.Context, snap stream.Snapshot, opts ...stream.Option) (*stream.Session, error)
	ForkStream(ctx context.Context, snap stream.Snapshot, n int, opts func(i int) []stream.Option) ([]*stream.Session, error)
}

var (
	_ Backend  = (*Client)(nil)
	_ Loader   = (*Client)(nil)
	_ Restorer = (*Client)(nil)
)

// Task is one task of a generated family bound to its Go params type P and
// result type R: the generated methods are one-line calls of its methods.
// It reads params in place, by reflection over the struct fields it
// matched once (NewTask) to the task's inputs — no map is built to
// validate, batch or send them — and decodes outputs into R's fields, one
// per artifact in the task's order.
type Task[P, R any] struct {
	family   *spec.ModelInferenceSpec
	spec     *spec.InferenceTaskProfile
	rules    params.Rules
	fields   []int // fields[i]: index in P of the field of input i
	plain    reflect.Type
	defaults func() P
}

// NewTask binds task index of family (the generated package's spec) to P
// and R, and defaults to P's defaults (for JSON decoding). P must have one
// field per input, tagged json:"<field id>"; R one field per artifact, in
// order. It panics otherwise: it runs when a generated package is
// initialised, from a spec that passed validation.
func NewTask[P, R any](family *spec.ModelInferenceSpec, index int, defaults func() P) *Task[P, R] {
	t := &Task[P, R]{family: family, spec: &family.Tasks[index], rules: params.MustCompile(&family.Tasks[index]), defaults: defaults}
	pt := reflect.TypeFor[P]()
	byID := map[string]int{}
	var plain []reflect.StructField
	for k := range pt.NumField() {
		f := pt.Field(k)
		byID[f.Tag.Get("json")] = k
		plain = append(plain, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
	}
	t.plain = reflect.StructOf(plain)
	for i := range t.spec.Inputs {
		fs := &t.spec.Inputs[i]
		k, ok := byID[fs.FieldID]
		if !ok {
			panic(fmt.Sprintf("client: %s has no field tagged json:%q", pt, fs.FieldID))
		}
		if fs.Kind.HasParts() {
			if err := partsType(fs, pt.Field(k).Type); err != nil {
				panic(fmt.Sprintf("client: %s.%s: %v", pt, pt.Field(k).Name, err))
			}
		}
		t.fields = append(t.fields, k)
	}
	rt := reflect.TypeFor[R]()
	if rt.NumField() != len(t.spec.Outputs) {
		panic(fmt.Sprintf("client: %s has %d fields for %d artifacts", rt, rt.NumField(), len(t.spec.Outputs)))
	}
	for i := range t.spec.Outputs {
		a := &t.spec.Outputs[i]
		if !a.Kind.Holds().IsRecord() {
			continue
		}
		if err := recordType(a, rt.Field(i).Type); err != nil {
			panic(fmt.Sprintf("client: %s.%s: %v", rt, rt.Field(i).Name, err))
		}
	}
	return t
}

// Spec returns the task's spec.
func (t *Task[P, R]) Spec() *spec.InferenceTaskProfile { return t.spec }

// where prefixes errors of the typed entry points.
func (t *Task[P, R]) where() string { return t.family.ModelFamilyID + " " + t.spec.TaskID }

// notNew is the error of a method called on a generated Client that no
// constructor made.
func (t *Task[P, R]) notNew() error {
	return fmt.Errorf("%s: client not created with New", t.where())
}

// Validate checks every rule of the manifest on p and reports all
// violations, each prefixed with its field path (the field id, and [i] for
// list items), joined with errors.Join: the body of a generated Validate.
func (t *Task[P, R]) Validate(p *P) error {
	c := t.rules.Check()
	v := reflect.ValueOf(p).Elem()
	for i, k := range t.fields {
		params.Value(&c, i, v.Field(k))
	}
	return c.Err()
}

// CallKwargs returns p's fields whose target is call_kwargs, keyed by field
// id, in the engine's value form; unset optional fields are left out.
func (t *Task[P, R]) CallKwargs(p *P) map[string]any {
	return CallKwargs(t.spec, t.one(p), 0)
}

// LoadKwargs returns p's fields whose target is load_kwargs, as
// CallKwargs does.
func (t *Task[P, R]) LoadKwargs(p *P) map[string]any {
	return LoadKwargs(t.spec, t.one(p), 0)
}

// DecodeJSON decodes params keyed by field id into p: absent keys keep
// their defaults, unknown keys are an error, and so is a missing required
// field (the body of a generated UnmarshalJSON).
func (t *Task[P, R]) DecodeJSON(b []byte, p *P) error {
	q := reflect.New(t.plain)
	q.Elem().Set(reflect.ValueOf(t.defaults()).Convert(t.plain))
	if err := t.rules.DecodeJSON(b, q.Interface()); err != nil {
		return fmt.Errorf("%s params: %w", t.where(), err)
	}
	reflect.ValueOf(p).Elem().Set(q.Elem().Convert(reflect.TypeFor[P]()))
	return nil
}

// Inputs returns ps as the Inputs of the task, read in place.
func (t *Task[P, R]) Inputs(ps []P) Inputs {
	return paramsInputs[P]{task: t.spec, fields: t.fields, ps: ps}
}

func (t *Task[P, R]) one(p *P) Inputs { return paramsInputs[P]{task: t.spec, fields: t.fields, p: p} }

// paramsInputs are generated params as Inputs: ps, or the one p.
type paramsInputs[P any] struct {
	task   *spec.InferenceTaskProfile
	fields []int
	ps     []P
	p      *P
}

func (in paramsInputs[P]) Len() int {
	if in.p != nil {
		return 1
	}
	return len(in.ps)
}

func (in paramsInputs[P]) Input(item, field int) any {
	p := in.p
	if p == nil {
		p = &in.ps[item]
	}
	v := reflect.ValueOf(p).Elem().Field(in.fields[field])
	if fs := &in.task.Inputs[field]; fs.Kind.HasParts() {
		return partsField(fs, v)
	}
	return engineField(v)
}

// partsType checks the Go type of the params field of fs, a field with
// parts: a struct (or a pointer to one) with one *tensor.Tensor field per
// part, in order.
func partsType(fs *spec.InferenceFieldSpec, typ reflect.Type) error {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ.NumField() != len(fs.Fields) {
		return fmt.Errorf("%s is not a struct of %d tensors, one per part of field %q (%s)", typ, len(fs.Fields), fs.FieldID, fs.PartList())
	}
	for k := range typ.NumField() {
		if typ.Field(k).Type != tensorType {
			return fmt.Errorf("field %s of %s is %s, not *tensor.Tensor", typ.Field(k).Name, typ, typ.Field(k).Type)
		}
	}
	return nil
}

// partsField returns a params field of a kind with parts (the generated
// struct, or a pointer to it) in the engine's value form
// (spec.InferenceFieldSpec.PartsValue), nil when unset.
func partsField(fs *spec.InferenceFieldSpec, v reflect.Value) any {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	parts := make([]*tensor.Tensor, v.NumField())
	for k := range parts {
		parts[k], _ = v.Field(k).Interface().(*tensor.Tensor)
	}
	return fs.PartsValue(parts)
}

// engineField returns a params field's value in the engine's value form,
// nil when unset.
func engineField(v reflect.Value) any {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int64:
		return v.Int()
	case reflect.Float64:
		return v.Float()
	case reflect.Bool:
		return v.Bool()
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		if v.Type() == tensorType {
			return v.Interface()
		}
		return engineField(v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for j := range out {
			out[j] = engineField(v.Index(j))
		}
		return out
	}
	return v.Interface()
}

// Run validates p, runs the task on b and decodes its outputs into an R:
// the body of every generated task method. An invalid p, a backend failure
// or an output that does not match the task's artifacts is an error, never
// a partial result.
func (t *Task[P, R]) Run(ctx context.Context, b Backend, p *P, opts ...CallOption) (*R, error) {
	if err := t.Validate(p); err != nil {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), err)
	}
	if isNil(b) {
		return nil, t.notNew()
	}
	out, err := b.Call(ctx, t.spec, t.one(p), opts...)
	if err != nil {
		return nil, err
	}
	r := new(R)
	if err := t.decode(r, out); err != nil {
		return nil, fmt.Errorf("%s: %w", t.where(), err)
	}
	return r, nil
}

// RunBatch validates every item (all violations are reported with their
// item index), runs the task over the items on b (Backend.CallBatch) and
// decodes each item's outputs: the body of every generated <Task>Batch
// method. With batch.WithPerItemErrors, items that failed on their own are
// nil and the error lists them.
//
// In-process, the items' tensors are copied straight from ps into each
// forward call's input buffer and every output is a view of the call's
// output: nothing is allocated per item but what the results hold.
func (t *Task[P, R]) RunBatch(ctx context.Context, b Backend, ps []P, opts ...batch.Option) ([]*R, error) {
	if isNil(b) {
		return nil, t.notNew()
	}
	var errs []error
	for i := range ps {
		if err := checkEvery(ctx, i); err != nil {
			return nil, fmt.Errorf("%s: stopped while validating item %d of %d: %w", t.where(), i, len(ps), err)
		}
		if err := t.Validate(&ps[i]); err != nil {
			errs = append(errs, fmt.Errorf("item %d: %w", i, err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), errors.Join(errs...))
	}
	res := make([]*R, len(ps))
	rs := make([]R, len(ps))
	got := 0
	err := b.CallBatch(ctx, t.spec, t.Inputs(ps), func(i int, out map[string]any) error {
		if err := t.decode(&rs[i], out); err != nil {
			return fmt.Errorf("%s: item %d: %w", t.where(), i, err)
		}
		res[i] = &rs[i]
		got++
		return nil
	}, opts...)
	var itemErrs batch.ItemErrors
	if err != nil && !errors.As(err, &itemErrs) || err == nil && got == 0 && len(ps) > 0 {
		return nil, err // failed as a whole, or a rank of a sharded run that receives nothing
	}
	return res, err
}

// RunStream validates p and starts a realtime session of the task on b:
// the body of every generated <Task>Stream method.
func (t *Task[P, R]) RunStream(ctx context.Context, b Backend, p *P, opts ...stream.Option) (*stream.Session, error) {
	if isNil(b) {
		return nil, t.notNew()
	}
	if err := t.Validate(p); err != nil {
		return nil, fmt.Errorf("%s: invalid params: %w", t.where(), err)
	}
	return b.CallStream(ctx, t.spec, t.one(p), opts...)
}

// decode sets r's fields from the outputs, artifact by artifact.
func (t *Task[P, R]) decode(r *R, out map[string]any) error {
	v := reflect.ValueOf(r).Elem()
	for i := range t.spec.Outputs {
		if err := decodeArtifact(t.family, &t.spec.Outputs[i], out, v.Field(i).Addr().Interface()); err != nil {
			return err
		}
	}
	return nil
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

// isNil reports whether b is nil or a nil pointer (the backend of a
// generated client that no constructor made).
func isNil(b Backend) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// decodeArtifact sets *dst from artifact a of the outputs: dst points to
// the result field of the artifact's Go type (*tensor.Video,
// *tensor.Image, *tensor.Embedding, *tensor.Tensor, string or *string for
// text, json.RawMessage, []*tensor.Tensor for tensor_list, a pointer to
// or slice of the generated struct for record and record_list: see
// decodeRecord); a video plays at the family's VideoFPS. A
// required artifact the model did not return, or a value the kind cannot
// hold, is an error naming the artifact.
func decodeArtifact(family *spec.ModelInferenceSpec, a *spec.InferenceArtifactSpec, out map[string]any, dst any) error {
	v, ok := out[a.ArtifactID]
	if !ok || v == nil {
		if a.Required {
			return fmt.Errorf("artifact %q: required, but the model returned none", a.ArtifactID)
		}
		return nil
	}
	var err error
	if t, ok := v.(*tensor.Tensor); ok && a.Kind.IsPicture() &&
		(a.Image != nil || (a.DType != "" && a.DType != tensor.Uint8)) {
		// A picture the manifest declares in another layout, range or
		// dtype becomes uint8 [H,W,C] first.
		if v, err = pixels.Artifact(t, a); err != nil {
			return fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
		}
	}
	switch d := dst.(type) {
	case **tensor.Video:
		*d, err = tensor.AsVideo(v, float64(family.VideoFPS(a)))
	case **tensor.Image:
		*d, err = tensor.AsImage(v)
	case **tensor.Embedding:
		*d, err = tensor.AsEmbedding(v)
	case **tensor.Tensor:
		*d, err = tensor.AsTensor(v)
	case *[]*tensor.Tensor:
		*d, err = tensor.AsTensorList(v)
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
		if a.Kind.Holds().IsRecord() {
			err = decodeRecord(a, v, dst)
			break
		}
		err = fmt.Errorf("no decoding into %T", dst)
	}
	if err != nil {
		return fmt.Errorf("artifact %q: %w", a.ArtifactID, err)
	}
	return nil
}

// tensorPtr is the type of each field of a record's generated struct.
var tensorPtr = reflect.TypeFor[*tensor.Tensor]()

// recordType checks that typ is the Go type of record artifact a in a
// result struct: a pointer to (record) or slice of (record_list) a struct
// with one *tensor.Tensor field per key, in the order of a.Fields.
func recordType(a *spec.InferenceArtifactSpec, typ reflect.Type) error {
	want := reflect.Pointer
	if a.Kind.Holds() == spec.HoldsRecordList {
		want = reflect.Slice
	}
	if typ.Kind() != want || typ.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("artifact %q (%s) needs a %s of a struct, not %s", a.ArtifactID, a.Kind, want, typ)
	}
	st := typ.Elem()
	if st.NumField() != len(a.Fields) {
		return fmt.Errorf("%s has %d fields for the %d keys of artifact %q", st, st.NumField(), len(a.Fields), a.ArtifactID)
	}
	for k := range st.NumField() {
		if st.Field(k).Type != tensorPtr {
			return fmt.Errorf("%s.%s is %s, not *tensor.Tensor", st, st.Field(k).Name, st.Field(k).Type)
		}
	}
	return nil
}

// decodeRecord sets *dst from v, the value of record artifact a: dst is
// a **S (record: v is a dict, map[string]any) or a *[]S (record_list: v is
// a list of dicts, []any), S the generated struct whose k-th field holds
// the tensor of key a.Fields[k] (recordType). The tensors are the
// engine's, not copied. A key the model did not return leaves its field
// nil, and is an error naming the key when the field is required; keys
// the fields do not name are ignored.
func decodeRecord(a *spec.InferenceArtifactSpec, v any, dst any) error {
	d := reflect.ValueOf(dst)
	if d.Kind() != reflect.Pointer || d.IsNil() || recordType(a, d.Type().Elem()) != nil {
		return fmt.Errorf("no decoding into %T", dst)
	}
	d = d.Elem()
	if a.Kind.Holds() == spec.HoldsRecord {
		s := reflect.New(d.Type().Elem())
		if err := fillRecord(a, v, s.Elem()); err != nil {
			return err
		}
		d.Set(s)
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("want a list of dicts of tensors (List[Dict[str, Tensor]]), got %s", describe(v))
	}
	if len(list) == 0 {
		// An empty list is empty, not absent: a non-nil slice, as a
		// tensor_list's.
		d.Set(reflect.MakeSlice(d.Type(), 0, 0))
		return nil
	}
	// A new backing array, grown in place: one allocation (MakeSlice
	// would add a slice header).
	d.SetZero()
	d.Grow(len(list))
	d.SetLen(len(list))
	for i, e := range list {
		if err := fillRecord(a, e, d.Index(i)); err != nil {
			d.SetZero()
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// fillRecord sets the fields of struct s from v, one dict of record
// artifact a (decodeRecord).
func fillRecord(a *spec.InferenceArtifactSpec, v any, s reflect.Value) error {
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("want a dict of tensors (Dict[str, Tensor]), got %s", describe(v))
	}
	return a.EachRecordKey(v, func(k int, t *tensor.Tensor) error {
		s.Field(k).Set(reflect.ValueOf(t))
		return nil
	})
}
