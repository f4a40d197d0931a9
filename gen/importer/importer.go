// Package importer writes a manifest skeleton from a TorchScript
// checkpoint or an AOTInductor package, so that a new model family starts
// from its model's own signature ("wfgen import"). A package's call spec
// gives more than a TorchScript schema (dtypes, shapes, the batch range):
// SkeletonFromCallSpec; the rest of this comment is about TorchScript.
//
// ImportFile reads the schema of each chosen method from the code a
// TorchScript archive carries (contract.ReadSignatures), in pure Go, with
// no libtorch; Import opens the checkpoint through an engine.Engine
// instead, which examples need (they run the model), and gives the same
// schemas. Skeleton, which is pure Go too, turns those schemas
// and the file's facts (sha256, size, the keys its methods' returned dicts
// hold) into manifest YAML:
//
//   - one variant "default" whose "model" checkpoint is the file, with its
//     sha256 and size_bytes;
//   - one task per method, running that method;
//   - one field per argument, its kind from the TorchScript type (see
//     FieldKind), required when the argument has no default, its default
//     from the schema's default; Optional[X] is X and not required;
//   - artifacts from a Dict[str, V] return whose keys the code shows (see
//     contract.ReturnKeys), one per element of a Tuple return (output_0,
//     output_1, ..., each with its position), else one artifact "output";
//     the kind is tensor for Tensor, tensor_list for List[Tensor], record
//     for Dict[str, Tensor] (in a tuple) and record_list for
//     List[Dict[str, Tensor]], with the keys the code shows as fields,
//     followed through the module's submodules and functions (see
//     contract.ReadDictKeys): required when every inference path sets
//     them; a refusal naming where the code stops telling when it does not
//     show every key; text for str, json for plain data;
//   - a refusal (*UntypedError) naming the position when an argument
//     without a default, the return type or a tuple element is of a type no
//     kind holds, since no skeleton could load;
//   - when the code calls custom ops (contract.ReadCustomOps), the family's
//     op_libraries: the library a Debian package installs for their
//     namespace when it is installed here (python3-torchvision's for
//     torchvision::nms; engine.KnownOpLibrary), else a TODO and a warning
//     naming the ops, since the checkpoint cannot load without it;
//   - "TODO" where the schema cannot tell: descriptions, constraints,
//     artifact kinds more specific than tensor, and the dtype and shape of
//     tensors (a TODO comment beside each tensor field and artifact);
//   - with example inputs (Options.Examples, wfgen import --example
//     NAME=FILE.npy), the dtype and shape of those fields, and of the
//     tensor outputs of each method Import can run on them; with
//     Options.Batched the first dimension is the batch dimension N and the
//     task is batchable.
//
// libtorch 1.13's schemas print every tensor as "Tensor", without dtype or
// shape, and a saved module's code keeps none either (a traced module's
// example shapes are not saved), so without examples the importer never
// knows a dtype: it writes TODO comments the user completes.
//
// The skeleton is validated and checked against the schemas it was built
// from (contract.CheckTask) before it is returned, so it passes wfgen
// validate and the load's contract check. Output is deterministic.
package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// DefaultSchemaRef is the JSON Schema the skeleton's yaml-language-server
// header names when Options.SchemaRef is empty: the schema's $id.
const DefaultSchemaRef = "https://github.com/worldfoundry/wfgen/schema/manifest.schema.json"

// Options configure an import.
type Options struct {
	// FamilyID is the model_family_id; "" derives it from the checkpoint's
	// file name ("Tiny_Model.v2.pt" → "tiny-model-v2").
	FamilyID string
	// Methods are the methods to import, one task each, in order; none
	// means "forward".
	Methods []string
	// Output is where the manifest will be written. When set, the
	// checkpoint's uri is relative to its folder; otherwise it is the
	// checkpoint path as given.
	Output string
	// SchemaRef is the $schema of the yaml-language-server header line;
	// "" is DefaultSchemaRef.
	SchemaRef string
	// Examples are example values of Tensor arguments, by argument name
	// (see Example and ReadExample): each gives its field a dtype and a
	// shape, and Import runs every method whose required arguments all
	// have one, to give its tensor outputs theirs.
	Examples map[string]Example
	// Batched says the first dimension of every example is the batch
	// dimension: tasks that take examples become batchable (batching.dim
	// N, max_batch_size the examples' batch size) and that dimension is
	// named N in the shapes.
	Batched bool
}

// Checkpoint is what Skeleton knows of the checkpoint file.
type Checkpoint struct {
	// Path is the file as the user named it.
	Path string
	// SHA256 is the lower-case hex digest of the file.
	SHA256 string
	// SizeBytes is the file size.
	SizeBytes int64
	// ReturnKeys are the keys of each method's returned dict, when its code
	// shows them (see contract.ReturnKeys).
	ReturnKeys map[string][]contract.ReturnKey
	// DictKeys are, for each method, the keys of the dicts of tensors it
	// returns inside a structure, by tuple position, as far as its code
	// shows them (see contract.ReadDictKeys): the fields of its record
	// artifacts.
	DictKeys map[string]contract.DictKeys
	// TupleNames are, for each method that returns a NamedTuple, its
	// fields' names in order (contract.Signatures.ReturnNames): the ids
	// of the artifacts that are its elements.
	TupleNames map[string][]string
	// Outputs are the tensors each method returned when Import ran it on
	// the examples (Options.Examples), by method name.
	Outputs map[string]Output
	// CustomOps are the custom ops the checkpoint's TorchScript code calls
	// (contract.ReadCustomOps): loading it needs their op libraries.
	CustomOps []contract.CustomOp
}

