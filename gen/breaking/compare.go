package breaking

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// DuplicateError reports a model_family_id defined by two manifests of the
// same side of a comparison, which makes matching ambiguous.
type DuplicateError struct {
	// Family is the duplicated model_family_id.
	Family string
	// Files are the two manifests that define it.
	Files [2]string
	// Side is "old" or "new".
	Side string
}

// Error names the family and both files.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s manifests define family %q twice (%s and %s); each family must be in one file", e.Side, e.Family, e.Files[0], e.Files[1])
}

// Compare compares the families of old and new (valid, decoded manifests,
// as validate.Paths returns them) by model_family_id and returns every
// change, sorted (see Sort). Deprecations in old already mark the breaking
// changes they cover as allowed; use Apply for --allow rules. It fails only
// when one side defines a family twice.
func Compare(old, new []*ir.Family) ([]Change, error) {
	oldBy, err := byFamily(old, "old")
	if err != nil {
		return nil, err
	}
	newBy, err := byFamily(new, "new")
	if err != nil {
		return nil, err
	}
	var changes []Change
	for id, of := range oldBy {
		nf, ok := newBy[id]
		if !ok {
			ch := change(of.File, RuleFamilyRemoved, "/model_family_id", subject(id),
				fmt.Sprintf("family %q removed", id))
			if of.Spec.Deprecated != "" {
				ch.Allowed = deprecatedNote("family", id, of.Spec.Deprecated)
			}
			changes = append(changes, ch)
			continue
		}
		changes = append(changes, CompareFamily(of, nf)...)
	}
	for id, nf := range newBy {
		if _, ok := oldBy[id]; !ok {
			changes = append(changes, change(nf.File, RuleFamilyAdded, "/model_family_id", subject(id), fmt.Sprintf("family %q added", id)))
		}
	}
	return Sort(changes), nil
}

func byFamily(fams []*ir.Family, side string) (map[string]*ir.Family, error) {
	m := make(map[string]*ir.Family, len(fams))
	for _, f := range fams {
		if f == nil {
			continue
		}
		id := f.Spec.ModelFamilyID
		if prev, dup := m[id]; dup {
			return nil, &DuplicateError{Family: id, Files: [2]string{prev.File.Path, f.File.Path}, Side: side}
		}
		m[id] = f
	}
	return m, nil
}

// change builds a change located at pointer in f.
func change(f *manifest.File, rule, pointer, subj, msg string) Change {
	line, col := f.Position(pointer)
	return Change{File: f.Path, Line: line, Column: col, Path: pointer, Message: msg, Class: Rules[rule], Rule: rule, Subject: subj}
}

func deprecatedNote(what, id, msg string) string {
	return fmt.Sprintf("%s %q is deprecated in the old manifest (%s)", what, id, oneLine(msg))
}

// oneLine collapses white space so a message stays on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// scope is where a comparison is: the new manifest's pointer of the item,
// its subject ids, its description for messages and the deprecation of
// the item or a parent in the old manifest.
type scope struct {
	ptr  string
	subj []string
	what string
	dep  string
}

// child returns the scope of the item kind id (described as what) at ptr
// under s; deprecated is the item's deprecation in the old manifest.
func (s scope) child(ptr, kind, id, what, deprecated string) scope {
	c := scope{ptr: ptr, subj: append(slices.Clip(s.subj), id), dep: s.dep, what: what}
	if s.what != "" {
		c.what = s.what + " " + what
	}
	return c.covering(kind, id, deprecated)
}

// covering returns s with the deprecation of the item kind id, when it
// has one, covering its breaking changes (those of a removed item too).
func (s scope) covering(kind, id, deprecated string) scope {
	if deprecated != "" {
		s.dep = deprecatedNote(kind, id, deprecated)
	}
	return s
}

// comparer compares one family.
type comparer struct {
	new     *manifest.File
	changes []Change
}

// add records a change located at pointer (the Position of a missing
// pointer is its nearest existing parent's).
func (c *comparer) add(s scope, rule, pointer string, extra []string, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.what != "" {
		msg = s.what + ": " + msg
	}
	ch := change(c.new, rule, pointer, subject(append(slices.Clip(s.subj), extra...)...), msg)
	if ch.Class == Breaking && s.dep != "" {
		ch.Allowed = s.dep
	}
	c.changes = append(c.changes, ch)
}

