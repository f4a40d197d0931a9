package importer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
)

// SkeletonFromCallSpec builds the manifest of a compiled checkpoint (an
// AOTInductor package) from the call spec it was exported for:
//
//   - the "model" checkpoint with format aotinductor, its sha256 and size;
//   - one task "forward";
//   - one required tensor field per tensor input, with its dtype and shape
//     (named dimensions keep the export's names); an argument the export
//     baked in as a constant is no field (a warning says so);
//   - one artifact per output: the dict's keys, or "output" for one tensor,
//     kind tensor (TODO: a more specific kind), with dtype and shape;
//   - when one dynamic dimension leads every input and output, the task is
//     batchable along it (batching.dim), max_batch_size the largest batch
//     exported; other dynamic dimensions get their exported range in dims.
//
// Options.Methods may name only forward; examples are refused: the call
// spec already gives every dtype and shape.
func SkeletonFromCallSpec(ck Checkpoint, spec engine.CallSpec, opts Options) (*Result, error) {
	for _, m := range opts.Methods {
		if m != wfspec.DefaultMethod {
			return nil, fmt.Errorf("%s is an AOTInductor package, whose one method is forward, not %q", ck.Path, m)
		}
	}
	if len(opts.Examples) > 0 || opts.Batched {
		return nil, errors.New("an AOTInductor package's call spec gives every input's dtype and shape and its batch dimension: import it without --example and --batched")
	}
	fam := opts.FamilyID
	if fam == "" {
		fam = FamilyIDFromPath(ck.Path)
	}
	if !familyIDPattern.MatchString(fam) {
		return nil, fmt.Errorf("family id %q must be lower-case letters and digits in words joined by '-' or '_' (like \"my-world-model\")", fam)
	}
	b := &builder{ck: ck, opts: opts, family: fam}
	task := b.callSpecTask(spec)
	ckNode := mapping(
		"role", str("model"),
		"uri", str(checkpointURI(ck.Path, opts.Output)),
		"required", boolean(true),
		"status", str("available"),
		"format", str(string(wfspec.FormatAOTInductor)),
	)
	if ck.SHA256 != "" {
		appendPairs(ckNode, "sha256", str(ck.SHA256))
	}
	if ck.SizeBytes > 0 {
		appendPairs(ckNode, "size_bytes", integer(ck.SizeBytes))
	}
	root := mapping(
		"schema_version", integer(manifest.SchemaVersion),
		"model_family_id", str(fam),
		"display_name", str(title(fam)),
		"description", str("TODO: what the model family does."),
		"default_variant_id", str("default"),
		"default_task_id", str(wfspec.DefaultMethod),
		"variants", sequence(mapping(
			"variant_id", str("default"),
			"label", str("Default"),
			"status", str("available"),
			"checkpoints", sequence(ckNode),
		)),
		"tasks", sequence(task),
	)
	var buf bytes.Buffer
	ref := opts.SchemaRef
	if ref == "" {
		ref = DefaultSchemaRef
	}
	fmt.Fprintf(&buf, "# yaml-language-server: $schema=%s\n", commentText(oneLine(ref)))
	fmt.Fprintf(&buf, "#\n# Skeleton written by \"wfgen import\" from %s, an AOTInductor package.\n", commentText(baseName(ck.Path)))
	buf.WriteString("# Fields, artifacts, dtypes, shapes and the batch range come from the call\n" +
		"# spec it was exported for; review every TODO: descriptions and artifact\n" +
		"# kinds more specific than tensor (video, image, embedding).\n")
	if err := encode(&buf, root); err != nil {
		return nil, fmt.Errorf("import: encode: %w", err)
	}
	data := buf.Bytes()
	if b.refusal != nil {
		return nil, b.refusal
	}
	f, err := validSkeleton(fam, opts.Output, data)
	if err != nil {
		return nil, err
	}
	if err := contract.CheckCallSpec(&f.Spec.Tasks[0], &f.Spec.Variants[0], spec); err != nil {
		return nil, fmt.Errorf("import: the skeleton does not pass the contract check (a wfgen bug): %w", err)
	}
	return &Result{YAML: data, Warnings: b.warnings}, nil
}

// batchDim returns the dynamic dimension that leads every tensor input and
// output of spec, or "".
func batchDim(spec engine.CallSpec) string {
	var dim wfspec.Dim
	lead := func(s wfspec.Shape) bool {
		if len(s) == 0 || !s[0].Named() {
			return false
		}
		if dim == "" {
			dim = s[0]
		}
		return s[0] == dim
	}
	ins := spec.Tensors()
	if len(ins) == 0 || len(spec.Outputs) == 0 {
		return ""
	}
	for _, in := range ins {
		if !lead(in.Shape) {
			return ""
		}
	}
	for _, o := range spec.Outputs {
		if !lead(o.Shape) {
			return ""
		}
	}
	return string(dim)
}

