package ir

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// MaxPackageLen is the longest Go package name (derived or go_package) a
// manifest may produce: the package is also a folder and file name, which
// file systems limit to 255 bytes.
const MaxPackageLen = 128

// builder resolves one manifest and collects its diagnostics.
type builder struct {
	f     *manifest.File
	fam   *Family
	diags []Diagnostic
	pkg   scope // package-level Go names
}

// report adds a diagnostic at the value at ptr (or its key).
func (b *builder) report(ptr string, key bool, format string, args ...any) {
	b.diags = append(b.diags, b.f.Diagnose(ptr, key, format, args...))
}

// pruned reports whether the value at ptr had the wrong type (the schema
// check reported it) and is to be skipped.
func (b *builder) pruned(ptr string) bool { return b.f.Pruned(ptr) }

// Build checks a parsed and decoded manifest (f.Spec set) against the
// semantic rules and resolves it. It returns the Family, or nil and every
// diagnostic. It normalises f.Spec in place: field defaults and
// default_call_kwargs values that set a field take their kind's Go form
// (string, int64, float64, bool, []string, []int64, []float64, []bool).
// It never panics, whatever the manifest holds.
func Build(f *manifest.File) (*Family, []Diagnostic) {
	if f == nil || f.Spec == nil {
		return nil, []Diagnostic{{File: pathOf(f), Line: 1, Column: 1, Message: "manifest has not been decoded"}}
	}
	b := &builder{f: f, fam: &Family{File: f, Spec: f.Spec}}
	b.pkg.declareFixed(packageNames, "the generated declaration")
	b.schemaVersion()
	b.family()
	b.variants()
	b.tasks()
	b.realtime()
	if len(b.diags) > 0 {
		return nil, manifest.SortDiagnostics(b.diags)
	}
	b.fam.identity = b.fam.identify()
	return b.fam, nil
}

func pathOf(f *manifest.File) string {
	if f == nil {
		return ""
	}
	return f.Path
}

func (b *builder) schemaVersion() {
	if b.f.Has("/schema_version") && !b.pruned("/schema_version") &&
		b.f.SchemaVersion >= 1 && b.f.SchemaVersion != manifest.SchemaVersion {
		b.report("/schema_version", false, "schema_version %d is not supported; this wfgen reads schema_version %d (a newer wfgen may read it)",
			b.f.SchemaVersion, manifest.SchemaVersion)
	}
}

// familyID is the form of a model_family_id.
var familyID = regexp.MustCompile(`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`)

func (b *builder) family() {
	s := b.fam.Spec
	if s.ModelFamilyID != "" && !b.pruned("/model_family_id") && !familyID.MatchString(s.ModelFamilyID) {
		b.report("/model_family_id", false, "model_family_id %q must be lower-case letters and digits in words joined by '-' or '_' (like \"my-world-model\")", s.ModelFamilyID)
	}
	seen := map[string]string{}
	if s.ModelFamilyID != "" {
		seen[s.ModelFamilyID] = "/model_family_id"
	}
	for i, a := range s.Aliases {
		p := manifest.Pointer("aliases", i)
		if b.pruned(p) {
			continue
		}
		if a == "" {
			b.report(p, false, "family alias is empty")
			continue
		}
		if first, dup := seen[a]; dup {
			if first == "/model_family_id" {
				b.report(p, false, "family alias %q repeats model_family_id", a)
			} else {
				b.report(p, false, "duplicate family alias %q (first at line %d)", a, b.f.Line(first))
			}
			continue
		}
		seen[a] = p
	}
	b.problems("/op_libraries", "op_libraries", spec.OpLibraryProblems(s.OpLibraries))
	if p := s.VersionPolicy; p != nil && p.Pinned && p.Latest > 0 && !b.pruned("/version_policy/latest") {
		b.report("/version_policy/latest", true, "version_policy: pinned and latest exclude each other (pinned keeps the revision serving, latest: %d keeps the %d newest side by side); give one of them", p.Latest, p.Latest)
	}
	b.fam.Package = PackageOf(s.ModelFamilyID, s.GoPackage)
	at := "/model_family_id"
	if s.GoPackage != "" {
		at = "/go_package"
		if b.pruned(at) {
			return
		}
		if err := naming.CheckPackage(s.GoPackage); err != nil {
			b.report(at, false, "go_package: %v", err)
			return
		}
	}
	if n := len(b.fam.Package); n > MaxPackageLen {
		b.report(at, false, "the Go package name %s… is %d characters long, more than %d (it is also a folder and file name); set a shorter go_package",
			b.fam.Package[:20], n, MaxPackageLen)
	}
}

// PackageOf returns the Go package generated for a family: its go_package,
// or the name naming.Package derives from its id.
func PackageOf(familyID, goPackage string) string {
	if goPackage != "" {
		return goPackage
	}
	return naming.Package(familyID)
}

