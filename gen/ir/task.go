package ir

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"

	"github.com/worldfoundry/wfgen/gen/manifest"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// identifier is what a keyword argument or TorchScript method name must be.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pythonReserved are names a TorchScript method cannot take as a keyword
// argument.
var pythonReserved = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true, "self": true,
}

// task checks and resolves task i; declare says its names are to be
// declared (its id is not a duplicate).
func (b *builder) task(client *scope, i int, declare bool) *Task {
	s := b.fam.Spec
	ts := &s.Tasks[i]
	tp := manifest.Pointer("tasks", i)
	name := manifest.Sprintf("task %q", ts.TaskID)
	if ts.Method != "" && !b.pruned(tp+"/method") && !identifier.MatchString(ts.Method) {
		b.report(tp+"/method", false, "%s: method %q is not a TorchScript method name (letters, digits and '_', not starting with a digit)", name, ts.Method)
	}
	if len(ts.Outputs) == 0 && !b.pruned(tp+"/outputs") {
		b.report(tp, false, "%s has no outputs; list at least one artifact under outputs", name)
	}
	if ts.Stream && !s.SupportsStream && !b.pruned(tp+"/stream") {
		b.report(tp+"/stream", false, "%s is a stream task, but the family does not set supports_stream: true", name)
	}
	b.batching(ts, tp, name)
	b.sessionBatching(ts, tp, name)
	b.openai(ts, tp, name)

	goName := b.goName(ts.TaskID, ts.GoName, tp)
	t := &Task{
		Spec: ts, Index: i, Name: goName,
		Const:    constName("Task", ts.TaskID, ts.GoName),
		Params:   goName + "Params",
		Result:   goName + "Result",
		Defaults: "Default" + goName + "Params",
		Var:      "task" + goName,
	}
	if ts.Batching != nil {
		t.Batch = goName + "Batch"
	}
	if ts.Stream {
		t.Stream = goName + "Stream"
	}
	// Every name of the task but its constant derives from its Go name:
	// when that collides, the others would too and are not reported.
	if at := nameAt(tp, "task_id", ts.GoName); declare && client.declare(b, t.Name, name, at) {
		b.pkg.declare(b, t.Const, name+" (task constant)", at)
		b.pkg.declare(b, t.Params, name+" (params type)", at)
		b.pkg.declare(b, t.Result, name+" (result type)", at)
		b.pkg.declare(b, t.Defaults, name+" (default params function)", at)
		if t.Batch != "" {
			client.declare(b, t.Batch, name+" (batch client method)", at)
		}
		if t.Stream != "" {
			client.declare(b, t.Stream, name+" (stream client method)", at)
		}
	}

	var fieldNames scope
	fieldNames.declareFixed(paramsMethods, "the params method")
	ids := map[string]int{}
	for j := range ts.Inputs {
		t.Fields = append(t.Fields, b.field(t, &fieldNames, ids, j))
	}

	for _, f := range t.Fields {
		if f.FromPicture != "" && f.Spec.FieldID != "" && ids[f.Spec.FieldID] == f.Index {
			fieldNames.declare(b, f.FromPicture, manifest.Sprintf("%s field %q (picture setter)", name, f.Spec.FieldID), nameAt(manifest.Pointer("tasks", i, "inputs", f.Index), "field_id", f.Spec.GoName))
		}
	}

	var artNames scope
	arts := map[string]int{}
	for j := range ts.Outputs {
		a := &ts.Outputs[j]
		ap := manifest.Pointer("tasks", i, "outputs", j)
		ra := &Artifact{Spec: a, Index: j, Kind: a.Kind, Name: b.goName(a.ArtifactID, a.GoName, ap), Type: artifactType(a)}
		t.Artifacts = append(t.Artifacts, ra)
		if a.ArtifactID == "" || b.pruned(ap+"/artifact_id") {
			continue
		}
		if a.Kind.Holds().IsRecord() {
			ra.Record = b.record(t, ra, ap, declare)
			ra.Type.Pkg, ra.Type.Name = "", ra.Record.Type
		}
		if first, dup := arts[a.ArtifactID]; dup {
			b.report(ap+"/artifact_id", false, "%s: duplicate artifact id %q (first defined at line %d)", name, a.ArtifactID, b.f.Line(manifest.Pointer("tasks", i, "outputs", first, "artifact_id")))
			continue
		}
		arts[a.ArtifactID] = j
		artNames.declare(b, ra.Name, manifest.Sprintf("%s artifact %q", name, a.ArtifactID), nameAt(ap, "artifact_id", a.GoName))
		if !a.Kind.Valid() && !b.pruned(ap+"/kind") {
			b.report(ap+"/kind", false, "artifact kind %q is not one of %s", a.Kind, spec.ArtifactKindList())
		}
		aname := manifest.Sprintf("%s artifact %q", name, a.ArtifactID)
		b.problems(ap, aname, a.FPSProblems())
		b.artifactContract(ap, aname, a, ts.Batching != nil && ts.Batching.Dim != "")
	}

	b.problems(tp, name, ts.OutputProblems())
	b.dims(ts, tp, name)

	// Default call kwargs that set a field must fit it.
	for k, v := range ts.DefaultCallKwargs {
		j, ok := ids[k]
		if !ok {
			continue
		}
		p := tp + "/default_call_kwargs" + manifest.JoinPointer(k)
		if b.pruned(p) {
			continue
		}
		if nv, ok := b.fieldValue(name, &ts.Inputs[j], v, p, "default_call_kwargs value"); ok {
			ts.DefaultCallKwargs[k] = nv
		}
	}
	b.warmup(ts, tp, name)
	return t
}

