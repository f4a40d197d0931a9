package validate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
	"github.com/worldfoundry/wfgen/runtime"
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

// semantic runs the checks the schema cannot express.
func (c *checker) semantic() {
	s := c.file.Spec
	if s == nil {
		return
	}
	if c.file.Has("/schema_version") && !c.isPruned("/schema_version") &&
		c.file.SchemaVersion >= 1 && c.file.SchemaVersion != manifest.SchemaVersion {
		c.report("/schema_version", false, "schema_version %d is not supported; this wfgen reads schema_version %d (a newer wfgen may read it)",
			c.file.SchemaVersion, manifest.SchemaVersion)
	}
	c.checkFamily(s)
	c.checkVariants(s)
	c.checkTasks(s)
	c.checkRealtime(s)
}

// familyID is the form of a model_family_id.
var familyID = regexp.MustCompile(`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`)

func (c *checker) checkFamily(s *runtime.ModelInferenceSpec) {
	if s.ModelFamilyID != "" && !c.isPruned("/model_family_id") && !familyID.MatchString(s.ModelFamilyID) {
		c.report("/model_family_id", false, "model_family_id %q must be lower-case letters and digits in words joined by '-' or '_' (like \"my-world-model\")", s.ModelFamilyID)
	}
	seen := map[string]string{}
	if s.ModelFamilyID != "" {
		seen[s.ModelFamilyID] = "/model_family_id"
	}
	for i, a := range s.Aliases {
		p := ptr("aliases", i)
		if c.isPruned(p) {
			continue
		}
		if a == "" {
			c.report(p, false, "family alias is empty")
			continue
		}
		if first, dup := seen[a]; dup {
			if first == "/model_family_id" {
				c.report(p, false, "family alias %q repeats model_family_id", a)
			} else {
				c.report(p, false, "duplicate family alias %q (first at line %d)", a, c.line(first))
			}
			continue
		}
		seen[a] = p
	}
	if s.GoPackage != "" && !c.isPruned("/go_package") {
		if err := naming.CheckPackage(s.GoPackage); err != nil {
			c.report("/go_package", false, "go_package: %v", err)
		}
	}
}

// checkIDs reports duplicate ids, and aliases that are empty, repeated or
// shadow an id. ids[i] and aliases[i] belong to item i at list/i.
func (c *checker) checkIDs(list, what, idKey string, ids []string, aliases [][]string) map[string]string {
	owner := map[string]string{} // id or alias -> pointer
	for i, id := range ids {
		p := ptr(list, i, idKey)
		if id == "" || c.isPruned(p) {
			continue
		}
		if first, dup := owner[id]; dup {
			c.report(p, false, "duplicate %s id %q (first defined at line %d)", what, id, c.line(first))
			continue
		}
		owner[id] = p
	}
	isID := make(map[string]bool, len(owner)) // owner holds only ids so far
	for k := range owner {
		isID[k] = true
	}
	for i, as := range aliases {
		for j, a := range as {
			p := ptr(list, i, "aliases", j)
			if c.isPruned(p) {
				continue
			}
			if a == "" {
				c.report(p, false, "%s alias is empty", what)
				continue
			}
			first, dup := owner[a]
			switch {
			case dup && isID[a] && first == ptr(list, i, idKey):
				c.report(p, false, "%s alias %q repeats the %s's own id", what, a, what)
			case dup && isID[a]:
				c.report(p, false, "%s alias %q shadows the id of %s %q (line %d); an alias must not equal any %s id", what, a, what, a, c.line(first), what)
			case dup:
				c.report(p, false, "duplicate %s alias %q (first at line %d)", what, a, c.line(first))
			default:
				owner[a] = p
			}
		}
	}
	return owner
}

// checkDefault reports a default id that names no item.
func (c *checker) checkDefault(key, list, what, id string, owner map[string]string, ids []string) {
	if _, ok := owner[id]; ok || c.isPruned("/"+key) {
		return
	}
	var known []string
	for _, x := range ids {
		if q := fmt.Sprintf("%q", x); x != "" && !slices.Contains(known, q) {
			known = append(known, q)
		}
	}
	if len(known) == 0 {
		return // the schema already reported the empty list
	}
	if c.file.Has("/" + key) {
		c.report("/"+key, false, "%s %q names no %s or %s alias; known %ss: %s", key, id, what, what, what, strings.Join(known, ", "))
		return
	}
	c.report("/"+list, true, "%s is not set, so it is %q, but no %s has that id; set %s to one of: %s", key, id, what, key, strings.Join(known, ", "))
}