// checkIDs reports duplicate ids, and aliases that are empty, repeated or
// shadow an id. ids[i] and aliases[i] belong to item i at list/i. It
// returns each id's and alias's owner pointer (of the id).
func (b *builder) checkIDs(list, what, idKey string, ids []string, aliases [][]string) map[string]string {
	owner := map[string]string{} // id or alias -> pointer of the owning id
	for i, id := range ids {
		p := manifest.Pointer(list, i, idKey)
		if id == "" || b.pruned(p) {
			continue
		}
		if first, dup := owner[id]; dup {
			b.report(p, false, "duplicate %s id %q (first defined at line %d)", what, id, b.f.Line(first))
			continue
		}
		owner[id] = p
	}
	isID := make(map[string]bool, len(owner))
	for k := range owner {
		isID[k] = true
	}
	aliasAt := map[string]string{} // alias -> its first pointer
	for i, as := range aliases {
		for j, a := range as {
			p := manifest.Pointer(list, i, "aliases", j)
			if b.pruned(p) {
				continue
			}
			if a == "" {
				b.report(p, false, "%s alias is empty", what)
				continue
			}
			first, dup := owner[a]
			switch {
			case dup && isID[a] && first == manifest.Pointer(list, i, idKey):
				b.report(p, false, "%s alias %q repeats the %s's own id", what, a, what)
			case dup && isID[a]:
				b.report(p, false, "%s alias %q shadows the id of %s %q (line %d); an alias must not equal any %s id", what, a, what, a, b.f.Line(first), what)
			case dup:
				b.report(p, false, "duplicate %s alias %q (first at line %d)", what, a, b.f.Line(aliasAt[a]))
			default:
				owner[a], aliasAt[a] = manifest.Pointer(list, i, idKey), p
			}
		}
	}
	return owner
}

// defaultItem returns the index of the item that the default id (an id or
// an alias) names, or reports that it names none and returns -1.
func (b *builder) defaultItem(key, list, what, id string, owner map[string]string, ids []string) int {
	if p, ok := owner[id]; ok {
		segs := manifest.SplitPointer(p)
		i, _ := strconv.Atoi(segs[1])
		return i
	}
	if b.pruned("/" + key) {
		return -1
	}
	var known []string
	for _, x := range ids {
		if q := strconv.Quote(x); x != "" && !slices.Contains(known, q) {
			known = append(known, q)
		}
	}
	if len(known) == 0 {
		return -1 // the schema already reported the empty list
	}
	if b.f.Has("/" + key) {
		b.report("/"+key, false, "%s %q names no %s or %s alias; known %ss: %s", key, id, what, what, what, strings.Join(known, ", "))
		return -1
	}
	b.report("/"+list, true, "%s is not set, so it is %q, but no %s has that id; set %s to one of: %s", key, id, what, key, strings.Join(known, ", "))
	return -1
}

// goName returns the Go name of an id: its go_name override when set, else
// naming.Exported(id). An override that is not a legal exported identifier
// is reported at item/go_name.
func (b *builder) goName(id, override, item string) string {
	if override == "" || b.pruned(item+"/go_name") {
		return naming.Exported(id)
	}
	if err := naming.CheckExported(override); err != nil {
		b.report(item+"/go_name", false, "%v", err)
		return naming.Exported(id)
	}
	return override
}

// constName names an enum constant: prefix + go_name when set (and legal),
// else prefix followed by the words of the id (naming.Append: Variant1_3B).
func constName(prefix, id, override string) string {
	if override != "" && naming.CheckExported(override) == nil {
		return prefix + override
	}
	return naming.Append(prefix, id)
}

// nameAt is where a Go name derived from an item is reported: its go_name
// when set, else its id.
func nameAt(item, idKey, override string) string {
	if override != "" {
		return item + "/go_name"
	}
	return item + "/" + idKey
}