// warmup checks a task's warmup block: that runtime/client can build its
// inputs (spec.InferenceTaskProfile.WarmupValues, whose rules refuse the
// same block at run time), and that each warm-up input fits its field,
// normalising it in place as defaults are.
func (b *builder) warmup(ts *spec.InferenceTaskProfile, tp, name string) {
	w := ts.Warmup
	if w == nil || b.pruned(tp+"/warmup") {
		return
	}
	_, ps := ts.WarmupValues()
	b.problems(tp, name, ps)
	for k, v := range w.Inputs {
		f, ok := ts.Field(k)
		p := tp + "/warmup/inputs" + manifest.JoinPointer(k)
		if !ok || f.Kind.TensorLike() || b.pruned(p) {
			continue // a problem above
		}
		if nv, ok := b.fieldValue(name, f, v, p, "warm-up input"); ok {
			w.Inputs[k] = nv
		}
	}
}

// batching checks a task's batching block with the runtime's rules
// (spec.InferenceTaskProfile.BatchingProblems), which refuse the same
// settings at run time.
func (b *builder) batching(ts *spec.InferenceTaskProfile, tp, name string) {
	if ts.Batching == nil || b.pruned(tp+"/batching") {
		return
	}
	b.problems(tp, name, ts.BatchingProblems())
}

// sessionBatching checks a task's session_batching block with the
// runtime's rules (spec.InferenceTaskProfile.SessionBatchingProblems).
func (b *builder) sessionBatching(ts *spec.InferenceTaskProfile, tp, name string) {
	if ts.SessionBatching == nil || b.pruned(tp+"/session_batching") {
		return
	}
	b.problems(tp, name, ts.SessionBatchingProblems())
}

// openai checks a task's openai block with the runtime's rules
// (spec.InferenceTaskProfile.OpenAIProblems), which wfserve applies too.
func (b *builder) openai(ts *spec.InferenceTaskProfile, tp, name string) {
	if ts.OpenAI == nil || b.pruned(tp+"/openai") {
		return
	}
	b.problems(tp, name, ts.OpenAIProblems())
}

// problems reports runtime problems located relative to the value at base.
func (b *builder) problems(base, name string, ps []spec.Problem) {
	for _, p := range ps {
		at := base
		if p.Path != "" {
			at += "/" + p.Path
		}
		if !b.pruned(at) {
			b.report(at, p.Key, "%s: %s", name, p.Message)
		}
	}
}

// artifactType is the Go type of an artifact in the result struct: its
// kind's (spec.ArtifactInfo.Go), a pointer to an optional string; for a
// record kind, a pointer to or slice of the struct the task names
// (Artifact.Record).
func artifactType(a *spec.InferenceArtifactSpec) GoType {
	info, ok := a.Kind.Info()
	if !ok { // a kind that is not valid, reported at its key
		info, _ = spec.ArtifactTensor.Info()
	}
	switch info.Holds {
	case spec.HoldsRecord: // a pointer to the generated struct (Artifact.Record)
		return GoType{Pointer: true}
	case spec.HoldsRecordList: // a slice of it
		return GoType{Slice: true}
	}
	t := goTypeOf(info.Go)
	if info.Go.Kind() == reflect.String && !a.Required {
		t.Pointer = true
	}
	return t
}

// record resolves the struct of record artifact a of task t (at ap):
// its type name, declared in the package when declare says the task's
// names are, and a field per key, named by the key (or go_name) and
// unique within the struct.
func (b *builder) record(t *Task, a *Artifact, ap string, declare bool) *Record {
	r := &Record{Type: t.Name + a.Name}
	what := manifest.Sprintf("task %q artifact %q", t.Spec.TaskID, a.Spec.ArtifactID)
	if declare {
		b.pkg.declare(b, r.Type, what+" (record type)", nameAt(ap, "artifact_id", a.Spec.GoName))
	}
	info, _ := a.Kind.Info()
	var names scope
	keys := map[string]bool{}
	for k := range a.Spec.Fields {
		f := &a.Spec.Fields[k]
		fp := manifest.Pointer("tasks", t.Index, "outputs", a.Index, "fields", k)
		rf := &RecordField{Spec: f, Name: b.goName(f.Name, f.GoName, fp), Type: goTypeOf(info.Go)}
		r.Fields = append(r.Fields, rf)
		dup := keys[f.Name] // reported by spec's output rules
		keys[f.Name] = true
		if f.Name != "" && !dup && !b.pruned(fp+"/name") {
			names.declare(b, rf.Name, manifest.Sprintf("%s field %q", what, f.Name), nameAt(fp, "name", f.GoName))
		}
	}
	return r
}

