// Package client runs a model family's tasks through the registered engine:
// it is what generated packages' typed clients wrap.
//
// A Client resolves its variant (aliases included) when it is created. On
// first use it finds the variant's "model" checkpoint (an explicit path, the
// manifest's folder, then the checkpoint root), verifies its size and sha256
// when the manifest gives them — however the file was found, unless
// WithoutCheckpointVerification says otherwise —, installs the process
// inference policy (a malformed WORLDFOUNDRY_* variable fails the load, as
// it fails infra.Run), resolves the variant's op libraries (op_libraries,
// found as checkpoint URIs are) for the engine to load before the
// checkpoint, loads the checkpoint once per process through the
// engine (modules are cached and shared; infra.DropCaches or ReleaseCaches
// releases unused ones) on the resolved device and dtype, and checks every
// task of the family against the module (package contract: the method
// schemas, and the keys of returned dicts where the TorchScript code shows
// them; for an AOTInductor package, the call spec it was exported for), so
// a manifest that disagrees with its checkpoint fails at load, not in the
// middle of a request, wherever the module tells. The checkpoint's format
// is the one its manifest entry declares, else the one recognised from the
// file.
//
// Each call validates nothing itself (generated params validate before they
// reach it), merges keyword arguments — variant call_kwargs, then the task's
// default_call_kwargs, then the caller's params, later layers winning — runs
// the task's method with the device's autocast setting, and maps the output
// onto the task's artifacts. Errors name the family, variant and task.
package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/device"
	"github.com/worldfoundry/wfgen/runtime/infra"
	"github.com/worldfoundry/wfgen/runtime/params"
	"github.com/worldfoundry/wfgen/runtime/stream"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// Options configure a Client; set them with Option functions.
type Options struct {
	// Variant selects the variant by id or alias; "" selects the default.
	Variant string
	// Device is the requested device ("cpu", "cuda", "cuda:1"); "" means
	// "cuda" with CPU fallback when no CUDA device exists.
	Device string
	// DType is the requested dtype ("auto", "float32", "float16", "bfloat16").
	DType string
	// ManifestDir is the folder relative checkpoint URIs resolve against first.
	ManifestDir string
	// CheckpointRoot is the folder relative URIs resolve against next
	// (default: $WORLDFOUNDRY_CHECKPOINT_ROOT).
	CheckpointRoot string
	// CheckpointPath, when set, is loaded instead of the file the variant's
	// model checkpoint URI names. It is verified against that checkpoint's
	// sha256 and size_bytes all the same.
	CheckpointPath string
	// SkipCheckpointVerification skips the sha256 and size_bytes check of
	// the model checkpoint, however it was found.
	SkipCheckpointVerification bool
	// Engine overrides the registered engine (tests use fakes).
	Engine engine.Engine
	// BatchInvariant runs every batched forward call at the task's max
	// batch size (batch.WithInvariant), single calls of a task whose
	// batching names its dimension included.
	BatchInvariant bool
	// SessionBatches, when set, is called after each call that ran the
	// steps of a session-batched task's sessions (spec.SessionBatchingSpec).
	SessionBatches func(SessionBatch)
	// SessionGate, when set, is held around each call that runs the steps
	// of a session-batched task's sessions (a server's engine slots, which
	// then bound one call of many sessions instead of each session's step).
	SessionGate func(ctx context.Context) (release func(), err error)
}

// SessionBatch describes one round's call of a session-batched task: the
// sessions whose steps it ran and what the batch executor made of them.
type SessionBatch struct {
	// Task is the task's id.
	Task string
	// Sessions is the number of sessions' steps run together.
	Sessions int
	// Calls is the number of forward calls they took (more than one above
	// the max batch size, or after an out-of-memory halving).
	Calls int
	// Padded is the number of padding rows sent (invariant padding).
	Padded int
}

// WithSessionBatches calls fn after each call that ran sessions' steps
// together (wfserve's wfserve_session_batch_size metric).
func WithSessionBatches(fn func(SessionBatch)) Option {
	return func(o *Options) { o.SessionBatches = fn }
}

// WithSessionGate holds gate around each call that runs sessions' steps
// together (Options.SessionGate).
func WithSessionGate(gate func(ctx context.Context) (release func(), err error)) Option {
	return func(o *Options) { o.SessionGate = gate }
}

// Option sets one client option.
type Option func(*Options)

// WithVariant selects a variant by id or alias.
func WithVariant(id string) Option { return func(o *Options) { o.Variant = id } }