// Inspect reads a checkpoint file's facts: its size, sha256, the return
// keys its code shows and the custom ops it calls.
func Inspect(path string) (Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return Checkpoint{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Checkpoint{}, err
	}
	if !st.Mode().IsRegular() {
		return Checkpoint{}, fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read %s: %w", path, err)
	}
	// An archive whose code cannot be read has no custom ops to tell of:
	// reading its signatures reports what is wrong with it.
	ops, _ := contract.ReadCustomOps(f, n)
	var names map[string][]string
	if sigs, err := contract.ReadSignatures(f, n); err == nil {
		for _, m := range sigs.Methods() {
			if ns := sigs.ReturnNames(m); ns != nil {
				if names == nil {
					names = map[string][]string{}
				}
				names[m] = ns
			}
		}
	}
	return Checkpoint{
		TupleNames: names,
		Path:       path,
		SHA256:     hex.EncodeToString(h.Sum(nil)),
		SizeBytes:  n,
		ReturnKeys: contract.ReturnKeys(f, n),
		DictKeys:   contract.ReadDictKeys(f, n),
		CustomOps:  ops,
	}, nil
}

// Result is an imported skeleton.
type Result struct {
	// YAML is the manifest.
	YAML []byte
	// Warnings say what the skeleton left out or cannot know (an argument
	// left to its default, a dict's keys the code does not show, the op
	// library of custom ops); each is also a TODO comment in YAML.
	Warnings []string
}

// Import opens the checkpoint at path with e (on the CPU), reads the
// schemas of opts.Methods and returns the skeleton. An unknown method is
// an error naming the module's methods. An AOTInductor package (a
// engine.CallSpecModule) is imported from its call spec instead
// (SkeletonFromCallSpec).
func Import(e engine.Engine, path string, opts Options) (*Result, error) {
	if e == nil {
		return nil, engine.ErrNoEngine
	}
	mod, err := e.Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer mod.Close()
	if cs, ok := mod.(engine.CallSpecModule); ok {
		spec, err := cs.CallSpec(spec.DefaultMethod)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ck, err := Inspect(path)
		if err != nil {
			return nil, err
		}
		return SkeletonFromCallSpec(ck, spec, opts)
	}
	schemas, err := methodSchemas(path, mod, opts.Methods)
	if err != nil {
		return nil, err
	}
	if _, err := checkExamples(schemas, opts); err != nil {
		return nil, err
	}
	ck, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	outs, warnings := runExamples(mod, schemas, opts)
	ck.Outputs = outs
	res, err := Skeleton(ck, schemas, opts)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(warnings, res.Warnings...)
	return res, nil
}

// ErrNeedsEngine is ImportFile's error for examples of a TorchScript
// checkpoint: giving its outputs a dtype and shape runs the model, which
// needs the libtorch engine (Import).
var ErrNeedsEngine = errors.New("--example runs the model on the examples to learn its outputs' dtypes and shapes, which needs the libtorch engine")

// ImportFile returns the skeleton Import returns, without an engine: it
// reads a TorchScript archive's method signatures and return keys from the
// code the archive carries (contract.ReadSignatures) and an AOTInductor
// package's call spec from its metadata (contract.ReadCallSpec), so it
// needs neither libtorch nor cgo. Only examples (Options.Examples) of a
// TorchScript checkpoint need the model run, and are ErrNeedsEngine.
func ImportFile(path string, opts Options) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if engine.DetectFormat(f, st.Size()) == spec.FormatAOTInductor {
		spec, err := contract.ReadCallSpec(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ck, err := Inspect(path)
		if err != nil {
			return nil, err
		}
		return SkeletonFromCallSpec(ck, spec, opts)
	}
	if len(opts.Examples) > 0 {
		return nil, ErrNeedsEngine
	}
	sigs, err := contract.ReadSignatures(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	schemas, err := methodSchemas(path, sigs, opts.Methods)
	if err != nil {
		return nil, err
	}
	if _, err := checkExamples(schemas, opts); err != nil {
		return nil, err
	}
	ck, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	return Skeleton(ck, schemas, opts)
}

// schemaSource is where methods' schemas come from: a module the engine
// loaded, or an archive's code (contract.Signatures).
type schemaSource interface {
	Methods() []string
	Schema(method string) (engine.MethodSchema, error)
}

// methodSchemas returns the schemas of methods (none: forward) from src,
// an unknown method an error naming the methods there are.
func methodSchemas(path string, src schemaSource, methods []string) ([]engine.MethodSchema, error) {
	if len(methods) == 0 {
		methods = []string{spec.DefaultMethod}
	}
	have := src.Methods()
	var schemas []engine.MethodSchema
	for _, m := range methods {
		if !slices.Contains(have, m) {
			return nil, fmt.Errorf("%s has no method %q (its methods: %s); choose with --method", path, m, strings.Join(have, ", "))
		}
		s, err := src.Schema(m)
		var located *contract.CodeError
		if errors.As(err, &located) {
			return nil, fmt.Errorf("%s: %w", path, err) // names the method and where
		} else if err != nil {
			return nil, fmt.Errorf("%s: schema of %s: %w", path, m, err)
		}
		schemas = append(schemas, s)
	}
	return schemas, nil
}

// familyIDPattern is validate's rule for a model_family_id.
var familyIDPattern = regexp.MustCompile(`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`)

// FamilyIDFromPath derives a model_family_id from a file name: lower-case,
// every run of other characters than a-z and 0-9 becomes one '-', the
// extension dropped; "model" when nothing is left.
func FamilyIDFromPath(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(base) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "model"
	}
	return b.String()
}