// artifactContract checks an artifact's dtype, shape and image spec.
func (b *builder) artifactContract(ap, name string, a *spec.InferenceArtifactSpec, batched bool) {
	for key, set := range map[string]bool{"dtype": a.DType != "", "shape": a.Shape != nil} {
		if set && !a.Kind.TensorLike() && !b.pruned(ap+"/"+key) {
			b.report(ap+"/"+key, true, "%s: %s applies to tensor-like artifacts (video, image, embedding, tensor, tensor_list), not %s", name, key, a.Kind)
		}
	}
	if a.Image == nil || b.pruned(ap+"/image") {
		return
	}
	kind, ok := a.Kind.FieldKind()
	if !ok {
		b.report(ap+"/image", true, "%s: image applies to image and video artifacts, not %s", name, a.Kind)
		return
	}
	b.problems(ap+"/image", name, a.Image.Problems())
	b.imageShape(ap, name, kind, a.Shape, a.Image, batched)
}

// dims checks the task's named dimensions: the batch dimension leads every
// stacked input's and every output's declared shape and appears nowhere
// else; each constrained dimension is used by some shape and its bounds
// are in order.
func (b *builder) dims(ts *spec.InferenceTaskProfile, tp, name string) {
	used := map[string]bool{}
	batch := ""
	if ts.Batching != nil && !b.pruned(tp+"/batching/dim") {
		batch = ts.Batching.Dim
	}
	check := func(at, what string, shape spec.Shape, leads bool) {
		for i, d := range shape {
			if !d.Valid() {
				// The schema takes 1e30 and 3.0 as integers (JSON Schema
				// counts any number without a fraction as one).
				b.report(fmt.Sprintf("%s/%d", at, i), false, "%s: %s: shape[%d] is %s, which is not a dimension: a size is a whole number written with digits only (0 to %d), a name is letters, digits and '_', and * is any size", name, what, i, d, int64(math.MaxInt64))
				continue
			}
			used[string(d)] = true
			if batch != "" && string(d) == batch && (i > 0 || !leads) {
				b.report(at, false, "%s: %s: the batch dimension %s may only lead the shape of a stacked input or an output", name, what, batch)
			}
		}
		if batch != "" && leads && len(shape) > 0 && string(shape[0]) != batch {
			b.report(at, false, "%s: %s: shape %s must start with the batch dimension %s (batching.dim)", name, what, shape, batch)
		}
	}
	for j := range ts.Inputs {
		f := &ts.Inputs[j]
		at := manifest.Pointer("tasks", b.taskIndex(ts), "inputs", j, "shape")
		if f.Shape != nil && !b.pruned(at) {
			check(at, manifest.Sprintf("field %q", f.FieldID), f.Shape, f.IsStacked())
		}
	}
	for j := range ts.Outputs {
		a := &ts.Outputs[j]
		at := manifest.Pointer("tasks", b.taskIndex(ts), "outputs", j, "shape")
		if a.Shape != nil && a.Kind.TensorLike() && !b.pruned(at) {
			check(at, manifest.Sprintf("artifact %q", a.ArtifactID), a.Shape, true)
		}
		if !a.Kind.Holds().IsRecord() {
			continue
		}
		for k := range a.Fields {
			f := &a.Fields[k]
			at := manifest.Pointer("tasks", b.taskIndex(ts), "outputs", j, "fields", k, "shape")
			if f.Shape != nil && !b.pruned(at) {
				check(at, manifest.Sprintf("artifact %q field %q", a.ArtifactID, f.Name), f.Shape, false)
			}
		}
	}
	names := make([]string, 0, len(ts.Dims))
	for n := range ts.Dims {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d := ts.Dims[n]
		at := tp + "/dims" + manifest.JoinPointer(n)
		if b.pruned(at) {
			continue
		}
		switch {
		case !spec.Dim(n).Named():
			b.report(at, true, "%s: dims: %q is not a dimension name (letters, digits and '_')", name, n)
		case !used[n]:
			b.report(at, true, "%s: dims: no shape of the task has the dimension %s", name, n)
		case d.Minimum != nil && d.Maximum != nil && *d.Minimum > *d.Maximum:
			b.report(at+"/maximum", false, "%s: dims: %s's maximum %d is below its minimum %d", name, n, *d.Maximum, *d.Minimum)
		}
	}
}

// taskIndex returns the index of ts in the family's tasks.
func (b *builder) taskIndex(ts *spec.InferenceTaskProfile) int {
	for i := range b.fam.Spec.Tasks {
		if &b.fam.Spec.Tasks[i] == ts {
			return i
		}
	}
	return 0
}