// CompareFamily compares one family's old and new manifest (valid,
// resolved) and returns the changes, unsorted, located in new.
func CompareFamily(old, new *ir.Family) []Change {
	c := &comparer{new: new.File}
	o, n := old.Spec, new.Spec
	fam := scope{subj: []string{o.ModelFamilyID}, what: fmt.Sprintf("family %q", o.ModelFamilyID)}
	if o.Deprecated != "" {
		fam.dep = deprecatedNote("family", o.ModelFamilyID, o.Deprecated)
	}
	c.aliases(fam, "/aliases", o.Aliases, n.Aliases)
	if op, np := old.Package, new.Package; op != np {
		c.add(fam, RuleGoPackageChanged, "/go_package", nil, "Go package changes from %s to %s", op, np)
	}
	if ov, nv := defaultVariant(o), defaultVariant(n); ov != nv {
		c.add(fam, RuleDefaultVariantChanged, "/default_variant_id", nil, "default variant changes from %q to %q", ov, nv)
	}
	if ot, nt := defaultTask(o), defaultTask(n); ot != nt {
		c.add(fam, RuleDefaultTaskChanged, "/default_task_id", nil, "default task changes from %q to %q", ot, nt)
	}
	c.realtime(fam, o.Realtime, n.Realtime)

	newVariants := map[string]int{}
	for i, v := range n.Variants {
		newVariants[v.VariantID] = i
	}
	oldVariants := map[string]bool{}
	for i := range o.Variants {
		ov := &o.Variants[i]
		oldVariants[ov.VariantID] = true
		j, ok := newVariants[ov.VariantID]
		if !ok {
			c.add(fam.covering("variant", ov.VariantID, ov.Deprecated), RuleVariantRemoved, "/variants", []string{ov.VariantID}, "variant %q removed", ov.VariantID)
			continue
		}
		c.variant(fam.child(ptr("variants", j), "variant", ov.VariantID, fmt.Sprintf("variant %q", ov.VariantID), ov.Deprecated), old.Variants[i], new.Variants[j])
	}
	for j, nv := range n.Variants {
		if !oldVariants[nv.VariantID] {
			c.add(fam, RuleVariantAdded, ptr("variants", j), []string{nv.VariantID}, "variant %q added", nv.VariantID)
		}
	}

	newTasks := map[string]int{}
	for i, t := range n.Tasks {
		newTasks[t.TaskID] = i
	}
	oldTasks := map[string]bool{}
	for i := range o.Tasks {
		ot := &o.Tasks[i]
		oldTasks[ot.TaskID] = true
		j, ok := newTasks[ot.TaskID]
		if !ok {
			c.add(fam.covering("task", ot.TaskID, ot.Deprecated), RuleTaskRemoved, "/tasks", []string{ot.TaskID}, "task %q removed", ot.TaskID)
			continue
		}
		c.task(fam.child(ptr("tasks", j), "task", ot.TaskID, fmt.Sprintf("task %q", ot.TaskID), ot.Deprecated), old.Tasks[i], new.Tasks[j])
	}
	for j, nt := range n.Tasks {
		if !oldTasks[nt.TaskID] {
			c.add(fam, RuleTaskAdded, ptr("tasks", j), []string{nt.TaskID}, "task %q added", nt.TaskID)
		}
	}
	return c.changes
}

// ptr builds a JSON pointer from segments (strings or ints).
func ptr(segs ...any) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = fmt.Sprint(s)
	}
	return manifest.JoinPointer(parts...)
}

// defaultVariant is the id of the variant the default selects (the
// default may be an alias).
func defaultVariant(s *spec.ModelInferenceSpec) string {
	if v, err := s.Variant(""); err == nil {
		return v.VariantID
	}
	return s.DefaultVariantID
}

// defaultTask is the id of the task the default selects.
func defaultTask(s *spec.ModelInferenceSpec) string {
	if t, err := s.Task(""); err == nil {
		return t.TaskID
	}
	return s.DefaultTaskID
}

// aliases compares two alias sets at pointer.
func (c *comparer) aliases(s scope, pointer string, old, new []string) {
	for _, a := range setMinus(old, new) {
		c.add(s, RuleAliasRemoved, pointer, []string{a}, "alias %q removed", a)
	}
	for _, a := range setMinus(new, old) {
		c.add(s, RuleAliasAdded, pointer+"/"+strconv.Itoa(slices.Index(new, a)), []string{a}, "alias %q added", a)
	}
}

