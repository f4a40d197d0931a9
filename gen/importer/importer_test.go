package importer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/contract"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

func TestFieldKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ      string
		kind     string
		optional bool
		ok       bool
	}{
		{"str", "string", false, true},
		{"int", "int", false, true},
		{"float", "float", false, true},
		{"Scalar", "float", false, true},
		{"bool", "bool", false, true},
		{"Tensor", "tensor", false, true},
		{"List[int]", "int_list", false, true},
		{"int[]", "int_list", false, true},
		{"List[float]", "float_list", false, true},
		{"List[str]", "string_list", false, true},
		{"List[bool]", "bool_list", false, true},
		{"List[Tensor]", "tensor_list", false, true},
		{"Optional[Tensor]", "tensor", true, true},
		{"Tensor?", "tensor", true, true},
		{"Optional[List[float]]", "float_list", true, true},
		{"Optional[str]", "string", true, true},
		{"Dict[str, Tensor]", "tensor_dict", false, true},
		{"Optional[Dict[str, Tensor]]", "tensor_dict", true, true},
		{"Tuple[Tensor, Tensor]", "tensor_tuple", false, true},
		{"Tuple[Tensor]", "tensor_tuple", false, true},
		{"Tuple[Tensor, int]", "", false, false},
		{"Dict[int, Tensor]", "", false, false},
		{"Dict[str, List[Tensor]]", "", false, false},
		{"Dict[str, int]", "", false, false},
		{"Tuple[int, int]", "", false, false},
		{"List[List[int]]", "", false, false},
		{"List[Optional[int]]", "", false, false},
		{"Union[int, str]", "", false, false},
		{"Any", "", false, false},
		{"Device", "", false, false},
		{"__torch__.Foo", "", false, false},
		{"List[", "", false, false},
	} {
		kind, optional, ok := FieldKind(tc.typ)
		if string(kind) != tc.kind || optional != tc.optional || ok != tc.ok {
			t.Errorf("FieldKind(%q) = %q, %v, %v; want %q, %v, %v", tc.typ, kind, optional, ok, tc.kind, tc.optional, tc.ok)
		}
	}
}

func TestFamilyIDFromPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"model.pt":                  "model",
		"/x/Tiny_Model.v2.pt":       "tiny-model-v2",
		"ckpt/--Wan 2.1 T2V--.ts":   "wan-2-1-t2v",
		"_.pt":                      "model",
		"日本.pt":                     "model",
		filepath.Join("a", "b.c.d"): "b-c",
	} {
		if got := FamilyIDFromPath(in); got != want {
			t.Errorf("FamilyIDFromPath(%q) = %q, want %q", in, got, want)
		}
		if !familyIDPattern.MatchString(FamilyIDFromPath(in)) {
			t.Errorf("FamilyIDFromPath(%q) is not a valid id", in)
		}
	}
}

// schemas is a module with every argument kind the importer maps, one it
// cannot map, and three return shapes.
var schemas = []engine.MethodSchema{
	{Name: "forward", Arguments: []engine.Argument{
		{Name: "prompt", Type: "str"},
		{Name: "x", Type: "Tensor"},
		{Name: "steps", Type: "int", HasDefault: true, Default: int64(3)},
		{Name: "scale", Type: "float", HasDefault: true, Default: 1.5},
		{Name: "gain", Type: "float", HasDefault: true, Default: int64(2)},
		{Name: "flag", Type: "bool", HasDefault: true, Default: true},
		{Name: "sizes", Type: "List[int]", HasDefault: true, Default: []any{int64(1), int64(2)}},
		{Name: "weights", Type: "List[float]", HasDefault: true, Default: []any{0.5, 1.0}},
		{Name: "names", Type: "List[str]", HasDefault: true, Default: []any{"a", "true"}},
		{Name: "mask", Type: "Optional[Tensor]", HasDefault: true, Default: nil},
		{Name: "limit", Type: "Optional[int]", HasDefault: true, Default: int64(7)},
		{Name: "eps", Type: "float", HasDefault: true, Default: 1e-12},
		{Name: "extra", Type: "Dict[str, int]", HasDefault: true, Default: map[string]any{"k": int64(1)}},
	}, Returns: []string{"Dict[str, Tensor]"}},
	{Name: "encode_text", Arguments: []engine.Argument{
		{Name: "tokens", Type: "List[str]"},
		{Name: "flags", Type: "List[bool]", HasDefault: true, Default: []any{true, false}},
		{Name: "frames", Type: "List[Tensor]", HasDefault: true, Default: []any{}},
	}, Returns: []string{"Tensor"}},
	{Name: "describe", Arguments: nil, Returns: []string{"Dict[str, float]"}},
}

