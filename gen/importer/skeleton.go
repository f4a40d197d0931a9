package importer

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// builder builds the skeleton's YAML node tree.
type builder struct {
	ck       Checkpoint
	opts     Options
	family   string
	batch    map[string]int64 // batch size of the examples, by method (Options.Batched)
	warnings []string
	refusal  error // the first position no manifest can type
}

// refuse records that the import cannot write a skeleton that loads: the
// first such position is the error of the import.
func (b *builder) refuse(format string, args ...any) {
	if b.refusal == nil {
		b.refusal = &UntypedError{Msg: fmt.Sprintf(format, args...)}
	}
}

func (b *builder) warn(task *yaml.Node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.warnings = append(b.warnings, msg)
	if task.HeadComment != "" {
		task.HeadComment += "\n"
	}
	task.HeadComment += "TODO: " + commentText(msg)
}

// commentText makes s safe for a one-line YAML comment: valid UTF-8,
// control characters (newlines included) as spaces.
func commentText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func (b *builder) build(methods []engine.MethodSchema) ([]byte, error) {
	var tasks []*yaml.Node
	taskIDs := map[string]bool{}
	var taskNames naming.Scope
	for _, m := range methods {
		id := taskID(m.Name)
		for n := 2; taskIDs[id]; n++ {
			id = fmt.Sprintf("%s-%d", taskID(m.Name), n)
		}
		taskIDs[id] = true
		task := b.task(id, m)
		if taskNames.Declare(naming.Exported(id), id) != nil {
			return nil, fmt.Errorf("methods give two tasks the same Go name (%s); import them separately", naming.Exported(id))
		}
		tasks = append(tasks, task)
	}
	ckNode := mapping(
		"role", str("model"),
		"uri", str(checkpointURI(b.ck.Path, b.opts.Output)),
		"required", boolean(true),
		"status", str("available"),
	)
	if b.ck.SHA256 != "" {
		ckNode.Content = append(ckNode.Content, key("sha256"), str(b.ck.SHA256))
	}
	if b.ck.SizeBytes > 0 {
		ckNode.Content = append(ckNode.Content, key("size_bytes"), integer(b.ck.SizeBytes))
	}
	root := mapping(
		"schema_version", integer(manifest.SchemaVersion),
		"model_family_id", str(b.family),
		"display_name", str(title(b.family)),
		"description", str("TODO: what the model family does."),
		"default_variant_id", str("default"),
		"default_task_id", str(taskID(methods[0].Name)),
	)
	b.opLibraries(root)
	appendPairs(root,
		"variants", sequence(mapping(
			"variant_id", str("default"),
			"label", str("Default"),
			"status", str("available"),
			"checkpoints", sequence(ckNode),
		)),
		"tasks", sequence(tasks...),
	)
	var buf bytes.Buffer
	ref := b.opts.SchemaRef
	if ref == "" {
		ref = DefaultSchemaRef
	}
	names := make([]string, len(methods))
	for i, m := range methods {
		names[i] = m.Name
	}
	fmt.Fprintf(&buf, "# yaml-language-server: $schema=%s\n", commentText(oneLine(ref)))
	fmt.Fprintf(&buf, "#\n# Skeleton written by \"wfgen import\" from %s (methods: %s).\n", commentText(baseName(b.ck.Path)), strings.Join(names, ", "))
	buf.WriteString("# Kinds, defaults and the checkpoint come from the checkpoint; review every\n" +
		"# TODO: descriptions, constraints (minimum, maximum, multiple_of, choices,\n" +
		"# ...), artifact kinds more specific than tensor (video, image, embedding)\n" +
		"# and tensors' dtype and shape (--example FIELD=FILE.npy gives them).\n")
	if err := encode(&buf, root); err != nil {
		return nil, fmt.Errorf("import: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// opLibraries appends op_libraries to the family (root) for the custom ops
// the checkpoint's code calls: the op library a Debian package installs
// for their namespace when it is installed here, else a TODO comment and a
// warning naming the ops, which the load cannot do without.
func (b *builder) opLibraries(root *yaml.Node) {
	var namespaces []string
	byNamespace := map[string][]string{}
	for _, op := range b.ck.CustomOps {
		if _, ok := byNamespace[op.Namespace]; !ok {
			namespaces = append(namespaces, op.Namespace)
		}
		byNamespace[op.Namespace] = append(byNamespace[op.Namespace], op.String())
	}
	libs := &yaml.Node{Kind: yaml.SequenceNode}
	var found, missing []string
	for _, ns := range namespaces {
		ops := strings.Join(byNamespace[ns], ", ")
		if path, ok := engine.KnownOpLibrary(ns); ok {
			libs.Content = append(libs.Content, str(path))
			found = append(found, ops)
			continue
		}
		msg := fmt.Sprintf("the checkpoint calls the custom ops %s, and the load fails until the shared library that registers namespace %q is loaded: list it in op_libraries, or in %s where the model runs",
			ops, ns, engine.EnvOpLibraries)
		if hint := engine.OpLibraryHint(ns); hint != "" {
			msg += " (" + hint + ")"
		}
		b.warnings = append(b.warnings, msg)
		missing = append(missing, "TODO: "+commentText(msg))
	}
	if len(found) == 0 && len(missing) == 0 {
		return
	}
	k := key("op_libraries")
	var comment []string
	if len(found) > 0 {
		comment = append(comment, commentText("The checkpoint calls the custom ops "+strings.Join(found, ", ")+": op_libraries names the library installed here that registers them, loaded before the checkpoint."))
	}
	k.HeadComment = strings.Join(append(comment, missing...), "\n")
	if len(libs.Content) == 0 {
		libs.Style = yaml.FlowStyle
	}
	root.Content = append(root.Content, k, libs)
}

// encode writes root as YAML with a two-space indent; the encoder's panics
// (it panics on some input it cannot write) become errors.
func encode(w io.Writer, root *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return err
	}
	return enc.Close()
}

func baseName(p string) string {
	p = strings.ReplaceAll(p, `\`, "/")
	return p[strings.LastIndexByte(p, '/')+1:]
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// taskID derives a task id from a method name: '_' becomes '-'
// ("infer_image" → "infer-image").
func taskID(method string) string {
	parts := strings.FieldsFunc(method, func(r rune) bool { return r == '_' })
	if len(parts) == 0 {
		return "task"
	}
	return strings.Join(parts, "-")
}

// title is a display name for an id: its words capitalized.
func title(id string) string {
	words := strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' })
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// label is a label for an id: its words, the first capitalized.
func label(id string) string {
	words := strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' })
	if len(words) == 0 {
		return id
	}
	words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
	return strings.Join(words, " ")
}

// signature prints a method schema like TorchScript does.
func signature(m engine.MethodSchema) string {
	args := make([]string, len(m.Arguments))
	for i, a := range m.Arguments {
		args[i] = a.Name + ": " + a.Type
		if a.HasDefault {
			args[i] += " = " + pyValue(a.Default)
		}
	}
	ret := "None"
	if len(m.Returns) == 1 {
		ret = m.Returns[0]
	} else if len(m.Returns) > 1 {
		ret = "Tuple[" + strings.Join(m.Returns, ", ") + "]"
	}
	return fmt.Sprintf("%s(%s) -> %s", m.Name, strings.Join(args, ", "), ret)
}

// pyValue prints a default in Python form.
func pyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return strconv.Quote(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return floatText(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = strconv.Quote(k) + ": " + pyValue(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *tensor.Tensor:
		return "<tensor>"
	case contract.Opaque:
		return x.String() // "<tensor>" for a tensor, as above
	}
	return fmt.Sprintf("%v", v)
}

// floatText prints a float so that it reads back as a float ("2.0").
func floatText(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func (b *builder) task(id string, m engine.MethodSchema) *yaml.Node {
	task := &yaml.Node{Kind: yaml.MappingNode}
	sig := signature(m)
	var inputs []*yaml.Node
	var fieldNames naming.Scope
	size, batched := b.batch[m.Name]
	for _, a := range m.Arguments {
		if f := b.field(task, m.Name, a, &fieldNames, batched); f != nil {
			inputs = append(inputs, f)
		}
	}
	outputs := b.artifacts(task, m, size, batched)
	appendPairs(task,
		"task_id", str(id),
		"label", str(label(m.Name)),
		"description", str("TODO: what the task does. It runs "+sig+"."),
		"method", str(m.Name),
	)
	if batched {
		max := key("max_batch_size")
		max.HeadComment = fmt.Sprintf("TODO: the most items one call may take (the examples hold %d); pad_to_batch_sizes gives static batch sizes", size)
		bn := &yaml.Node{Kind: yaml.MappingNode}
		bn.Content = append(bn.Content, max, integer(max64(size, 1)), key("dim"), str(BatchDim))
		task.Content = append(task.Content, batchingKey(), bn)
	}
	appendPairs(task,
		"inputs", sequence(inputs...),
		"outputs", sequence(outputs...),
	)
	return task
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// tensorContract appends the dtype and shape of a tensor field or artifact
// to n when an example (or an observed output) t gives them, with a TODO
// comment on a shape with fixed sizes saying where they came from (from)
// and that varying ones want names; without t it puts
// the TODO comment todo on the description key instead. Then it appends
// the description desc.
func tensorContract(n *yaml.Node, t *tensor.Tensor, from string, batched bool, todo string, desc *yaml.Node) {
	if t == nil {
		n.Content = append(n.Content, commented(key("description"), todo), desc)
		return
	}
	shape := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	sizes := false
	for _, d := range exampleShape(t.Shape, batched) {
		if sz, fixed := d.Size(); fixed {
			shape.Content = append(shape.Content, integer(sz))
			sizes = true
		} else {
			shape.Content = append(shape.Content, str(string(d)))
		}
	}
	appendPairs(n, "dtype", str(string(t.DType)))
	sk := key("shape")
	if sizes {
		commented(sk, "shape "+from+"; name the sizes that vary between calls (H, W) or use \"*\"")
	}
	n.Content = append(n.Content, sk, shape)
	appendPairs(n, "description", desc)
}

// commented returns k with a head comment.
func commented(k *yaml.Node, comment string) *yaml.Node {
	k.HeadComment = "TODO: " + commentText(comment)
	return k
}

// field builds the field of one argument, or nil (with a warning) when no
// field kind passes its type.
func (b *builder) field(task *yaml.Node, method string, a engine.Argument, names *naming.Scope, batched bool) *yaml.Node {
	decl := a.Name + ": " + a.Type
	if a.HasDefault {
		decl += " = " + pyValue(a.Default)
	}
	if _, err := contract.ParseType(a.Type); err != nil {
		b.refuse("argument %s of %s: its type cannot be read (%v)", decl, method, err)
		return nil
	}
	if !isIdent(a.Name) || reserved[a.Name] {
		if !a.HasDefault {
			b.refuse("argument %s of %s cannot be a field id (it is no keyword argument name) and has no default, so no call could pass it; rename it in the model, or leave %s out (--method)", decl, method, method)
			return nil
		}
		b.warn(task, "argument %q cannot be a field id (not a keyword argument name); it is left out", a.Name)
		return nil
	}
	kind, optional, ok := FieldKind(a.Type)
	if !ok {
		if !a.HasDefault {
			b.refuse("argument %s of %s has no field kind (fields pass str, int, float, bool, Tensor and List[...] of them, Dict[str, Tensor], Tuple[Tensor, ...], or Optional of one) and no default, so no call could pass it; give it a default in the model, or leave %s out (--method)", decl, method, method)
			return nil
		}
		b.warn(task, "argument %s has no field kind; it is left out, so calls use its default", decl)
		return nil
	}
	f := mapping(
		"field_id", str(a.Name),
		"label", str(label(a.Name)),
		"kind", str(string(kind)),
	)
	if name := naming.Exported(a.Name); names.Declare(name, a.Name) != nil {
		for n := 2; ; n++ {
			alt := fmt.Sprintf("%s%d", name, n)
			if names.Declare(alt, a.Name) == nil {
				appendPairs(f, "go_name", str(alt))
				break
			}
		}
	}
	switch {
	case !a.HasDefault:
		// The method needs the argument passed (an Optional one may be None,
		// which a field cannot pass, so it is required too).
		appendPairs(f, "required", boolean(true))
		if optional {
			b.warn(task, "argument %s is Optional without a default: the method must be passed it, so field %q is required", decl, a.Name)
		}
	case a.Default == nil:
		// Optional[X] = None: the field may be left out.
	default:
		if v, ok := defaultNode(kind, a.Default); ok {
			appendPairs(f, "default", v)
		} else {
			b.warn(task, "the default of argument %s cannot be written as a %s field default; field %q has none, so calls that leave it out use the method's", decl, kind, a.Name)
		}
	}
	desc := str("TODO: what it means. TorchScript argument: " + decl + ".")
	switch {
	case kind.HasParts():
		parts := b.argumentParts(method, a, decl)
		if parts == nil {
			return nil
		}
		f.Content = append(f.Content, key("fields"), parts)
		f.Content = append(f.Content, commented(key("description"), "dtype and shape of each part: the schema says only Tensor. Add the ones the model wants under fields"), desc)
	case kind.Stacked():
		var t *tensor.Tensor
		from := ""
		if ex, ok := b.opts.Examples[a.Name]; ok {
			t, from = ex.Tensor, "from example "+baseName(ex.File)
		}
		tensorContract(f, t, from, batched, fmt.Sprintf("dtype and shape: the schema says only Tensor. Add the ones the model wants (dtype: float32, shape: [N, 3, H, W]), or import again with --example %s=FILE.npy", a.Name), desc)
	case kind.TensorLike():
		ex, ok := b.opts.Examples[a.Name]
		if !ok {
			f.Content = append(f.Content, commented(key("description"), fmt.Sprintf("dtype and shape of each tensor: the schema says only List[Tensor]. Add the ones the model wants, or import again with --example %s=FILE.npy (repeated: one per item)", a.Name)), desc)
			break
		}
		items := ex.Items()
		dtype, shape := listContract(items)
		from := fmt.Sprintf("from the %d items of example %s", len(items), baseName(ex.File))
		if dtype != "" {
			appendPairs(f, "dtype", str(string(dtype)))
		}
		if shape != nil {
			sn := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, d := range shape {
				if sz, fixed := d.Size(); fixed {
					sn.Content = append(sn.Content, integer(sz))
				} else {
					sn.Content = append(sn.Content, str(string(d)))
				}
			}
			f.Content = append(f.Content, commented(key("shape"), "each item's shape "+from+" (\"*\" where they differ); name the sizes that vary between calls (H, W) or use \"*\""), sn)
		}
		appendPairs(f, "description", desc)
	default:
		appendPairs(f, "description", desc)
	}
	return f
}

// argumentParts builds the fields of a tensor_dict or tensor_tuple field
// for argument a of method: a dict's keys as the method's code reads them
// (contract.DictKeys.Arguments), each required; a tuple's elements,
// named item0, item1, ... It refuses a dict whose keys the code does not
// show, naming the argument.
func (b *builder) argumentParts(method string, a engine.Argument, decl string) *yaml.Node {
	t, _ := contract.ParseType(a.Type)
	if t.Name == "Optional" {
		t = t.Elems[0]
	}
	var fields []*yaml.Node
	if t.Name == "Tuple" {
		for i := range t.Elems {
			fields = append(fields, mapping("name", str(fmt.Sprintf("item%d", i)), "required", boolean(true)))
		}
		return sequence(fields...)
	}
	keys := b.ck.DictKeys[method].Arguments[a.Name]
	if len(keys) == 0 {
		b.refuse("argument %s of %s is a dict of tensors whose keys the code of %s does not show (it does more with %s than read literal keys, %s[\"KEY\"]): write the field by hand, of kind tensor_dict with fields naming the keys the model reads (docs/manifest.md, \"Structured inputs\"), or leave %s out (--method)",
			decl, method, method, a.Name, a.Name, method)
		return nil
	}
	var names naming.Scope
	for _, k := range keys {
		if strings.Contains(k, ".") || strings.Trim(k, "0123456789") == "" || names.Declare(naming.Exported(k), k) != nil {
			b.refuse("argument %s of %s reads the key %q, which a tensor_dict field cannot name (a '.', all digits, or the Go name of another key); write the field by hand, or leave %s out (--method)", decl, method, k, method)
			return nil
		}
		fields = append(fields, mapping("name", str(k), "required", boolean(true)))
	}
	return sequence(fields...)
}

// reserved are names a keyword argument cannot have (validate refuses them
// as field ids).
var reserved = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true,
	"def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true,
	"not": true, "or": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true, "self": true,
}

// defaultNode writes a schema default as a manifest value of the kind.
func defaultNode(kind spec.Kind, v any) (*yaml.Node, bool) {
	switch {
	case kind.TensorLike():
		return nil, false // only known at call time
	case kind.IsList():
		list, ok := v.([]any)
		if !ok {
			return nil, false
		}
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, e := range list {
			item, ok := defaultNode(kind.Elem(), e)
			if !ok {
				return nil, false
			}
			n.Content = append(n.Content, item)
		}
		return n, true
	}
	switch kind.Base() {
	case spec.BaseString:
		s, ok := v.(string)
		return str(s), ok && utf8.ValidString(s)
	case spec.BaseBool:
		x, ok := v.(bool)
		return boolean(x), ok
	case spec.BaseInt:
		x, ok := v.(int64)
		return integer(x), ok
	case spec.BaseFloat:
		switch x := v.(type) {
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, false
			}
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: floatText(x)}, true
		case int64:
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: floatText(float64(x))}, true
		}
	}
	return nil, false
}

// artifactID is what a dict key must look like to become an artifact id.
var artifactID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

func (b *builder) artifacts(task *yaml.Node, m engine.MethodSchema, size int64, batched bool) []*yaml.Node {
	shape := returnOf(m.Returns)
	if shape.tuple != nil {
		return b.tupleArtifacts(task, m, shape, size, batched)
	}
	kind := shape.kind
	if kind.Holds() == spec.HoldsRecordList && !shape.dict {
		// List[Dict[str, Tensor]]: one record_list artifact.
		f := b.recordFields(task, m, shape, 0, "the "+shape.text+" that "+m.Name+" returns", batched)
		if f == nil {
			return nil
		}
		a := mapping("artifact_id", str("output"), "kind", str(string(kind)), "required", boolean(!shape.optional))
		appendPairs(a, "description", str(fmt.Sprintf("TODO: what it holds. The %s that %s returns.", shape.text, m.Name)), "fields", f)
		return []*yaml.Node{a}
	}
	if kind.Holds() == spec.HoldsTensorList && batched {
		b.refuse("%s returns %s, a list, which batching cannot split per item; import it without --batched", m.Name, shape.text)
		return nil
	}
	if kind == "" {
		b.refuse("the return type of %s, %s, has no artifact kind (artifacts hold a Tensor, a List[Tensor], a str or plain data, a tuple of them or a Dict[str, ...] of them); leave %s out (--method)", m.Name, shape.text, m.Name)
		return nil
	}
	hint := ""
	if kind.Holds() == spec.HoldsTensor {
		hint = " A more specific kind (video, image, embedding) may fit."
	}
	var out []*yaml.Node
	if shape.dict {
		var names naming.Scope
		for _, k := range b.ck.ReturnKeys[m.Name] {
			if !artifactID.MatchString(k.Name) {
				b.warn(task, "key %q of the dict %s returns is not an artifact id; it is left out", k.Name, m.Name)
				continue
			}
			if names.Declare(naming.Exported(k.Name), k.Name) != nil {
				b.warn(task, "key %q of the dict %s returns has the same Go name as another key; it is left out", k.Name, m.Name)
				continue
			}
			a := mapping(
				"artifact_id", str(k.Name),
				"kind", str(string(kind)),
				"required", boolean(k.Always && !shape.optional),
			)
			out = append(out, b.artifactContract(task, a, m.Name, k.Name, kind, size, batched,
				fmt.Sprintf("TODO: what it holds. Key %q of the %s that %s returns.%s", k.Name, shape.text, m.Name, hint)))
		}
		if len(out) == 0 {
			b.warn(task, "method %s returns %s, but its code does not show the keys: rename artifact \"output\" to each key it returns", m.Name, shape.text)
		}
	}
	if len(out) == 0 {
		a := mapping(
			"artifact_id", str("output"),
			"kind", str(string(kind)),
			"required", boolean(!shape.optional),
		)
		id := "output"
		if shape.dict {
			id = "" // the dict's keys are unknown: nothing observed fits
		}
		out = append(out, b.artifactContract(task, a, m.Name, id, kind, size, batched,
			fmt.Sprintf("TODO: what it holds. The %s that %s returns.%s", shape.text, m.Name, hint)))
	}
	return out
}

// recordFields builds the fields of a record or record_list artifact
// holding what (a phrase naming the value) that method m returns at
// position pos of its tuple (0 for a value that is not a tuple; -1 inside a
// nested tuple, whose dicts are not followed), of type
// e: the keys the code that builds the dicts shows (contract.DictKeys). A
// key is required when every path of the inference sets it; one that only
// some paths (or only training) set is optional. When the code does not
// show every key the value can hold, or batching would have to split the
// value, it refuses, naming the value and where the code stops telling: a
// skeleton without its keys could not load.
func (b *builder) recordFields(task *yaml.Node, m engine.MethodSchema, e returnShape, pos int, what string, batched bool) *yaml.Node {
	if batched {
		b.refuse("%s is a %s, which batching cannot split per item; import it without --batched", what, e.kind)
		return nil
	}
	var vk contract.ValueKeys
	if dk := b.ck.DictKeys[m.Name]; pos >= 0 && pos < len(dk.Values) {
		vk = dk.Values[pos]
	}
	if len(vk.Keys) == 0 || !vk.Complete {
		why := "its code was not read"
		switch {
		case vk.Why != "":
			why = "the trail stops at " + vk.Why
		case vk.Complete:
			why = "no dict it returns has a key"
		}
		b.refuse("%s is a dict of tensors whose keys the code of %s does not show (%s): write the task by hand, with an artifact of kind %s whose fields are the keys the model returns (docs/manifest.md, \"Dicts and lists of dicts\"), or leave %s out (--method)",
			what, m.Name, why, e.kind, m.Name)
		return nil
	}
	var names naming.Scope
	var fields []*yaml.Node
	for _, k := range vk.Keys {
		if k.Name == "" || names.Declare(naming.Exported(k.Name), k.Name) != nil {
			b.warn(task, "key %q of %s has no Go name of its own (it is empty, or another key has the same Go name); it is left out", k.Name, what)
			continue
		}
		fields = append(fields, mapping("name", str(k.Name), "required", boolean(k.Always)))
	}
	return sequence(fields...)
}

// tupleArtifactID is the id of the artifact that is element i of a
// returned tuple.
func tupleArtifactID(i int) string { return fmt.Sprintf("output_%d", i) }

// tupleArtifacts builds one artifact per element of the tuple method m
// returns, each at its position (output_0, output_1, ...); an element no
// artifact kind holds is refused, naming its position.
func (b *builder) tupleArtifacts(task *yaml.Node, m engine.MethodSchema, shape returnShape, size int64, batched bool) []*yaml.Node {
	if len(shape.tuple) == 0 {
		b.refuse("%s returns %s, an empty tuple, which has no artifact; leave %s out (--method)", m.Name, shape.text, m.Name)
		return nil
	}
	ids := b.tupleIDs(task, m, len(shape.tuple))
	var out []*yaml.Node
	for i, e := range shape.tuple {
		switch {
		case e.kind == "":
			b.refuse("element %d of the tuple %s returns, %s (return type %s), has no artifact kind (artifacts hold a Tensor, a List[Tensor], a str or plain data); leave %s out (--method)", i, m.Name, e.text, shape.text, m.Name)
			return nil
		case e.kind.Holds() == spec.HoldsTensorList && batched:
			b.refuse("element %d of the tuple %s returns, %s, is a list, which batching cannot split per item; import it without --batched", i, m.Name, e.text)
			return nil
		}
		if e.kind.Holds().IsRecord() {
			// The keys are read for the outer tuple's elements only.
			pos := -1
			if len(e.path) == 1 {
				pos = e.path[0]
			}
			f := b.recordFields(task, m, e, pos, fmt.Sprintf("element %d of the tuple %s returns, %s,", i, m.Name, e.text), batched)
			if f == nil {
				return nil
			}
			a := tupleArtifact(shape, i, ids[i], e)
			appendPairs(a, "description", str(fmt.Sprintf("TODO: what it holds%s. Element %d (%s%s) of the %s that %s returns.", nameIt(ids[i], i), i, e.text, e.where(), shape.text, m.Name)), "fields", f)
			out = append(out, a)
			continue
		}
		hint := ""
		if e.kind.Holds() == spec.HoldsTensor {
			hint = " A more specific kind (video, image, embedding) may fit."
		}
		a := tupleArtifact(shape, i, ids[i], e)
		out = append(out, b.artifactContract(task, a, m.Name, tupleArtifactID(i), e.kind, size, batched,
			fmt.Sprintf("TODO: what it holds%s. Element %d (%s%s) of the %s that %s returns.%s", nameIt(ids[i], i), i, e.text, e.where(), shape.text, m.Name, hint)))
	}
	return out
}

// tupleArtifact starts the artifact id that is element i (e) of the tuple
// shape: its id, kind, position (none in a tuple with nested tuples,
// whose artifacts are its elements in order) and whether it is required.
func tupleArtifact(shape returnShape, i int, id string, e returnShape) *yaml.Node {
	a := mapping("artifact_id", str(id), "kind", str(string(e.kind)))
	if !shape.nested {
		appendPairs(a, "position", integer(int64(i)))
	}
	appendPairs(a, "required", boolean(!e.optional && !shape.optional))
	return a
}

// tupleIDs are the ids of the n artifacts that are the elements of the
// tuple method m returns: a NamedTuple's field names
// (Checkpoint.TupleNames), else output_0, output_1, ... A field name
// that is no artifact id, or whose Go name another one has, gives way to
// the element's position, with a warning.
func (b *builder) tupleIDs(task *yaml.Node, m engine.MethodSchema, n int) []string {
	names := b.ck.TupleNames[m.Name]
	if len(names) != n {
		names = nil
	}
	ids := make([]string, n)
	var scope naming.Scope
	for i := range ids {
		ids[i] = tupleArtifactID(i)
		if names == nil {
			continue
		}
		if !artifactID.MatchString(names[i]) || scope.Declare(naming.Exported(names[i]), names[i]) != nil {
			b.warn(task, "field %q of the NamedTuple %s returns is not an artifact id, or has another field's Go name: its artifact is %s", names[i], m.Name, ids[i])
			continue
		}
		ids[i] = names[i]
	}
	return ids
}

// nameIt asks, in a description, to name an artifact whose id is only
// its position.
func nameIt(id string, i int) string {
	if id == tupleArtifactID(i) {
		return "; name it"
	}
	return ""
}

// artifactContract completes artifact a (id, kind and required set) with
// the dtype and shape of the tensor the method returned under id when it
// ran on the examples, or a TODO comment, and its description.
func (b *builder) artifactContract(task, a *yaml.Node, method, id string, kind spec.ArtifactKind, size int64, batched bool, desc string) *yaml.Node {
	if kind.Holds() != spec.HoldsTensor {
		appendPairs(a, "description", str(desc))
		return a
	}
	t := b.ck.Outputs[method][id]
	if t != nil && batched && (len(t.Shape) == 0 || t.Shape[0] != size) {
		b.warn(task, "artifact %s: %s returned %s%v for a batch of %d, not one row per item; it has no shape, and batching splits every output along its first dimension", id, method, t.DType, t.Shape, size)
		appendPairs(a, "dtype", str(string(t.DType)))
		t = nil
	}
	from := fmt.Sprintf("as %s returned it on the examples", method)
	todo := "dtype and shape of the tensor: the schema says only Tensor. Add the ones the model returns, or import again with --example for its Tensor arguments"
	tensorContract(a, t, from, batched, todo, str(desc))
	return a
}

// YAML node helpers.

// invariantComment is the comment on the batching block of a batchable
// task: where a user first meets batching, it says what invariant: true
// changes, since nothing else in a skeleton would.
const invariantComment = "Add invariant: true for answers that never depend on the batch: the same bits\n" +
	"for an item alone or in any batch, in process and from wfserve -batch (which is\n" +
	"batch-invariant by default). Without it a single call and a batched one may\n" +
	"differ in the last bits. The cost is padding (docs/batching.md, batch-invariant mode)."

// batchingKey is the "batching" key of a task, with invariantComment.
func batchingKey() *yaml.Node {
	k := key("batching")
	k.HeadComment = invariantComment
	return k
}

func key(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// str is a string scalar; invalid UTF-8 (which YAML cannot hold) becomes
// U+FFFD, so only free text may go through it unchecked.
func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.ToValidUTF8(s, "\uFFFD")}
}

func integer(i int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(i, 10)}
}

func boolean(v bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
}

func sequence(items ...*yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Content: items}
	if len(items) == 0 {
		n.Style = yaml.FlowStyle
	}
	return n
}

func mapping(pairs ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	appendPairs(n, pairs...)
	return n
}

// appendPairs appends key (string), value (*yaml.Node) pairs to a mapping.
func appendPairs(n *yaml.Node, pairs ...any) {
	for i := 0; i+1 < len(pairs); i += 2 {
		n.Content = append(n.Content, key(pairs[i].(string)), pairs[i+1].(*yaml.Node))
	}
}