func (c *checker) checkVariants(s *runtime.ModelInferenceSpec) {
	ids := make([]string, len(s.Variants))
	aliases := make([][]string, len(s.Variants))
	for i := range s.Variants {
		v := &s.Variants[i]
		ids[i], aliases[i] = v.VariantID, v.Aliases
		roles := map[string]int{}
		for j, ck := range v.Checkpoints {
			p := ptr("variants", i, "checkpoints", j, "role")
			if ck.Role == "" || c.isPruned(p) {
				continue
			}
			if first, dup := roles[ck.Role]; dup {
				c.report(p, false, "variant %q has two checkpoints with role %q (first at line %d); roles must be unique within a variant",
					v.VariantID, ck.Role, c.line(ptr("variants", i, "checkpoints", first, "role")))
				continue
			}
			roles[ck.Role] = j
		}
	}
	owner := c.checkIDs("variants", "variant", "variant_id", ids, aliases)
	c.checkDefault("default_variant_id", "variants", "variant", s.DefaultVariantID, owner, ids)
	var names goNames
	for i, v := range s.Variants {
		if owner[v.VariantID] == ptr("variants", i, "variant_id") {
			c.declareGoName(&names, "variant", v.VariantID, v.GoName, ptr("variants", i), "variant_id")
		}
	}
}

func (c *checker) checkTasks(s *runtime.ModelInferenceSpec) {
	ids := make([]string, len(s.Tasks))
	aliases := make([][]string, len(s.Tasks))
	for i := range s.Tasks {
		t := &s.Tasks[i]
		ids[i], aliases[i] = t.TaskID, t.Aliases
		c.checkTask(s, i)
	}
	owner := c.checkIDs("tasks", "task", "task_id", ids, aliases)
	c.checkDefault("default_task_id", "tasks", "task", s.DefaultTaskID, owner, ids)
	var names goNames
	for i, t := range s.Tasks {
		if owner[t.TaskID] == ptr("tasks", i, "task_id") {
			c.declareGoName(&names, "task", t.TaskID, t.GoName, ptr("tasks", i), "task_id")
		}
	}
}

// goNames are the Go names declared in one scope (variants, tasks, the
// fields of a task, the artifacts of a task).
type goNames struct {
	first map[string]goOrigin // Go name -> its first declaration
}

// goOrigin is what declared a Go name.
type goOrigin struct {
	what, id string // "variant", "task \"x\" field", ...
	at       string // pointer of the id or go_name
}

// declareGoName declares the Go name of the item at pointer item (its id
// under idKey, or its go_name override) and reports a collision at the id
// or the go_name, naming both ids.
func (c *checker) declareGoName(g *goNames, what, id, goName, item, idKey string) {
	if id == "" {
		return
	}
	at := item + "/" + idKey
	if goName != "" {
		at = item + "/go_name"
		if c.isPruned(at) {
			return
		}
		// The schema's pattern makes go_name an exported identifier.
	}
	name := naming.Ident{ID: id, GoName: goName}.Name()
	if first, taken := g.first[name]; taken {
		col := naming.Collision{Name: name, First: fmt.Sprintf("%s %q", first.what, first.id), Second: fmt.Sprintf("%s %q", what, id)}
		c.report(at, false, "%s (first at line %d)", col.Error(), c.line(first.at))
		return
	}
	if g.first == nil {
		g.first = map[string]goOrigin{}
	}
	g.first[name] = goOrigin{what: what, id: id, at: at}
}