var checkpoint = Checkpoint{
	Path:      "ckpts/My_Model.pt",
	SHA256:    strings.Repeat("ab", 32),
	SizeBytes: 4096,
	ReturnKeys: map[string][]contract.ReturnKey{
		"forward": {{Name: "video", Always: true}, {Name: "latents"}, {Name: "bad key"}},
	},
}

func TestSkeleton(t *testing.T) {
	t.Parallel()
	out := filepath.Join("manifests", "my-model.yaml")
	res, err := Skeleton(checkpoint, schemas, Options{Output: out})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes(out, res.YAML)
	if len(diags) > 0 {
		t.Fatalf("skeleton does not validate: %v\n%s", diags, res.YAML)
	}
	if !strings.HasPrefix(string(res.YAML), "# yaml-language-server: $schema="+DefaultSchemaRef+"\n") {
		t.Errorf("no yaml-language-server header:\n%s", res.YAML)
	}
	s := f.Spec
	if s.ModelFamilyID != "my-model" || s.DefaultTaskID != "forward" || s.DefaultVariantID != "default" {
		t.Errorf("family %q, default task %q, variant %q", s.ModelFamilyID, s.DefaultTaskID, s.DefaultVariantID)
	}
	ck := s.Variants[0].Checkpoints[0]
	want := spec.InferenceCheckpointRef{Role: "model", URI: "../ckpts/My_Model.pt", Required: true, Status: "available", SHA256: checkpoint.SHA256, SizeBytes: 4096}
	if ck != want {
		t.Errorf("checkpoint = %+v, want %+v", ck, want)
	}

	type field struct {
		Kind     string
		Required bool
		Default  any
	}
	fields := map[string]field{}
	fwd, _ := s.Task("forward")
	for _, in := range fwd.Inputs {
		fields[in.FieldID] = field{string(in.Kind), in.Required, in.Default}
		if !strings.HasPrefix(in.Description, "TODO") {
			t.Errorf("field %s: description %q has no TODO", in.FieldID, in.Description)
		}
	}
	wantFields := map[string]field{
		"prompt":  {"string", true, nil},
		"x":       {"tensor", true, nil},
		"steps":   {"int", false, int64(3)},
		"scale":   {"float", false, 1.5},
		"gain":    {"float", false, 2.0},
		"flag":    {"bool", false, true},
		"sizes":   {"int_list", false, []int64{1, 2}},
		"weights": {"float_list", false, []float64{0.5, 1}},
		"names":   {"string_list", false, []string{"a", "true"}},
		"mask":    {"tensor", false, nil},
		"limit":   {"int", false, int64(7)},
		"eps":     {"float", false, 1e-12},
	}
	if diff := cmp.Diff(wantFields, fields); diff != "" {
		t.Errorf("forward fields (-want +got):\n%s", diff)
	}
	var arts []string
	for _, a := range fwd.Outputs {
		arts = append(arts, a.ArtifactID+"/"+string(a.Kind)+"/"+map[bool]string{true: "required", false: "optional"}[a.Required])
	}
	if got := strings.Join(arts, " "); got != "video/tensor/required latents/tensor/optional" {
		t.Errorf("forward artifacts: %s", got)
	}
	enc, err := s.Task("encode-text")
	if err != nil || enc.MethodName() != "encode_text" || len(enc.Outputs) != 1 || enc.Outputs[0].ArtifactID != "output" || !enc.Outputs[0].Required {
		t.Errorf("encode-text task: %+v %v", enc, err)
	}
	desc, _ := s.Task("describe")
	if desc == nil || len(desc.Outputs) != 1 || desc.Outputs[0].Kind != "json" {
		t.Errorf("describe task: %+v", desc)
	}
	// Every task passes the contract check against the same schemas.
	var methods []string
	for _, m := range schemas {
		methods = append(methods, m.Name)
	}
	for i := range s.Tasks {
		if err := contract.Check(&s.Tasks[i], methods, schemas[i]); err != nil {
			t.Errorf("contract: %v", err)
		}
	}
	// What could not be imported is said, in the warnings and the YAML.
	for _, w := range []string{"argument extra: Dict[str, int] = {\"k\": 1} has no field kind", "key \"bad key\"", "its code does not show the keys"} {
		found := false
		for _, x := range res.Warnings {
			found = found || strings.Contains(x, w)
		}
		if !found || !strings.Contains(string(res.YAML), "# TODO: ") {
			t.Errorf("no warning %q in %v", w, res.Warnings)
		}
	}
	// Deterministic.
	again, err := Skeleton(checkpoint, schemas, Options{Output: out})
	if err != nil || !bytes.Equal(again.YAML, res.YAML) {
		t.Error("a second import differs")
	}
}