// WithDevice selects the device ("cpu", "cuda", "cuda:N"). An explicit
// device is never silently replaced: "cuda" without a GPU is an error.
func WithDevice(device string) Option { return func(o *Options) { o.Device = device } }

// WithDType selects the dtype ("auto" by default).
func WithDType(dtype string) Option { return func(o *Options) { o.DType = dtype } }

// WithManifestDir sets the folder relative checkpoint URIs resolve against first.
func WithManifestDir(dir string) Option { return func(o *Options) { o.ManifestDir = dir } }

// WithCheckpointRoot sets the checkpoint root folder.
func WithCheckpointRoot(dir string) Option { return func(o *Options) { o.CheckpointRoot = dir } }

// WithCheckpointPath loads path instead of the file the variant's model
// checkpoint URI names. The file must still match the sha256 and
// size_bytes the manifest declares for that checkpoint, when it declares
// them; to load a different file on purpose (a fine-tune, a re-export), add
// WithoutCheckpointVerification.
func WithCheckpointPath(path string) Option { return func(o *Options) { o.CheckpointPath = path } }

// WithoutCheckpointVerification skips checking the model checkpoint against
// the sha256 and size_bytes the manifest declares, however the file was
// found. Without it a file that differs fails the load, naming what
// differed.
func WithoutCheckpointVerification() Option {
	return func(o *Options) { o.SkipCheckpointVerification = true }
}

// WithEngine uses e instead of a registered engine: it must read the
// checkpoint's format. Without it the client takes the registered engine
// that reads the format (engine.ForFormat: the default engine when it
// does).
func WithEngine(e engine.Engine) Option { return func(o *Options) { o.Engine = e } }

// WithBatchInvariant makes every batched forward call of the client run at
// the task's max batch size, as if every batchable task's manifest said
// invariant: true (see batch.WithInvariant): RunBatch, the generated
// <Task>Batch methods, and Run of a task whose batching names its
// dimension (which runs as a batch of one) then give an item the same bits
// however many items it came with. A server that batches requests across
// clients uses it so that an answer does not depend on how requests were
// grouped, and equals what an in-process client with the same option
// gives. Run of a batchable task without a batch dimension calls the
// method unbatched, which no padding can make equal to a batched call.
func WithBatchInvariant() Option { return func(o *Options) { o.BatchInvariant = true } }

// Client runs the tasks of one model family variant. It is safe for
// concurrent use.
type Client struct {
	spec    *spec.ModelInferenceSpec
	variant *spec.InferenceVariantSpec
	opts    Options

	mu     sync.Mutex
	closed bool
	loaded *loaded // nil until the first successful load
}

// loaded is what the first successful load resolved.
type loaded struct {
	mod      engine.Module
	key      moduleKey
	engine   engine.Engine
	device   string
	dtype    tensor.DType
	autocast engine.CallOptions
	tasks    []loadedTask     // by task index
	callSpec *engine.CallSpec // a compiled package's call spec; nil for TorchScript
	// batchSizes are the max batch sizes chosen from free memory, by task
	// id, for the tasks whose batching says scale_to_memory.
	batchSizes map[string]device.BatchSize
	// checkpoint identifies the loaded checkpoint's bytes in a stream's
	// origin (checkpointIdentity).
	checkpoint string
}

// loadedTask is what a call of one task needs, resolved at load.
type loadedTask struct {
	// args are the names of the arguments the task's method declares.
	args map[string]bool
	// tuple, when the method returns a tuple whose elements are the
	// artifacts (contract.TupleArtifacts), is the path of each artifact's
	// element in it (contract.TuplePaths); nil otherwise.
	tuple [][]int
	// outputs are the artifacts' declared dtypes and shapes.
	outputs params.OutputRules
	// base is the variant's call_kwargs, then the task's
	// default_call_kwargs, in the engine's value form; baseErr is why
	// they have none.
	base    map[string]any
	baseErr error
	// batch and batchCfg are the options and config of a batched run of a
	// batchable task when the caller adds none (Client.batchConfig, with
	// the load's call spec), resolved once instead of per call; batchErr
	// is why the task has none.
	batch    []batch.Option
	batchCfg batch.Config
	batchErr error
	// equiv holds the batch sizes equivalent to the max in invariant mode,
	// measured before the first invariant batch (equivalentSizes).
	equiv *equivalence
	// steps, on a session-batched streaming task, is the index in the
	// loaded tasks of its batched steps (stepsTask); 0 otherwise.
	steps int
	// task is the profile of a loaded task past the spec's tasks (the
	// batched steps of a session-batched task: contract.BatchedSteps);
	// nil for the spec's own.
	task *spec.InferenceTaskProfile
	// queue gathers the steps of a batched steps task's sessions.
	queue *stepQueue
}