func (c *checker) checkTask(s *runtime.ModelInferenceSpec, i int) {
	t := &s.Tasks[i]
	tp := ptr("tasks", i)
	name := fmt.Sprintf("task %q", t.TaskID)
	if t.Method != "" && !c.isPruned(tp+"/method") && !identifier.MatchString(t.Method) {
		c.report(tp+"/method", false, "%s: method %q is not a TorchScript method name (letters, digits and '_', not starting with a digit)", name, t.Method)
	}
	if len(t.Outputs) == 0 && !c.isPruned(tp+"/outputs") {
		c.report(tp, false, "%s has no outputs; list at least one artifact under outputs", name)
	}
	if t.Stream && !s.SupportsStream && !c.isPruned(tp+"/stream") {
		c.report(tp+"/stream", false, "%s is a stream task, but the family does not set supports_stream: true", name)
	}
	if b := t.Batching; b != nil && !c.isPruned(tp+"/batching") {
		bp := tp + "/batching"
		if t.Stream {
			c.report(bp, true, "%s: a stream task cannot be batched; remove batching or stream", name)
		}
		prev := 0
		for j, n := range b.PadToBatchSizes {
			p := ptr("tasks", i, "batching", "pad_to_batch_sizes", j)
			if c.isPruned(p) {
				continue
			}
			switch {
			case n < 1:
				c.report(p, false, "%s: pad_to_batch_sizes entry %d must be at least 1", name, n)
			case n <= prev:
				c.report(p, false, "%s: pad_to_batch_sizes must be strictly increasing (%d follows %d)", name, n, prev)
			case b.MaxBatchSize >= 1 && n > b.MaxBatchSize:
				c.report(p, false, "%s: pad_to_batch_sizes entry %d exceeds max_batch_size %d", name, n, b.MaxBatchSize)
			}
			prev = max(prev, n)
		}
		if len(b.PadToBatchSizes) > 0 && b.MaxBatchSize >= 1 && prev < b.MaxBatchSize {
			c.report(bp+"/pad_to_batch_sizes", false, "%s: the largest of pad_to_batch_sizes is %d, but max_batch_size is %d; end the list with %d so every batch has a static size",
				name, prev, b.MaxBatchSize, b.MaxBatchSize)
		}
	}

	// Inputs.
	var fieldNames goNames
	fields := map[string]int{}
	for j := range t.Inputs {
		f := &t.Inputs[j]
		fp := ptr("tasks", i, "inputs", j)
		if f.FieldID != "" && !c.isPruned(fp+"/field_id") {
			if first, dup := fields[f.FieldID]; dup {
				c.report(fp+"/field_id", false, "%s: duplicate field id %q (first defined at line %d)", name, f.FieldID, c.line(ptr("tasks", i, "inputs", first, "field_id")))
			} else {
				fields[f.FieldID] = j
				c.declareGoName(&fieldNames, name+" field", f.FieldID, f.GoName, fp, "field_id")
			}
			switch {
			case !identifier.MatchString(f.FieldID):
				c.report(fp+"/field_id", false, "%s: field id %q is passed as a keyword argument, so it must be letters, digits and '_', not starting with a digit", name, f.FieldID)
			case pythonReserved[f.FieldID]:
				c.report(fp+"/field_id", false, "%s: field id %q is a reserved word in TorchScript and cannot be a keyword argument; rename it", name, f.FieldID)
			}
		}
		c.checkField(name, f, fp)
	}

	// Outputs.
	var artNames goNames
	arts := map[string]int{}
	for j := range t.Outputs {
		a := &t.Outputs[j]
		ap := ptr("tasks", i, "outputs", j)
		if a.ArtifactID == "" || c.isPruned(ap+"/artifact_id") {
			continue
		}
		if first, dup := arts[a.ArtifactID]; dup {
			c.report(ap+"/artifact_id", false, "%s: duplicate artifact id %q (first defined at line %d)", name, a.ArtifactID, c.line(ptr("tasks", i, "outputs", first, "artifact_id")))
			continue
		}
		arts[a.ArtifactID] = j
		c.declareGoName(&artNames, name+" artifact", a.ArtifactID, a.GoName, ap, "artifact_id")
	}

	// Default call kwargs that set a field must fit it.
	for k, v := range t.DefaultCallKwargs {
		j, ok := fields[k]
		if !ok {
			continue
		}
		p := tp + "/default_call_kwargs" + manifest.JoinPointer(k)
		if c.isPruned(p) {
			continue
		}
		if nv, ok := c.fieldValue(name, &t.Inputs[j], v, p, "default_call_kwargs value"); ok {
			t.DefaultCallKwargs[k] = nv
		}
	}
}