func TestSkeletonOptions(t *testing.T) {
	t.Parallel()
	one := schemas[1:2:2]
	res, err := Skeleton(checkpoint, one, Options{FamilyID: "custom_id", SchemaRef: "../schema/manifest.schema.json"})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("x.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if f.Spec.ModelFamilyID != "custom_id" || f.Spec.Variants[0].Checkpoints[0].URI != "ckpts/My_Model.pt" {
		t.Errorf("family %q, uri %q", f.Spec.ModelFamilyID, f.Spec.Variants[0].Checkpoints[0].URI)
	}
	if !strings.HasPrefix(string(res.YAML), "# yaml-language-server: $schema=../schema/manifest.schema.json\n") {
		t.Errorf("header: %q", strings.SplitN(string(res.YAML), "\n", 2)[0])
	}
	for _, tc := range []struct {
		opts    Options
		methods []engine.MethodSchema
		want    string
	}{
		{Options{FamilyID: "Bad Id"}, one, "must be lower-case"},
		{Options{}, nil, "no methods"},
		{Options{}, append(one, one...), "named twice"},
		{Options{}, []engine.MethodSchema{{Name: "a_b", Returns: []string{"Tensor"}}, {Name: "a__b", Returns: []string{"Tensor"}}}, ""},
		{Options{}, []engine.MethodSchema{{Name: "reset"}}, "the return type of reset, None, has no artifact kind"},
	} {
		_, err := Skeleton(checkpoint, tc.methods, tc.opts)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.opts, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.opts, err, tc.want)
		}
	}
}

func TestGoNameCollisions(t *testing.T) {
	t.Parallel()
	m := []engine.MethodSchema{{Name: "forward", Arguments: []engine.Argument{
		{Name: "num_frames", Type: "int"}, {Name: "numFrames", Type: "int"}, {Name: "NumFrames", Type: "int"},
	}, Returns: []string{"Tensor"}}}
	res, err := Skeleton(checkpoint, m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("x.yaml", res.YAML)
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	var names []string
	for _, in := range f.Spec.Tasks[0].Inputs {
		names = append(names, in.GoName)
	}
	if !reflect.DeepEqual(names, []string{"", "NumFrames2", "NumFrames3"}) {
		t.Errorf("go names %q", names)
	}
}

// pkl and netCode are the root pickle and code of a TorchScript archive
// (BenchmarkInspect).
const pkl = "\x80\x02c__torch__.pkg\nNet\nq\x00)\x81}"

const netCode = `class Other(Module):
  def forward(self: __torch__.pkg.Other) -> Dict[str, Tensor]:
    return {"wrong": torch.ones([1])}
class Net(Module):
  __parameters__ = []
  sub : __torch__.pkg.Other
  def forward(self: __torch__.pkg.Net,
    x: Tensor) -> Dict[str, Tensor]:
    return {"y": x}
  def step(self: __torch__.pkg.Net) -> Dict[str, Tensor]:
    return {"frames": torch.zeros([1]), "state": torch.zeros([1])}
  def plain(self: __torch__.pkg.Net) -> Tensor:
    return torch.zeros([1])
`

func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "m.yaml")
	for _, data := range []string{"first\n", "second\n"} {
		if err := WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(p); string(got) != data {
			t.Errorf("content %q, want %q", got, data)
		}
	}
	if err := WriteFile(filepath.Join(dir, "missing", "m.yaml"), []byte("x")); err == nil {
		t.Error("write into a missing folder succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestImportWithFakeEngine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fake.pt")
	if err := os.WriteFile(path, []byte("checkpoint bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &enginetest.Engine{Schemas: schemas}
	res, err := Import(e, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := validate.Bytes("fake.yaml", res.YAML)
	if len(diags) > 0 || len(f.Spec.Tasks) != 1 || f.Spec.Tasks[0].MethodName() != "forward" || e.Closed() != 1 {
		t.Fatalf("default method import: %v %+v closed %d modules", diags, f.Spec.Tasks, e.Closed())
	}
	if l := e.Loads(); len(l) != 1 || l[0].Path != path || l[0].Options.Device != "cpu" {
		t.Errorf("loads %+v, want %s on the cpu", l, path)
	}
	ck := f.Spec.Variants[0].Checkpoints[0]
	sum := sha256.Sum256([]byte("checkpoint bytes"))
	if ck.SizeBytes != 16 || ck.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("checkpoint facts %+v", ck)
	}
	if _, err := Import(e, path, Options{Methods: []string{"forward", "nope"}}); err == nil || !strings.Contains(err.Error(), "its methods: describe, encode_text, forward") {
		t.Errorf("unknown method: %v", err)
	}
	e.LoadErr = errors.New("not a TorchScript archive")
	if _, err := Import(e, path, Options{}); err == nil || !strings.Contains(err.Error(), "not a TorchScript archive") {
		t.Errorf("load error: %v", err)
	}
	if _, err := Import(nil, path, Options{}); !errors.Is(err, engine.ErrNoEngine) {
		t.Errorf("nil engine: %v", err)
	}
}