func shapeNode(s wfspec.Shape) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, d := range s {
		if sz, fixed := d.Size(); fixed {
			n.Content = append(n.Content, integer(sz))
		} else {
			n.Content = append(n.Content, str(string(d)))
		}
	}
	return n
}

func (b *builder) callSpecTask(spec engine.CallSpec) *yaml.Node {
	task := &yaml.Node{Kind: yaml.MappingNode}
	var sig []string
	for _, in := range spec.Inputs {
		sig = append(sig, in.String())
	}
	appendPairs(task,
		"task_id", str(wfspec.DefaultMethod),
		"label", str("Forward"),
		"description", str("TODO: what the task does. The package was exported for forward("+strings.Join(sig, ", ")+")."),
		"method", str(wfspec.DefaultMethod),
	)
	batch := batchDim(spec)
	if batch != "" {
		r := spec.Dims[batch]
		bn := &yaml.Node{Kind: yaml.MappingNode}
		max := key("max_batch_size")
		size := r.Max
		if size == 0 {
			size = 8
			commented(max, fmt.Sprintf("the package takes any batch of %d or more; choose the most items one call may take", r.Min))
		} else if r.Min > 1 {
			max.HeadComment = fmt.Sprintf("The package takes batches of %d to %d items: longer ones are split and shorter ones padded.", r.Min, r.Max)
		}
		bn.Content = append(bn.Content, max, integer(size), key("dim"), str(batch))
		task.Content = append(task.Content, batchingKey(), bn)
	}
	dims := &yaml.Node{Kind: yaml.MappingNode}
	names := make([]string, 0, len(spec.Dims))
	for name := range spec.Dims {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := spec.Dims[name]
		if name == batch || !used(spec, name) {
			continue
		}
		d := mapping("minimum", integer(r.Min))
		if r.Max != 0 {
			appendPairs(d, "maximum", integer(r.Max))
		}
		appendPairs(dims, name, d)
	}
	if len(dims.Content) > 0 {
		appendPairs(task, "dims", dims)
	}
	var inputs []*yaml.Node
	var fieldNames naming.Scope
	for _, in := range spec.Inputs {
		if in.Constant {
			b.warn(task, "argument %s was baked in at export as %s: it is no field, and every call uses that value (export with it as a tensor input to make it one)", in.Name, pyValue(jsonValue(in.Value)))
			continue
		}
		if !isIdent(in.Name) || reserved[in.Name] {
			b.refuse("input %q of the package cannot be a field id (it is no keyword argument name): rename it in forward and export again", in.Name)
			continue
		}
		f := mapping("field_id", str(in.Name), "label", str(label(in.Name)), "kind", str(string(wfspec.KindTensor)))
		if name := naming.Exported(in.Name); fieldNames.Declare(name, in.Name) != nil {
			appendPairs(f, "go_name", str(name+"2"))
		}
		appendPairs(f, "required", boolean(true), "dtype", str(string(in.DType)), "shape", shapeNode(in.Shape),
			"description", str("TODO: what it means. Package input "+in.String()+"."))
		inputs = append(inputs, f)
	}
	var outputs []*yaml.Node
	if spec.Returns == engine.ReturnsTuple {
		b.refuse("forward returns a tuple of %d tensors, which a package's task cannot type yet: return one tensor or a dict keyed by artifact id, and export again", len(spec.Outputs))
	}
	var artNames naming.Scope
	for _, o := range spec.Outputs {
		if !artifactID.MatchString(o.Name) || artNames.Declare(naming.Exported(o.Name), o.Name) != nil {
			b.warn(task, "output %q cannot be an artifact id (or has another output's Go name); it is left out", o.Name)
			continue
		}
		outputs = append(outputs, mapping(
			"artifact_id", str(o.Name),
			"kind", str(string(wfspec.ArtifactTensor)),
			"required", boolean(true),
			"dtype", str(string(o.DType)),
			"shape", shapeNode(o.Shape),
			"description", str(fmt.Sprintf("TODO: what it holds. Output %s of the package. A more specific kind (video, image, embedding) may fit.", o.Name)),
		))
	}
	appendPairs(task, "inputs", sequence(inputs...), "outputs", sequence(outputs...))
	return task
}

// used reports whether a dimension name appears in a tensor shape of spec.
func used(spec engine.CallSpec, name string) bool {
	for _, in := range spec.Tensors() {
		for _, d := range in.Shape {
			if string(d) == name {
				return true
			}
		}
	}
	for _, o := range spec.Outputs {
		for _, d := range o.Shape {
			if string(d) == name {
				return true
			}
		}
	}
	return false
}

// jsonValue turns a JSON-decoded constant into the value form pyValue
// prints: an integral number as an int.
func jsonValue(v any) any {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return v
}