// Skeleton builds the manifest for the given method schemas, in order. It
// fails on bad options (a malformed family id, no or repeated methods) and
// when the result would not validate (which would be a bug).
func Skeleton(ck Checkpoint, methods []engine.MethodSchema, opts Options) (*Result, error) {
	if len(methods) == 0 {
		return nil, errors.New("import: no methods")
	}
	fam := opts.FamilyID
	if fam == "" {
		fam = FamilyIDFromPath(ck.Path)
	}
	if !familyIDPattern.MatchString(fam) {
		return nil, fmt.Errorf("family id %q must be lower-case letters and digits in words joined by '-' or '_' (like \"my-world-model\")", fam)
	}
	seen := map[string]bool{}
	for _, m := range methods {
		if !isIdent(m.Name) {
			return nil, fmt.Errorf("method %q is not a TorchScript method name", m.Name)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("method %q named twice", m.Name)
		}
		seen[m.Name] = true
	}
	batch, err := checkExamples(methods, opts)
	if err != nil {
		return nil, err
	}
	b := &builder{ck: ck, opts: opts, family: fam, batch: batch}
	data, err := b.build(methods)
	if err != nil {
		return nil, err
	}
	if b.refusal != nil {
		return nil, b.refusal
	}
	f, err := validSkeleton(fam, opts.Output, data)
	if err != nil {
		return nil, err
	}
	src := schemaList(methods)
	for i := range f.Spec.Tasks {
		if err := contract.CheckTask(&f.Spec.Tasks[i], &f.Spec.Variants[0], src, nil); err != nil {
			return nil, fmt.Errorf("import: the skeleton does not pass the contract check (a wfgen bug): %w", err)
		}
	}
	return &Result{YAML: data, Warnings: b.warnings}, nil
}

// UntypedError is an import's refusal: a position of the checkpoint's
// signature (an argument, a return type) that no manifest can type, so
// that any skeleton would fail to load.
type UntypedError struct {
	// Msg names the method, the position and its type, and what to do.
	Msg string
}

func (e *UntypedError) Error() string { return "import: " + e.Msg }

// schemaList is the method schemas an import reads, as contract.Schemas.
type schemaList []engine.MethodSchema

func (l schemaList) Methods() []string {
	names := make([]string, len(l))
	for i, m := range l {
		names[i] = m.Name
	}
	slices.Sort(names)
	return names
}

func (l schemaList) Schema(method string) (engine.MethodSchema, error) {
	for _, m := range l {
		if m.Name == method {
			return m, nil
		}
	}
	return engine.MethodSchema{}, fmt.Errorf("no method %q", method)
}

// validSkeleton validates a skeleton of family fam to be written to output
// ("" for standard output) and returns it; a skeleton that does not
// validate is a bug.
func validSkeleton(fam, output string, data []byte) (*ir.Family, error) {
	name := output
	if name == "" || !strings.HasSuffix(strings.ToLower(name), ".yaml") && !strings.HasSuffix(strings.ToLower(name), ".yml") {
		name = fam + ".yaml"
	}
	f, diags := validate.Bytes(name, data)
	if len(diags) > 0 {
		var msgs []string
		for _, d := range diags {
			msgs = append(msgs, d.String())
		}
		return nil, fmt.Errorf("import: the skeleton does not validate (a wfgen bug):\n%s", strings.Join(msgs, "\n"))
	}
	return f, nil
}

// checkpointURI is the uri the manifest gives the checkpoint.
func checkpointURI(ck, output string) string {
	if output == "" {
		return filepath.ToSlash(ck)
	}
	absOut, err1 := filepath.Abs(output)
	absCk, err2 := filepath.Abs(ck)
	if err1 != nil || err2 != nil {
		return filepath.ToSlash(ck)
	}
	rel, err := filepath.Rel(filepath.Dir(absOut), absCk)
	if err != nil {
		return filepath.ToSlash(absCk)
	}
	return filepath.ToSlash(rel)
}

// WriteFile writes data to path atomically: a temporary file in the same
// folder, synced, then renamed over path. Nothing is left behind on error.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// isIdent reports whether s is a Python identifier (ASCII).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