func (b *builder) variants() {
	s := b.fam.Spec
	ids := make([]string, len(s.Variants))
	aliases := make([][]string, len(s.Variants))
	for i := range s.Variants {
		v := &s.Variants[i]
		ids[i], aliases[i] = v.VariantID, v.Aliases
		b.problems(manifest.Pointer("variants", i, "op_libraries"), manifest.Sprintf("variant %q", v.VariantID), spec.OpLibraryProblems(v.OpLibraries))
		roles := map[string]int{}
		for j, ck := range v.Checkpoints {
			b.problems(manifest.Pointer("variants", i, "checkpoints", j), manifest.Sprintf("variant %q checkpoint %q", v.VariantID, ck.Role),
				v.Checkpoints[j].FormatProblems())
			p := manifest.Pointer("variants", i, "checkpoints", j, "role")
			if ck.Role == "" || b.pruned(p) {
				continue
			}
			if first, dup := roles[ck.Role]; dup {
				b.report(p, false, "variant %q has two checkpoints with role %q (first at line %d); roles must be unique within a variant",
					v.VariantID, ck.Role, b.f.Line(manifest.Pointer("variants", i, "checkpoints", first, "role")))
				continue
			}
			roles[ck.Role] = j
		}
	}
	owner := b.checkIDs("variants", "variant", "variant_id", ids, aliases)
	for i := range s.Variants {
		v := &s.Variants[i]
		item := manifest.Pointer("variants", i)
		b.goName(v.VariantID, v.GoName, item) // reports an illegal override
		rv := &Variant{Spec: v, Const: constName("Variant", v.VariantID, v.GoName)}
		if v.VariantID != "" && owner[v.VariantID] == item+"/variant_id" {
			b.pkg.declare(b, rv.Const, manifest.Sprintf("variant %q", v.VariantID), nameAt(item, "variant_id", v.GoName))
		}
		b.fam.Variants = append(b.fam.Variants, rv)
	}
	if i := b.defaultItem("default_variant_id", "variants", "variant", s.DefaultVariantID, owner, ids); i >= 0 {
		b.fam.DefaultVariant = b.fam.Variants[i]
	}
}

func (b *builder) tasks() {
	s := b.fam.Spec
	ids := make([]string, len(s.Tasks))
	aliases := make([][]string, len(s.Tasks))
	for i := range s.Tasks {
		ids[i], aliases[i] = s.Tasks[i].TaskID, s.Tasks[i].Aliases
	}
	owner := b.checkIDs("tasks", "task", "task_id", ids, aliases)
	var client scope
	client.declareFixed(clientMethods, "the Client method")
	for i := range s.Tasks {
		t := &s.Tasks[i]
		declare := t.TaskID != "" && owner[t.TaskID] == manifest.Pointer("tasks", i, "task_id")
		b.fam.Tasks = append(b.fam.Tasks, b.task(&client, i, declare))
	}
	if i := b.defaultItem("default_task_id", "tasks", "task", s.DefaultTaskID, owner, ids); i >= 0 {
		b.fam.DefaultTask = b.fam.Tasks[i]
	}
}

// realtime checks the family's realtime spec.
func (b *builder) realtime() {
	s := b.fam.Spec
	if s.Realtime == nil || b.pruned("/realtime") {
		return
	}
	if !s.SupportsStream && !b.pruned("/supports_stream") {
		b.report("/realtime", true, "realtime is set, but the family does not set supports_stream: true")
	}
	seen := map[string]int{}
	for i, ctl := range s.Realtime.Controls {
		p := manifest.Pointer("realtime", "controls", i)
		if b.pruned(p) {
			continue
		}
		if ctl == "" {
			b.report(p, false, "realtime control %d is empty", i)
			continue
		}
		if first, dup := seen[ctl]; dup {
			b.report(p, false, "duplicate realtime control %q (first at line %d)", ctl, b.f.Line(manifest.Pointer("realtime", "controls", first)))
			continue
		}
		seen[ctl] = i
	}
}

// scope tracks the Go names declared in one Go scope, with what declared
// each and where.
type scope struct {
	first map[string]origin
}

// origin is what declared a Go name: a description and the pointer of the
// manifest value behind it ("" for a name the generated code declares).
type origin struct {
	what, at string
}

// declareFixed declares names that the generated code itself declares.
func (s *scope) declareFixed(names []string, what string) {
	for _, n := range names {
		s.add(n, origin{what: what + " " + n})
	}
}

func (s *scope) add(name string, o origin) (origin, bool) {
	if s.first == nil {
		s.first = map[string]origin{}
	}
	if first, taken := s.first[name]; taken {
		return first, false
	}
	s.first[name] = o
	return o, true
}

// declare declares name for what (a description such as `task "x" field
// "y"`), reporting a collision at the pointer at. It reports whether the
// name was free.
func (s *scope) declare(b *builder, name, what, at string) bool {
	first, ok := s.add(name, origin{what: what, at: at})
	if ok {
		return true
	}
	c := naming.Collision{Name: name, First: first.what, Second: what}
	if first.at == "" {
		b.report(at, false, "%s", c.Error())
		return false
	}
	b.report(at, false, "%s (first at line %d)", c.Error(), b.f.Line(first.at))
	return false
}

// Names the generated code declares in every package, and the methods of
// the generated types: manifest names must not collide with them.
var (
	packageNames = []string{
		"FamilyID", "Variant", "Variants", "ParseVariant", "DefaultVariant",
		"Task", "Tasks", "ParseTask", "DefaultTask", "Spec", "Client", "New", "NewClient", "WithVariant",
	}
	clientMethods = []string{"Backend", "Close", "Variant"}
	paramsMethods = []string{"Validate", "CallKwargs", "LoadKwargs", "UnmarshalJSON"}
)