// New returns a client for spec. It resolves the variant and checks the
// dtype name now; the module is loaded on first use.
func New(spec *spec.ModelInferenceSpec, opts ...Option) (*Client, error) {
	if spec == nil {
		return nil, errors.New("client: nil spec")
	}
	var o Options
	for _, f := range opts {
		f(&o)
	}
	v, err := spec.Variant(o.Variant)
	if err != nil {
		return nil, err
	}
	if _, err := device.ParseDType(o.DType); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", spec.ModelFamilyID, v.VariantID, err)
	}
	return &Client{spec: spec, variant: v, opts: o}, nil
}

// Spec returns the client's family spec.
func (c *Client) Spec() *spec.ModelInferenceSpec { return c.spec }

// Variant returns the resolved variant.
func (c *Client) Variant() *spec.InferenceVariantSpec { return c.variant }

func (c *Client) where(task string) string {
	if task == "" {
		return c.spec.ModelFamilyID + "/" + c.variant.VariantID
	}
	return c.spec.ModelFamilyID + "/" + c.variant.VariantID + " " + task
}

// Load loads the module now (it is otherwise loaded on first use) and
// returns the device and dtype it runs with.
func (c *Client) Load() (device string, dtype tensor.DType, err error) {
	l, err := c.load()
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", c.where(""), err)
	}
	return l.device, l.dtype, nil
}

// Module returns the loaded module (loading it if needed).
func (c *Client) Module() (engine.Module, error) {
	l, err := c.load()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err)
	}
	return l.mod, nil
}

// load resolves, verifies, loads and checks the module once per client.
// Its errors do not name the family and variant: callers add c.where.
func (c *Client) load() (*loaded, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, engine.ErrClosed
	}
	if c.loaded != nil {
		return c.loaded, nil
	}
	l, err := c.loadLocked()
	if err != nil {
		return nil, err
	}
	c.loaded = l
	return l, nil
}

// current returns the loaded module, or nil before the load and after
// Close.
func (c *Client) current() *loaded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded
}