// setMinus returns the members of a missing from b, in a's order, once each.
func setMinus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (c *comparer) realtime(s scope, o, n *spec.RealtimeSpec) {
	switch {
	case o == nil && n == nil:
		return
	case o == nil:
		c.add(s, RuleRealtimeChanged, "/realtime", nil, "realtime spec added (fps %d, chunks of %d then %d frames)", n.FPS, n.FirstChunkFrames, n.SteadyChunkFrames)
		return
	case n == nil:
		c.add(s, RuleRealtimeChanged, "/realtime", nil, "realtime spec removed (it was fps %d, chunks of %d then %d frames)", o.FPS, o.FirstChunkFrames, o.SteadyChunkFrames)
		return
	}
	ints := []struct {
		key      string
		old, new int
	}{
		{"fps", o.FPS, n.FPS},
		{"first_chunk_frames", o.FirstChunkFrames, n.FirstChunkFrames},
		{"steady_chunk_frames", o.SteadyChunkFrames, n.SteadyChunkFrames},
	}
	for _, x := range ints {
		if x.old != x.new {
			c.add(s, RuleRealtimeChanged, "/realtime/"+x.key, nil, "realtime %s changes from %d to %d", x.key, x.old, x.new)
		}
	}
	if o.Transport != n.Transport {
		c.add(s, RuleRealtimeChanged, "/realtime/transport", nil, "realtime transport changes from %q to %q", o.Transport, n.Transport)
	}
	if o.Stateful != n.Stateful {
		c.add(s, RuleRealtimeChanged, "/realtime/stateful", nil, "realtime stateful changes from %t to %t", o.Stateful, n.Stateful)
	}
	removed, added := setMinus(o.Controls, n.Controls), setMinus(n.Controls, o.Controls)
	for _, x := range removed {
		c.add(s, RuleControlRemoved, "/realtime/controls", []string{x}, "realtime control %q removed", x)
	}
	for _, x := range added {
		c.add(s, RuleControlAdded, "/realtime/controls/"+strconv.Itoa(slices.Index(n.Controls, x)), []string{x}, "realtime control %q added", x)
	}
	if len(removed) == 0 && len(added) == 0 && !slices.Equal(o.Controls, n.Controls) {
		c.add(s, RuleRealtimeChanged, "/realtime/controls", nil, "realtime controls reordered from %s to %s (a step method receives them in this order)",
			render(o.Controls), render(n.Controls))
	}
}

func (c *comparer) variant(s scope, ov, nv *ir.Variant) {
	o, n := ov.Spec, nv.Spec
	c.aliases(s, s.ptr+"/aliases", o.Aliases, n.Aliases)
	if og, ng := ov.Const, nv.Const; og != ng {
		c.add(s, RuleGoNameChanged, s.ptr+"/go_name", nil, "Go name changes from %s to %s", og, ng)
	}
	newRoles := map[string]int{}
	for j, ck := range n.Checkpoints {
		newRoles[ck.Role] = j
	}
	oldRoles := map[string]bool{}
	for _, ock := range o.Checkpoints {
		oldRoles[ock.Role] = true
		j, ok := newRoles[ock.Role]
		if !ok {
			c.add(s, RuleCheckpointChanged, s.ptr+"/checkpoints", []string{ock.Role}, "checkpoint %q removed (it was %s)", ock.Role, ock.URI)
			continue
		}
		nck := n.Checkpoints[j]
		p := s.ptr + "/checkpoints/" + strconv.Itoa(j)
		if ock.URI != nck.URI {
			c.add(s, RuleCheckpointChanged, p+"/uri", []string{ock.Role}, "checkpoint %q uri changes from %s to %s", ock.Role, ock.URI, nck.URI)
		}
		if ock.SHA256 != nck.SHA256 {
			c.add(s, RuleCheckpointChanged, p+"/sha256", []string{ock.Role}, "checkpoint %q sha256 changes from %s to %s", ock.Role, orNone(ock.SHA256), orNone(nck.SHA256))
		}
		if ock.SizeBytes != nck.SizeBytes {
			c.add(s, RuleCheckpointChanged, p+"/size_bytes", []string{ock.Role}, "checkpoint %q size_bytes changes from %s to %s", ock.Role, sizeText(ock.SizeBytes), sizeText(nck.SizeBytes))
		}
		if ock.Required != nck.Required {
			c.add(s, RuleCheckpointChanged, p+"/required", []string{ock.Role}, "checkpoint %q required changes from %t to %t", ock.Role, ock.Required, nck.Required)
		}
	}
	for j, nck := range n.Checkpoints {
		if !oldRoles[nck.Role] {
			c.add(s, RuleCheckpointChanged, s.ptr+"/checkpoints/"+strconv.Itoa(j), []string{nck.Role}, "checkpoint %q added (%s)", nck.Role, nck.URI)
		}
	}
	c.kwargs(s, s.ptr+"/load_kwargs", "load_kwargs", o.LoadKwargs, n.LoadKwargs)
	c.kwargs(s, s.ptr+"/call_kwargs", "call_kwargs", o.CallKwargs, n.CallKwargs)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func sizeText(n int64) string {
	if n == 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}

// kwargs compares two keyword-argument maps key by key.
func (c *comparer) kwargs(s scope, pointer, name string, o, n map[string]any) {
	keys := map[string]bool{}
	for k := range o {
		keys[k] = true
	}
	for k := range n {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		ov, inOld := o[k]
		nv, inNew := n[k]
		p := pointer + manifest.JoinPointer(k)
		switch {
		case !inNew:
			c.add(s, RuleKwargsChanged, pointer, []string{name, k}, "%s %q removed (it was %s)", name, k, render(ov))
		case !inOld:
			c.add(s, RuleKwargsChanged, p, []string{name, k}, "%s %q added (%s)", name, k, render(nv))
		case !sameValue(ov, nv):
			c.add(s, RuleKwargsChanged, p, []string{name, k}, "%s %q changes from %s to %s", name, k, render(ov), render(nv))
		}
	}
}

func (c *comparer) task(s scope, ot, nt *ir.Task) {
	o, n := ot.Spec, nt.Spec
	c.aliases(s, s.ptr+"/aliases", o.Aliases, n.Aliases)
	if og, ng := ot.Name, nt.Name; og != ng {
		c.add(s, RuleGoNameChanged, s.ptr+"/go_name", nil, "Go name changes from %s to %s", og, ng)
	}
	if om, nm := o.MethodName(), n.MethodName(); om != nm {
		c.add(s, RuleMethodChanged, s.ptr+"/method", nil, "method changes from %s to %s", om, nm)
	}
	if o.Stream != n.Stream {
		c.add(s, RuleStreamChanged, s.ptr+"/stream", nil, "stream changes from %t to %t (its generated client methods change)", o.Stream, n.Stream)
	}
	switch ob, nb := o.Batching, n.Batching; {
	case ob != nil && nb == nil:
		c.add(s, RuleBatchingRemoved, s.ptr, nil, "batching removed (the task is no longer batchable)")
	case ob == nil && nb != nil:
		c.add(s, RuleBatchingAdded, s.ptr+"/batching", nil, "batching added (max_batch_size %d)", nb.MaxBatchSize)
	case ob != nil:
		if ob.MaxBatchSize != nb.MaxBatchSize {
			c.add(s, RuleBatchingChanged, s.ptr+"/batching/max_batch_size", nil, "max_batch_size changes from %d to %d", ob.MaxBatchSize, nb.MaxBatchSize)
		}
		if ob.Dim != nb.Dim {
			c.add(s, RuleConstraintNarrowed, s.ptr+"/batching/dim", []string{"batching", "dim"}, "batch dimension changes from %s to %s (each item's shape changes)", orNone(ob.Dim), orNone(nb.Dim))
		}
		if !slices.Equal(ob.PadToBatchSizes, nb.PadToBatchSizes) {
			c.add(s, RuleBatchingChanged, s.ptr+"/batching/pad_to_batch_sizes", nil, "pad_to_batch_sizes changes from %s to %s",
				render(ob.PadToBatchSizes), render(nb.PadToBatchSizes))
		}
	}
	c.kwargs(s, s.ptr+"/default_call_kwargs", "default_call_kwargs", o.DefaultCallKwargs, n.DefaultCallKwargs)

	newFields := map[string]int{}
	for j, f := range n.Inputs {
		newFields[f.FieldID] = j
	}
	oldFields := map[string]bool{}
	for i := range o.Inputs {
		of := &o.Inputs[i]
		oldFields[of.FieldID] = true
		j, ok := newFields[of.FieldID]
		if !ok {
			c.add(s.covering("field", of.FieldID, of.Deprecated), RuleFieldRemoved, s.ptr+"/inputs", []string{of.FieldID}, "field %q removed", of.FieldID)
			continue
		}
		c.field(s.child(fmt.Sprintf("%s/inputs/%d", s.ptr, j), "field", of.FieldID, fmt.Sprintf("field %q", of.FieldID), of.Deprecated), ot.Fields[i], nt.Fields[j])
	}
	for j := range n.Inputs {
		nf := &n.Inputs[j]
		if oldFields[nf.FieldID] {
			continue
		}
		p := fmt.Sprintf("%s/inputs/%d", s.ptr, j)
		if nf.Presence() == spec.Required {
			c.add(s, RuleRequiredFieldAdded, p, []string{nf.FieldID}, "required field %q (kind %s) added without a default", nf.FieldID, nf.Kind)
		} else {
			c.add(s, RuleFieldAdded, p, []string{nf.FieldID}, "field %q (kind %s) added", nf.FieldID, nf.Kind)
		}
	}

	newArts := map[string]int{}
	for j, a := range n.Outputs {
		newArts[a.ArtifactID] = j
	}
	oldArts := map[string]bool{}
	for i := range o.Outputs {
		oa := &o.Outputs[i]
		oldArts[oa.ArtifactID] = true
		j, ok := newArts[oa.ArtifactID]
		if !ok {
			c.add(s, RuleArtifactRemoved, s.ptr+"/outputs", []string{oa.ArtifactID}, "artifact %q removed (no longer produced)", oa.ArtifactID)
			continue
		}
		c.artifact(s.child(fmt.Sprintf("%s/outputs/%d", s.ptr, j), "artifact", oa.ArtifactID, fmt.Sprintf("artifact %q", oa.ArtifactID), ""), ot.Artifacts[i], nt.Artifacts[j])
	}
	for j := range n.Outputs {
		na := &n.Outputs[j]
		if oldArts[na.ArtifactID] {
			continue
		}
		p := fmt.Sprintf("%s/outputs/%d", s.ptr, j)
		if na.Required {
			c.add(s, RuleArtifactRequired, p, []string{na.ArtifactID}, "required artifact %q (kind %s) added; checkpoints that do not produce it fail the contract check", na.ArtifactID, na.Kind)
		} else {
			c.add(s, RuleArtifactAdded, p, []string{na.ArtifactID}, "artifact %q (kind %s) added", na.ArtifactID, na.Kind)
		}
	}
}

func (c *comparer) artifact(s scope, oa, na *ir.Artifact) {
	o, n := oa.Spec, na.Spec
	if o.Kind != n.Kind {
		c.add(s, RuleKindChanged, s.ptr+"/kind", nil, "kind changes from %s to %s", o.Kind, n.Kind)
	} else if ot, nt := oa.Type.String(), na.Type.String(); ot != nt {
		c.add(s, RuleGoTypeChanged, s.ptr+"/required", nil, "generated Go field type changes from %s to %s", ot, nt)
	}
	if og, ng := oa.Name, na.Name; og != ng {
		c.add(s, RuleGoNameChanged, s.ptr+"/go_name", nil, "Go name changes from %s to %s", og, ng)
	}
	switch {
	case !o.Required && n.Required:
		c.add(s, RuleArtifactRequired, s.ptr+"/required", nil, "is now required; checkpoints that do not produce it fail the contract check")
	case o.Required && !n.Required:
		c.add(s, RuleArtifactOptional, s.ptr+"/required", nil, "is no longer required, so a result may lack it")
	}
	if o.Preview != n.Preview {
		c.add(s, RulePreviewChanged, s.ptr+"/preview", nil, "preview changes from %t to %t", o.Preview, n.Preview)
	}
	// Without positions on either side the manifest does not say the method
	// returns a tuple (a dict's artifacts may be reordered freely).
	if op, np := position(oa), position(na); (o.Position != nil || n.Position != nil) && op != np {
		c.add(s, RulePositionChanged, s.ptr+"/position", nil, "tuple position changes from %d to %d; a checkpoint returning the same tuple gives it another element", op, np)
	}
	c.contract(s, o.Contract(), n.Contract())
	if o.FPS != n.FPS {
		c.add(s, RuleFPSChanged, s.ptr+"/fps", nil, "fps changes from %s to %s (the playback rate of written videos)", fpsText(o.FPS), fpsText(n.FPS))
	}
}

func (c *comparer) field(s scope, of, nf *ir.Field) {
	o, n := of.Spec, nf.Spec
	if o.Target != n.Target {
		c.add(s, RuleTargetChanged, s.ptr+"/target", nil, "target changes from %s to %s", o.Target, n.Target)
	}
	if og, ng := of.Name, nf.Name; og != ng {
		c.add(s, RuleGoNameChanged, s.ptr+"/go_name", nil, "Go name changes from %s to %s", og, ng)
	}
	if o.Kind != n.Kind {
		// Defaults and constraints of another kind are not comparable.
		c.add(s, RuleKindChanged, s.ptr+"/kind", nil, "kind changes from %s to %s", o.Kind, n.Kind)
		return
	}
	oOmit, nOmit := !o.Required || o.Default != nil, !n.Required || n.Default != nil
	switch {
	case oOmit && !nOmit:
		c.add(s, RuleFieldRequired, s.ptr+"/required", nil, "is now required without a default; calls that leave it out fail")
	case !oOmit && nOmit:
		c.add(s, RuleFieldOptional, s.ptr, nil, "may now be left out (it was required without a default)")
	}
	if ot, nt := of.Type.String(), nf.Type.String(); ot != nt {
		why, at := "", s.ptr+"/default"
		switch {
		case (of.Choice == nil) != (nf.Choice == nil):
			why, at = " (a field with choices has its own type)", s.ptr+"/choices"
		case of.Type.Pointer != nf.Type.Pointer:
			why = " (optional without a default is a pointer)"
		}
		c.add(s, RuleGoTypeChanged, at, nil, "generated Go field type changes from %s to %s%s", ot, nt, why)
	}
	switch {
	case o.Default == nil && n.Default != nil:
		c.add(s, RuleDefaultChanged, s.ptr+"/default", nil, "default %s added", render(n.Default))
	case o.Default != nil && n.Default == nil:
		c.add(s, RuleDefaultChanged, s.ptr+"/default", nil, "default %s removed", render(o.Default))
	case !sameValue(o.Default, n.Default):
		c.add(s, RuleDefaultChanged, s.ptr+"/default", nil, "default changes from %s to %s", render(o.Default), render(n.Default))
	}
	c.bound(s, "minimum", o.Minimum, n.Minimum, +1)
	c.bound(s, "maximum", o.Maximum, n.Maximum, -1)
	c.bound(s, "min_length", intNumber(o.MinLength), intNumber(n.MinLength), +1)
	c.bound(s, "max_length", intNumber(o.MaxLength), intNumber(n.MaxLength), -1)
	c.multiple(s, o, n)
	c.contract(s, o.Contract(), n.Contract())
	if o.Kind.HasParts() {
		c.parts(s, o, n)
	}
	switch {
	case o.Pattern == n.Pattern:
	case o.Pattern == "":
		c.add(s, RuleConstraintNarrowed, s.ptr+"/pattern", []string{"pattern"}, "pattern %q added", n.Pattern)
	case n.Pattern == "":
		c.add(s, RuleConstraintWidened, s.ptr+"/pattern", []string{"pattern"}, "pattern %q removed", o.Pattern)
	default:
		c.add(s, RuleConstraintNarrowed, s.ptr+"/pattern", []string{"pattern"},
			"pattern changes from %q to %q (wfgen cannot prove the new pattern accepts every value the old one did)", o.Pattern, n.Pattern)
	}
	switch {
	case len(o.Choices) == 0 && len(n.Choices) > 0:
		c.add(s, RuleConstraintNarrowed, s.ptr+"/choices", []string{"choices"}, "choices %s introduced (any value was accepted)", render(n.Choices))
	case len(o.Choices) > 0 && len(n.Choices) == 0:
		c.add(s, RuleConstraintWidened, s.ptr+"/choices", []string{"choices"}, "choices %s removed (any value is accepted)", render(o.Choices))
	default:
		for _, x := range setMinus(o.Choices, n.Choices) {
			c.add(s, RuleChoiceRemoved, s.ptr+"/choices", []string{x}, "choice %q removed", x)
		}
		for _, x := range setMinus(n.Choices, o.Choices) {
			c.add(s, RuleChoiceAdded, s.ptr+"/choices/"+strconv.Itoa(slices.Index(n.Choices, x)), []string{x}, "choice %q added", x)
		}
	}
}

// parts compares the parts of a tensor_dict or tensor_tuple field (of the
// same kind) by name: a part removed or renamed is a field of the
// generated struct removed; a required part added, or a part that becomes
// required, fails calls that leave it out; a tuple's elements move with
// their positions; each kept part's dtype and shape compare as a field's.
func (c *comparer) parts(s scope, o, n *spec.InferenceFieldSpec) {
	newParts := map[string]int{}
	for k, p := range n.Fields {
		newParts[p.Name] = k
	}
	oldParts := map[string]bool{}
	for k, op := range o.Fields {
		oldParts[op.Name] = true
		j, ok := newParts[op.Name]
		if !ok {
			c.add(s, RuleFieldRemoved, s.ptr+"/fields", []string{op.Name}, "part %q removed (its field of the generated struct goes)", op.Name)
			continue
		}
		ps := s.child(fmt.Sprintf("%s/fields/%d", s.ptr, j), "part", op.Name, fmt.Sprintf("part %q", op.Name), "")
		if o.Kind.Form() == spec.FormTuple && j != k {
			c.add(ps, RulePositionChanged, ps.ptr, nil, "moves from position %d to %d of the tuple", k, j)
		}
		switch or, nr := o.PartRequired(k), n.PartRequired(j); {
		case !or && nr:
			c.add(ps, RuleFieldRequired, ps.ptr+"/required", nil, "is now required; calls that leave it out fail")
		case or && !nr:
			c.add(ps, RuleFieldOptional, ps.ptr, nil, "may now be left out")
		}
		np := n.Fields[j]
		c.contract(ps, spec.TensorContract{DType: op.DType, Shape: op.Shape}, spec.TensorContract{DType: np.DType, Shape: np.Shape})
	}
	for j, np := range n.Fields {
		if oldParts[np.Name] {
			continue
		}
		p := fmt.Sprintf("%s/fields/%d", s.ptr, j)
		if n.PartRequired(j) {
			c.add(s, RuleRequiredFieldAdded, p, []string{np.Name}, "required part %q added", np.Name)
		} else {
			c.add(s, RuleFieldAdded, p, []string{np.Name}, "part %q added", np.Name)
		}
	}
}

func intNumber(p *int) *spec.Number {
	if p == nil {
		return nil
	}
	n := spec.NumberOf(int64(*p))
	return &n
}

// bound compares a lower (dir +1) or upper (dir -1) bound, exactly.
func (c *comparer) bound(s scope, key string, o, n *spec.Number, dir int) {
	p := s.ptr + "/" + key
	switch {
	case o == nil && n == nil:
	case o == nil:
		c.add(s, RuleConstraintNarrowed, p, []string{key}, "%s %s added", key, *n)
	case n == nil:
		c.add(s, RuleConstraintWidened, p, []string{key}, "%s %s removed", key, *o)
	case n.Cmp(*o) == 0:
	case n.Cmp(*o)*dir > 0:
		c.add(s, RuleConstraintNarrowed, p, []string{key}, "%s changes from %s to %s", key, *o, *n)
	default:
		c.add(s, RuleConstraintWidened, p, []string{key}, "%s changes from %s to %s", key, *o, *n)
	}
}

// multiple compares the sets {x : x ≡ remainder (mod multiple_of)}.
func (c *comparer) multiple(s scope, o, n *spec.InferenceFieldSpec) {
	om, orem := modulus(o)
	nm, nrem := modulus(n)
	if om == nm && orem == nrem {
		return
	}
	// The new set holds the old one when nm divides om and the remainders
	// agree modulo nm; and the other way round.
	newHoldsOld := om%nm == 0 && mod(orem-nrem, nm) == 0
	oldHoldsNew := nm%om == 0 && mod(nrem-orem, om) == 0
	desc := func(m, r int64) string {
		if m == 1 {
			return "none"
		}
		if r == 0 {
			return fmt.Sprintf("multiple of %d", m)
		}
		return fmt.Sprintf("%dk+%d", m, r)
	}
	p := s.ptr + "/multiple_of"
	if n.MultipleOf == nil || (o.MultipleOf != nil && *o.MultipleOf == *n.MultipleOf) {
		p = s.ptr + "/remainder"
		if n.MultipleOf == nil {
			p = s.ptr + "/multiple_of"
		}
	}
	switch {
	case newHoldsOld && oldHoldsNew:
		return // the same set written another way
	case newHoldsOld:
		c.add(s, RuleConstraintWidened, p, []string{"multiple_of"}, "multiple_of rule changes from %s to %s", desc(om, orem), desc(nm, nrem))
	default:
		c.add(s, RuleConstraintNarrowed, p, []string{"multiple_of"}, "multiple_of rule changes from %s to %s", desc(om, orem), desc(nm, nrem))
	}
}

func modulus(f *spec.InferenceFieldSpec) (m, r int64) {
	if f.MultipleOf == nil || *f.MultipleOf < 1 {
		return 1, 0
	}
	return *f.MultipleOf, mod(f.Remainder, *f.MultipleOf)
}

func mod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// sameValue compares two manifest values; numbers keep their int / float
// distinction (it decides the TorchScript type a kwarg is passed as).
func sameValue(a, b any) bool {
	return reflect.DeepEqual(a, b)
}

// render prints a manifest value compactly: strings quoted, floats with a
// decimal point, lists in brackets, mappings with sorted keys.
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = strconv.Quote(k) + ": " + render(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = render(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// position is the element of a returned tuple that an artifact is: its
// position, else its index (spec.InferenceTaskProfile.ArtifactPositions).
func position(a *ir.Artifact) int {
	if a.Spec.Position != nil {
		return *a.Spec.Position
	}
	return a.Index
}

// fpsText prints an artifact's fps ("unset" when the family's applies).
func fpsText(n int) string {
	if n == 0 {
		return "unset"
	}
	return strconv.Itoa(n)
}

// contract compares the dtype, shape and image spec of a tensor-like field
// or artifact. A dtype or a shape that accepts fewer tensors breaks
// callers; one that accepts more widens; a new image conversion changes
// what the model sees.
func (c *comparer) contract(s scope, o, n spec.TensorContract) {
	switch {
	case o.DType == n.DType:
	case o.DType == "":
		c.add(s, RuleConstraintNarrowed, s.ptr+"/dtype", []string{"dtype"}, "dtype %s added", n.DType)
	case n.DType == "":
		c.add(s, RuleConstraintWidened, s.ptr+"/dtype", []string{"dtype"}, "dtype %s removed", o.DType)
	default:
		c.add(s, RuleConstraintNarrowed, s.ptr+"/dtype", []string{"dtype"}, "dtype changes from %s to %s", o.DType, n.DType)
	}
	switch {
	case slices.Equal(o.Shape, n.Shape):
	case o.Shape == nil:
		c.add(s, RuleConstraintNarrowed, s.ptr+"/shape", []string{"shape"}, "shape %s added", n.Shape)
	case n.Shape == nil:
		c.add(s, RuleConstraintWidened, s.ptr+"/shape", []string{"shape"}, "shape %s removed", o.Shape)
	case widerShape(n.Shape, o.Shape):
		c.add(s, RuleConstraintWidened, s.ptr+"/shape", []string{"shape"}, "shape changes from %s to %s", o.Shape, n.Shape)
	default:
		c.add(s, RuleConstraintNarrowed, s.ptr+"/shape", []string{"shape"}, "shape changes from %s to %s", o.Shape, n.Shape)
	}
	if !reflect.DeepEqual(o.Image, n.Image) {
		c.add(s, RuleImageChanged, s.ptr+"/image", nil, "image conversion changes from %s to %s (the tensor a picture becomes)", render(imageMap(o.Image)), render(imageMap(n.Image)))
	}
}

// widerShape reports whether shape n accepts every tensor shape o accepts:
// the same rank, and each dimension of n is "*" or equal to o's.
func widerShape(n, o spec.Shape) bool {
	if len(n) != len(o) {
		return false
	}
	for i := range n {
		if n[i] != spec.Wildcard && n[i] != o[i] {
			return false
		}
	}
	return true
}

// imageMap renders an image spec for messages.
func imageMap(s *spec.ImageSpec) any {
	if s == nil {
		return nil
	}
	m := map[string]any{"layout": s.LayoutName(), "channels": s.ChannelOrder()}
	if s.Range != nil {
		m["range"] = s.Range
	}
	if s.Mean != nil {
		m["mean"], m["std"] = s.Mean, s.Std
	}
	return m
}