func (c *Client) loadLocked() (*loaded, error) {
	eng := c.opts.Engine
	if eng == nil && len(engine.Engines()) == 0 {
		return nil, engine.ErrNoEngine
	}
	ref, hasRef := modelCheckpoint(c.variant)
	path := c.opts.CheckpointPath
	if path == "" {
		if !hasRef {
			return nil, fmt.Errorf("%w: variant has no checkpoint with role %q; pass a checkpoint path", ErrCheckpoint, "model")
		}
		var err error
		if path, err = ResolveCheckpoint(ref, c.opts.ManifestDir, c.opts.CheckpointRoot); err != nil {
			return nil, err
		}
	}
	if hasRef && !c.opts.SkipCheckpointVerification {
		if err := VerifyCheckpoint(path, ref); err != nil {
			return nil, err
		}
	}
	ckID, err := checkpointIdentity(path, ref, hasRef && !c.opts.SkipCheckpointVerification)
	if err != nil {
		return nil, err
	}
	format, err := engine.ResolveFormat(path, ref.Format)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	if eng == nil {
		eng, err = engine.ForFormat(format)
	} else {
		err = engine.CheckReads(eng, format)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	dev, err := device.Resolve(eng, c.opts.Device, c.opts.Device == "")
	if err != nil {
		return nil, err
	}
	dtype, err := device.ResolveDType(eng, dev, c.opts.DType, true)
	if err != nil {
		return nil, err
	}
	if p, _ := device.ParseDType(c.opts.DType); format == spec.FormatAOTInductor && p == device.Auto {
		dtype = "" // a compiled package keeps the dtype it was exported with
	}
	ac, err := device.Autocast(eng, dev, string(dtype), true)
	if err != nil {
		return nil, err
	}
	// The policy is process state, installed once: infra.Install does
	// nothing while it is installed. Until a malformed variable is fixed,
	// every load fails as infra.Run does.
	if _, err := infra.Install(infra.Options{}); err != nil {
		return nil, fmt.Errorf("inference policy: %w", err)
	}
	libs, err := c.opLibraries()
	if err != nil {
		return nil, err
	}
	mod, key, err := acquire(eng, path, format, dev, dtype, c.variant.Compile, libs)
	if err != nil {
		return nil, err
	}
	l := &loaded{checkpoint: ckID, mod: mod, key: key, engine: eng, device: dev, dtype: dtype, autocast: ac, tasks: make([]loadedTask, len(c.spec.Tasks))}
	for i := range c.spec.Tasks {
		t := &c.spec.Tasks[i]
		lt := &l.tasks[i]
		lt.outputs = params.CompileOutputs(t)
		lt.base, lt.baseErr = MergeKwargs(c.variant.CallKwargs, t.DefaultCallKwargs)
	}
	var errs []error
	var returns map[string]contract.MethodReturns
	if cs, ok := mod.(engine.CallSpecModule); ok {
		spec, err := cs.CallSpec(spec.DefaultMethod)
		if err != nil {
			release(key)
			return nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		l.callSpec = &spec
	} else {
		returns = readReturns(path)
	}
	for i := range c.spec.Tasks {
		t := &c.spec.Tasks[i]
		if schema, err := mod.Schema(t.MethodName()); err == nil {
			l.tasks[i].tuple = contract.TuplePaths(t, schema)
			l.tasks[i].args = map[string]bool{}
			for _, a := range schema.Arguments {
				l.tasks[i].args[a.Name] = true
			}
		}
		if l.callSpec != nil {
			err = contract.CheckCallSpec(t, c.variant, *l.callSpec)
		} else {
			err = contract.CheckTask(t, c.variant, mod, returns)
		}
		if err != nil {
			errs = append(errs, err) // names the task
		}
	}
	if len(errs) > 0 {
		release(key)
		return nil, fmt.Errorf("checkpoint %s: %w", path, errors.Join(errs...))
	}
	for i := range c.spec.Tasks {
		t := &c.spec.Tasks[i]
		if t.Batching == nil || !t.Batching.ScaleToMemory || t.Batching.MaxBatchSize < 1 {
			continue
		}
		bs, err := device.ChooseBatchSize(l.engine, l.device, t.TaskID, t.Batching.MaxBatchSize)
		if err != nil {
			release(key)
			return nil, fmt.Errorf("task %q: max batch size from free memory: %w", t.TaskID, err)
		}
		if l.batchSizes == nil {
			l.batchSizes = map[string]device.BatchSize{}
		}
		l.batchSizes[t.TaskID] = bs
		slog.Info("max batch size from free memory", "model", c.where(t.TaskID), "size", bs.Size, "source", string(bs.Source), "detail", bs.Detail)
	}
	for i := range c.spec.Tasks {
		if t := &c.spec.Tasks[i]; t.Batching != nil {
			lt := &l.tasks[i]
			lt.batch, lt.batchCfg, lt.batchErr = c.batchConfig(t, l, nil)
			lt.equiv = &equivalence{}
		}
	}
	l.addSteps(c)
	return l, nil
}

// opLibraries resolves the op libraries of the client's variant (the
// variant's op_libraries, else the family's) to files, as checkpoint URIs
// are resolved.
func (c *Client) opLibraries() ([]string, error) {
	libs := c.spec.OpLibrariesFor(c.variant)
	if len(libs) == 0 {
		return nil, nil
	}
	out := make([]string, len(libs))
	for i, l := range libs {
		p, err := ResolveOpLibrary(l, c.opts.ManifestDir, c.opts.CheckpointRoot)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// readReturns reads what the checkpoint's TorchScript code tells about the
// dicts its methods return (contract.ReadReturns); nil when the file is not
// a TorchScript archive it can read.
func readReturns(path string) map[string]contract.MethodReturns {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return contract.ReadReturns(f, st.Size())
}

func modelCheckpoint(v *spec.InferenceVariantSpec) (spec.InferenceCheckpointRef, bool) {
	for _, ck := range v.Checkpoints {
		if ck.Role == "model" {
			return ck, true
		}
	}
	return spec.InferenceCheckpointRef{}, false
}

// Reserved argument names a streaming task's method may take besides its
// fields: the frames wanted, the controls in the realtime spec's order, and
// the session state from the previous step (the contract check's names).
const (
	ArgNumFrames = contract.ArgNumFrames
	ArgControls  = contract.ArgControls
	ArgState     = contract.ArgState
)

// taskIndex returns the index of task in the client's spec: task is one of
// its Tasks (a generated Task's, a server's), or a task of another copy
// of the family's spec, matched by id.
func (c *Client) taskIndex(task *spec.InferenceTaskProfile) (int, error) {
	for i := range c.spec.Tasks {
		if &c.spec.Tasks[i] == task {
			return i, nil
		}
	}
	for i := range c.spec.Tasks {
		if c.spec.Tasks[i].TaskID == task.TaskID {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%s: task %q is not a task of the family: %w", c.where(""), task.TaskID, spec.ErrUnknownID)
}

// kwargs returns the call kwargs of item of in: the task's base kwargs
// (variant call_kwargs, then default_call_kwargs) and the item's set
// call_kwargs fields over them.
func (l *loaded) kwargs(ti int, task *spec.InferenceTaskProfile, in Inputs, item int) (map[string]any, error) {
	lt := &l.tasks[ti]
	if lt.baseErr != nil {
		return nil, lt.baseErr
	}
	kw := make(map[string]any, len(lt.base)+len(task.Inputs))
	for k, v := range lt.base {
		kw[k] = v
	}
	for f := range task.Inputs {
		if !task.Inputs[f].CallKwarg() {
			continue
		}
		if v := in.Input(item, f); v != nil {
			kw[task.Inputs[f].FieldID] = v
		}
	}
	return kw, nil
}

// Call runs one call of task (a task of Spec) with the one item of in and
// returns the outputs keyed by artifact id. Load kwargs select nothing in
// a TorchScript checkpoint and are accepted for the manifest's sake; they
// do not change the loaded module. A task whose batching names its batch
// dimension (batching.dim) runs as a batch of one, through CallBatch, so
// that the method always sees that dimension; any other task calls its
// method once with the call kwargs: the variant's call_kwargs, then the
// task's default_call_kwargs, then the item's set fields. Outputs whose
// dtype or shape break the artifacts' declarations are an error wrapping
// params.ErrOutputContract.
//
// opts set per-call options (WithOutputBuffer).
func (c *Client) Call(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, opts ...CallOption) (map[string]any, error) {
	ti, err := c.taskIndex(task)
	if err != nil {
		return nil, err
	}
	if err := OneItem(in); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	co := callOptions(opts)
	if b := task.Batching; b != nil && b.Dim != "" {
		var out map[string]any
		err := c.callBatch(ctx, ti, task, in, co, func(_ int, m map[string]any) error {
			out = maps.Clone(m)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	l, err := c.load()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err) // a load error is the variant's, not the task's
	}
	if q := l.stepsOf(ti); q != nil {
		return c.firstChunk(ctx, l, ti, task, in, q)
	}
	out, err := c.call(ctx, l, ti, task, in, co)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return out, nil
}

// firstChunk is a call of a session-batched task (index ti): the first
// chunk of a fresh session, through the sessions' queue q, so that it has
// the bits its session would get.
func (c *Client) firstChunk(ctx context.Context, l *loaded, ti int, task *spec.InferenceTaskProfile, in Inputs, q *stepQueue) (map[string]any, error) {
	kw, err := l.kwargs(ti, task, in, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	rt := spec.DefaultRealtimeSpec()
	if c.spec.Realtime != nil {
		rt = *c.spec.Realtime
	}
	row, err := stepRow(kw, l.tasks[ti].args, rt.FirstChunkFrames, rt.Controls, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	out, err := q.step(ctx, row) // named by the queue
	if err != nil {
		return nil, err
	}
	video := streamVideo(task)
	res, err := l.checkedOutputs(ti, task, map[string]any{video: out[video]})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return res, nil
}

func (c *Client) call(ctx context.Context, l *loaded, ti int, task *spec.InferenceTaskProfile, in Inputs, co CallOptions) (map[string]any, error) {
	kw, err := l.kwargs(ti, task, in, 0)
	if err != nil {
		return nil, err
	}
	if task.Stream {
		c.oneChunk(l.tasks[ti].args, kw)
	}
	raw, err := l.mod.Call(ctx, task.MethodName(), kw, co.engine(l.autocast))
	if err != nil {
		return nil, err
	}
	if m, ok := raw.(map[string]any); ok && task.Stream {
		delete(m, ArgState)
		delete(m, "realtime")
	}
	return l.checkedOutputs(ti, task, raw)
}

// checkedOutputs maps a method's return value onto the task's artifacts
// (Outputs) and checks their declared dtypes and shapes.
func (l *loaded) checkedOutputs(ti int, task *spec.InferenceTaskProfile, raw any) (map[string]any, error) {
	out, err := outputs(task, raw, l.tasks[ti].tuple)
	if err != nil {
		return nil, err
	}
	if err := l.tasks[ti].outputs.Check(out); err != nil {
		return nil, err
	}
	return out, nil
}

// oneChunk supplies the reserved stream arguments the method declares
// (args) and the caller left out, so that a call of a streaming task
// produces the first chunk of a fresh session: first_chunk_frames frames,
// every control off, no state.
func (c *Client) oneChunk(args map[string]bool, kw map[string]any) {
	rt := spec.DefaultRealtimeSpec()
	if c.spec.Realtime != nil {
		rt = *c.spec.Realtime
	}
	if _, given := kw[ArgNumFrames]; args[ArgNumFrames] && !given {
		kw[ArgNumFrames] = int64(rt.FirstChunkFrames)
	}
	if _, given := kw[ArgControls]; args[ArgControls] && !given {
		zeros := make([]any, len(rt.Controls))
		for i := range zeros {
			zeros[i] = 0.0
		}
		kw[ArgControls] = zeros
	}
}

// CallBatch runs a batchable task (a task of Spec) over the items of in:
// each item's stacked inputs (call_kwargs fields of kind tensor, image or
// video) are stacked along a new leading dimension, batches follow the
// task's batching settings (max size, static pad sizes, out-of-memory
// halving; see package batch), and each output tensor is split back per
// item. The items must share forward calls (BatchConflict: equal stacked
// dtypes and shapes, equal other inputs); an error names the first that
// does not, before anything is loaded. opts are passed to batch.Run after
// the manifest's and are checked with the same rules (batch.NewConfig). An
// AOTInductor package takes only the batch sizes it was exported for
// (contract.BatchRange): larger batches are split, shorter ones padded up
// to its minimum (batch.WithBatchRange).
//
// When the run is over, each is called with every item that ran, in
// order, and its outputs keyed by artifact id: views of the forward call's
// output, in a map that each must not keep. With batch.WithPerItemErrors
// the error lists the items that failed on their own, which each does not
// see; a sharded run (batch.WithSharding) calls each on the ranks that
// receive the outputs only.
//
// A task is batched only when spec.InferenceTaskProfile.BatchingProblems
// finds nothing, whether the spec comes from a validated manifest or was
// built by hand: in particular it needs a required call_kwargs input of
// kind tensor, image or video, and every item must give that input as a
// tensor. Nothing runs otherwise.
func (c *Client) CallBatch(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, each func(item int, out map[string]any) error, opts ...batch.Option) error {
	ti, err := c.taskIndex(task)
	if err != nil {
		return err
	}
	return c.callBatch(ctx, ti, task, in, CallOptions{}, each, opts...)
}

// callBatch is CallBatch with the per-call options of every forward call.
func (c *Client) callBatch(ctx context.Context, ti int, task *spec.InferenceTaskProfile, in Inputs, co CallOptions, each func(int, map[string]any) error, opts ...batch.Option) error {
	outs, err := c.runStacked(ctx, ti, task, in, co, opts...)
	if outs == nil {
		return err
	}
	m := make(map[string]any, len(task.Outputs))
	for i, o := range outs {
		if !o.ran() {
			continue
		}
		o.fill(m)
		if err := each(i, m); err != nil {
			return err
		}
	}
	return err
}

// CallStream runs a streaming task (a task of Spec) as a realtime session
// with the one item of in: chunk after chunk the task's method is called
// with the call kwargs plus, where its schema declares them, num_frames
// (frames wanted), controls (List[float] in the realtime spec's control
// order) and state (what the previous step returned under the "state" key;
// None first). The method returns a dict with the task's video artifact,
// optionally "state" and optionally "realtime" (metadata that may change
// the cadence of later chunks; malformed metadata is ignored). opts
// configure the session (pacing, controls, chunk limit).
func (c *Client) CallStream(ctx context.Context, task *spec.InferenceTaskProfile, in Inputs, opts ...stream.Option) (*stream.Session, error) {
	ti, err := c.taskIndex(task)
	if err != nil {
		return nil, err
	}
	if err := OneItem(in); err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	if !task.Stream {
		return nil, fmt.Errorf("%s: task is not a streaming task (stream: true)", c.where(task.TaskID))
	}
	video := streamVideo(task)
	if video == "" {
		return nil, fmt.Errorf("%s: a streaming task needs a video artifact", c.where(task.TaskID))
	}
	l, err := c.load()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(""), err) // a load error is the variant's, not the task's
	}
	base, err := l.kwargs(ti, task, in, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	has := l.tasks[ti].args
	var step stream.StepFunc
	if q := l.stepsOf(ti); q != nil {
		step = func(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
			row, err := stepRow(base, has, req.Frames, req.Spec.Controls, req.Controls, req.State)
			if err != nil {
				return stream.StepResult{}, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
			}
			out, err := q.step(ctx, row) // named by the queue
			if err != nil {
				return stream.StepResult{}, err
			}
			return stream.StepResult{Frames: out[video], State: out[ArgState]}, nil
		}
	} else {
		step = c.stepCall(l, ti, task, base, video)
	}
	origin := stream.Origin{Family: c.spec.ModelFamilyID, Variant: c.variant.VariantID, Checkpoint: l.checkpoint, Task: task.TaskID, Params: streamParams(task, in)}
	return stream.New(c.spec.Realtime, step, append([]stream.Option{stream.WithOrigin(origin)}, opts...)...)
}

// stepCall returns the step function of a session of task (index ti) that
// calls its method once per step with the call kwargs base.
func (c *Client) stepCall(l *loaded, ti int, task *spec.InferenceTaskProfile, base map[string]any, video string) stream.StepFunc {
	has := l.tasks[ti].args
	return func(ctx context.Context, req stream.StepRequest) (stream.StepResult, error) {
		kw := make(map[string]any, len(base)+3)
		for k, v := range base {
			kw[k] = v
		}
		if has[ArgNumFrames] {
			kw[ArgNumFrames] = int64(req.Frames)
		}
		if has[ArgControls] {
			vals := make([]any, len(req.Spec.Controls))
			for i, name := range req.Spec.Controls {
				vals[i] = req.Controls[name]
			}
			kw[ArgControls] = vals
		}
		if has[ArgState] && req.State != nil {
			kw[ArgState] = req.State
		}
		raw, err := l.mod.Call(ctx, task.MethodName(), kw, l.autocast)
		if err != nil {
			return stream.StepResult{}, fmt.Errorf("%s: %w", c.where(task.TaskID), err) // the stream names the chunk
		}
		res := stream.StepResult{Frames: raw}
		if m, ok := raw.(map[string]any); ok {
			res.Frames = m[video]
			res.State = m[ArgState]
			res.Realtime = m["realtime"]
		}
		return res, nil
	}
}

// streamParams returns the item's set call_kwargs fields, by field id:
// the params of a stream's origin.
func streamParams(task *spec.InferenceTaskProfile, in Inputs) map[string]any {
	var out map[string]any
	for f := range task.Inputs {
		if !task.Inputs[f].CallKwarg() {
			continue
		}
		if v := in.Input(0, f); v != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[task.Inputs[f].FieldID] = v
		}
	}
	return out
}

// RestoreStream opens a session of the snapshot's task from snap (a
// snapshot of a CallStream session: Session.Snapshot, or stream.Open of a
// token) with its params: its chunks continue snap bit for bit, given the
// same controls. snap must come from this client's model — family,
// variant, checkpoint (its sha256, or path, size and mtime when the
// manifest gives none or verification is off), task and params — else
// the error matches stream.ErrForeignModel; a finished session's snapshot
// is refused (stream.ErrFinished). opts configure the new session (its
// controls, pacing, chunk limit, stream.WithReplay). A generated client
// does the same with stream.FromSnapshot(snap) among its <Task>Stream
// options and the snapshot's params.
func (c *Client) RestoreStream(ctx context.Context, snap stream.Snapshot, opts ...stream.Option) (*stream.Session, error) {
	task, in, err := RestoreCall(ctx, c.spec, c.variant.VariantID, snap)
	if err != nil {
		id := ""
		if task != nil {
			id = task.TaskID
		}
		return nil, fmt.Errorf("%s: %w", c.where(id), err)
	}
	return c.CallStream(ctx, task, in, append(opts, stream.FromSnapshot(snap))...)
}

// RestoreCall is the call that restores snap on a backend of family s's
// variant variantID: the snapshot's task and its params as Inputs. A
// snapshot of another family or variant is an error matching
// stream.ErrForeignModel; an unknown task an error with no task; params
// the task refuses an error with the task ("snapshot params: ..."). Errors
// name no client: the caller says where. It is the one check of the
// in-process and the remote RestoreStream.
func RestoreCall(ctx context.Context, s *spec.ModelInferenceSpec, variantID string, snap stream.Snapshot) (*spec.InferenceTaskProfile, Inputs, error) {
	for _, f := range [...]struct{ name, snap, own string }{
		{"family", snap.Origin.Family, s.ModelFamilyID},
		{"variant", snap.Origin.Variant, variantID},
	} {
		if f.snap != f.own {
			return nil, nil, &stream.OriginMismatchError{Field: f.name, Snapshot: fmt.Sprintf("%q", f.snap), Session: fmt.Sprintf("%q", f.own)}
		}
	}
	task, err := s.Task(snap.Origin.Task)
	if err != nil {
		return nil, nil, err
	}
	in, err := KwargsOf(ctx, task, []map[string]any{snap.Origin.Params}, nil)
	if err != nil {
		return task, nil, fmt.Errorf("snapshot params: %w", err)
	}
	return task, in, nil
}

// ForkStream restores snap into n independent sessions (RestoreStream);
// opts(i), when not nil, gives session i's options (its controls, say).
func (c *Client) ForkStream(ctx context.Context, snap stream.Snapshot, n int, opts func(i int) []stream.Option) ([]*stream.Session, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: fork into %d sessions, want ≥ 0", c.where(snap.Origin.Task), n)
	}
	return Fork(ctx, c.RestoreStream, snap, n, opts)
}

// Fork restores snap n times with restore (a Restorer's RestoreStream),
// session i with the options opts(i) gives (none when opts is nil): the
// one ForkStream of every backend. n must not be negative.
func Fork(ctx context.Context, restore func(context.Context, stream.Snapshot, ...stream.Option) (*stream.Session, error), snap stream.Snapshot, n int, opts func(i int) []stream.Option) ([]*stream.Session, error) {
	out := make([]*stream.Session, n)
	for i := range out {
		var o []stream.Option
		if opts != nil {
			o = opts(i)
		}
		s, err := restore(ctx, snap, o...)
		if err != nil {
			return nil, fmt.Errorf("fork %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// streamVideo returns the id of a streaming task's video artifact, "" when
// it has none.
func streamVideo(task *spec.InferenceTaskProfile) string {
	for _, a := range task.Outputs {
		if a.Kind.Picture() == spec.PictureVideo {
			return a.ArtifactID
		}
	}
	return ""
}

// kwargsInputs resolves a task by id and returns call and load kwargs (any
// Go values engine.ValueOf converts) as its Inputs: the untyped entry points
// (Run, RunBatch, Stream) over Call, CallBatch and CallStream.
func (c *Client) kwargsInputs(ctx context.Context, taskID string, items []map[string]any, load map[string]any) (*spec.InferenceTaskProfile, Inputs, error) {
	task, err := c.spec.Task(taskID)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.where(""), err)
	}
	in, err := KwargsOf(ctx, task, items, load)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.where(task.TaskID), err)
	}
	return task, in, nil
}

// Run runs task taskID with untyped call and load kwargs keyed by field id
// (values engine.ValueOf converts): Call with them as Inputs (KwargsOf).
func (c *Client) Run(ctx context.Context, taskID string, call, load map[string]any, opts ...CallOption) (map[string]any, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, []map[string]any{call}, load)
	if err != nil {
		return nil, err
	}
	return c.Call(ctx, task, in, opts...)
}

// RunBatch runs task taskID over items given as untyped call kwargs
// (values engine.ValueOf converts) and returns each item's outputs in input
// order, nil for an item that failed on its own: CallBatch with them as
// Inputs (KwargsOf).
func (c *Client) RunBatch(ctx context.Context, taskID string, items []map[string]any, opts ...batch.Option) ([]map[string]any, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, items, nil)
	if err != nil {
		return nil, err
	}
	return CollectBatch(ctx, c, task, in, opts...)
}

// Stream starts a realtime session of task taskID with untyped call kwargs
// (values engine.ValueOf converts): CallStream with them as Inputs (KwargsOf).
func (c *Client) Stream(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) (*stream.Session, error) {
	task, in, err := c.kwargsInputs(ctx, taskID, []map[string]any{call}, nil)
	if err != nil {
		return nil, err
	}
	return c.CallStream(ctx, task, in, opts...)
}

// Chunks is a convenience over Stream that returns the session's iterator.
func (c *Client) Chunks(ctx context.Context, taskID string, call map[string]any, opts ...stream.Option) iter.Seq2[stream.Chunk, error] {
	s, err := c.Stream(ctx, taskID, call, opts...)
	if err != nil {
		return func(yield func(stream.Chunk, error) bool) { yield(stream.Chunk{}, err) }
	}
	return s.Chunks(ctx)
}

// Unload gives back the loaded model, as Close does, but leaves the
// client open: the next call loads it again (a model repository's unload,
// docs/serving.md). The module is freed once no client uses it and
// ReleaseCaches runs. A call already running keeps the module it started
// with until it returns: the caller should let the running calls finish
// first.
func (c *Client) Unload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded != nil {
		release(c.loaded.key)
		c.loaded = nil
	}
}

// Close releases the client's hold on its cached module. It is safe to call
// twice; later calls return engine.ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.loaded != nil {
		release(c.loaded.key)
		c.loaded = nil
	}
	return nil
}
