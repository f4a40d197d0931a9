//go:build cgo

package contract_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// The contract check against schemas read by the real libtorch engine from
// a TorchScript module, not hand-written ones.

const generatorSource = `
def forward(self, prompt: str, frames: Tensor, num_frames: int = 16, guidance: float = 7.5,
            seed: Optional[int] = None, negative: List[str] = ["blurry"], loop: bool = False,
            cond: Optional[List[Tensor]] = None, scales: List[float] = [1.0]) -> Dict[str, Tensor]:
    return {"video": frames * guidance}

def caption(self, frames: Tensor, max_len: int) -> str:
    return "a cat"

def stats(self, frames: Tensor) -> Tuple[Tensor, List[int]]:
    return frames, [1, 2]
`

func loadGenerator(t *testing.T) engine.Module {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gen.pt")
	if err := torch.DefineModule(generatorSource, nil, path); err != nil {
		t.Fatal(err)
	}
	m, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func callField(id string, kind spec.Kind, required bool, def any) spec.InferenceFieldSpec {
	return spec.InferenceFieldSpec{FieldID: id, Kind: kind, Target: spec.TargetCallKwargs, Required: required, Default: def}
}

func TestRealSchemasParse(t *testing.T) {
	t.Parallel()
	m := loadGenerator(t)
	for _, name := range m.Methods() {
		s, err := m.Schema(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range s.Arguments {
			if _, err := contract.ParseType(a.Type); err != nil {
				t.Errorf("%s argument %s: %v", name, a.Name, err)
			}
		}
		for _, r := range s.Returns {
			if _, err := contract.ParseType(r); err != nil {
				t.Errorf("%s return: %v", name, err)
			}
		}
	}
}

func TestCheckModuleWithLibtorch(t *testing.T) {
	t.Parallel()
	m := loadGenerator(t)
	good := &spec.InferenceTaskProfile{
		TaskID: "text-to-video",
		Inputs: []spec.InferenceFieldSpec{
			callField("prompt", spec.KindString, true, nil),
			callField("frames", spec.KindVideo, true, nil),
			callField("num_frames", spec.KindInt, false, int64(16)),
			callField("guidance", spec.KindFloat, false, 7.5),
			callField("seed", spec.KindInt, false, nil),
			callField("negative", spec.KindStringList, false, nil),
			callField("loop", spec.KindBool, false, nil),
			callField("cond", spec.KindTensorList, false, nil),
			callField("scales", spec.KindIntList, false, nil), // ints are converted for List[float]
		},
		Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "video", Kind: spec.ArtifactVideo, Required: true}},
	}
	if err := contract.CheckModule(good, nil, m); err != nil {
		t.Fatalf("matching task: %v", err)
	}

	caption := &spec.InferenceTaskProfile{
		TaskID: "caption", Method: "caption",
		Inputs: []spec.InferenceFieldSpec{
			callField("frames", spec.KindVideo, true, nil),
			callField("max_len", spec.KindFloat, false, nil),
		},
		Outputs: []spec.InferenceArtifactSpec{
			{ArtifactID: "text", Kind: spec.ArtifactText},
			{ArtifactID: "score", Kind: spec.ArtifactJSON},
		},
	}
	err := contract.CheckModule(caption, nil, m)
	var me *contract.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want a mismatch", err)
	}
	want := []contract.Problem{
		{Field: `field "max_len"`, Expected: "a default for argument max_len (the field is optional without a default, so a call may omit it)", Found: "max_len: int without a default"},
		{Field: `field "max_len"`, Expected: "argument max_len of type float (field kind float)", Found: "max_len: int"},
		{Field: "return", Expected: `Dict[str, ...] keyed by artifact_id for 2 artifacts ("text", "score")`, Found: "str (one value)"},
	}
	if !slices.Equal(me.Problems, want) {
		t.Errorf("problems:\n%v\nwant\n%v", me.Problems, want)
	}

	stats := &spec.InferenceTaskProfile{TaskID: "stats", Method: "stats",
		Inputs:  []spec.InferenceFieldSpec{callField("frames", spec.KindTensor, true, nil)},
		Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "s", Kind: spec.ArtifactTensor}}}
	if err := contract.CheckModule(stats, nil, m); !errors.Is(err, contract.ErrMismatch) {
		t.Errorf("tuple return for a tensor artifact: err = %v", err)
	}
	missing := &spec.InferenceTaskProfile{TaskID: "x", Method: "encode"}
	if err := contract.CheckModule(missing, nil, m); !errors.Is(err, contract.ErrMismatch) {
		t.Errorf("missing method: err = %v", err)
	}
}

// The conversions the contract accepts are the ones the engine performs:
// an int for a float (also inside lists), and not a float for an int.
func TestEngineConversionsMatchContract(t *testing.T) {
	t.Parallel()
	m := loadGenerator(t)
	frames := tensor.FromFloat32([]float32{1, 2}, 2)
	ok := map[string]any{"prompt": "p", "frames": frames, "guidance": int64(2), "scales": []any{int64(1), int64(2)}, "seed": int64(3)}
	if _, err := m.Call(t.Context(), "forward", ok, engine.CallOptions{}); err != nil {
		t.Fatalf("int for float: %v", err)
	}
	bad := map[string]any{"prompt": "p", "frames": frames, "num_frames": 4.0}
	if _, err := m.Call(t.Context(), "forward", bad, engine.CallOptions{}); err == nil {
		t.Fatal("the engine accepted a float for an int argument; the contract rejects it")
	}
	schema, err := m.Schema("forward")
	if err != nil {
		t.Fatal(err)
	}
	task := &spec.InferenceTaskProfile{TaskID: "t",
		Inputs: []spec.InferenceFieldSpec{
			callField("prompt", spec.KindString, true, nil), callField("frames", spec.KindTensor, true, nil)},
		DefaultCallKwargs: map[string]any{"num_frames": 4.0},
		Outputs:           []spec.InferenceArtifactSpec{{ArtifactID: "video", Kind: spec.ArtifactVideo}}}
	err = contract.Check(task, m.Methods(), schema)
	var me *contract.MismatchError
	if !errors.As(err, &me) || len(me.Problems) != 1 || me.Problems[0].Field != `default_call_kwargs "num_frames"` {
		t.Fatalf("contract on a float for an int: %v", err)
	}
}

const keysSource = `
def forward(self, x: Tensor, flag: bool = False) -> Dict[str, Tensor]:
    out = {"frames": x}
    if flag:
        out["mask"] = x * 2.0
    return out

def dynamic(self, x: Tensor, names: List[str]) -> Dict[str, Tensor]:
    out: Dict[str, Tensor] = {}
    for n in names:
        out[n] = x
    return out

def viahelper(self, x: Tensor) -> Dict[str, Tensor]:
    out = self.forward(x, True)
    out["extra"] = x
    return out
`

// The keys a method's dict can hold, read from a real archive's code: a
// literal plus an item given in a branch is complete; keys built from an
// argument or by another method are not; a key set at the top of the body
// before its one return is on every path.
func TestReadReturnsFromLibtorchArchive(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.pt")
	if err := torch.DefineModule(keysSource, nil, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got := contract.ReadReturns(f, st.Size())
	want := map[string]contract.MethodReturns{
		"forward":   {Keys: []contract.ReturnKey{{Name: "frames", Always: true}, {Name: "mask"}}, Complete: true},
		"viahelper": {Keys: []contract.ReturnKey{{Name: "extra", Always: true}}}, // set before its one return: every path holds it
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadReturns (-want +got):\n%s", diff)
	}

	m, err := torch.Default().Load(path, engine.LoadOptions{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	task := func(method string, required ...string) *spec.InferenceTaskProfile {
		tp := &spec.InferenceTaskProfile{TaskID: method, Method: method,
			Inputs: []spec.InferenceFieldSpec{callField("x", spec.KindTensor, true, nil)}}
		if method == "dynamic" {
			tp.Inputs = append(tp.Inputs, callField("names", spec.KindStringList, true, nil))
		}
		for _, id := range required {
			tp.Outputs = append(tp.Outputs, spec.InferenceArtifactSpec{ArtifactID: id, Kind: spec.ArtifactTensor, Required: true})
		}
		return tp
	}
	check := func(tp *spec.InferenceTaskProfile) error {
		schema, err := m.Schema(tp.MethodName())
		if err != nil {
			t.Fatal(err)
		}
		return contract.CheckLoaded(tp, nil, m.Methods(), schema, got)
	}
	for _, tp := range []*spec.InferenceTaskProfile{
		task("forward", "frames"), task("forward", "frames", "mask"), // mask may be returned
		task("dynamic", "anything"), task("viahelper", "frames"), // the code cannot tell
	} {
		if err := check(tp); err != nil {
			t.Errorf("%s %v: %v", tp.MethodName(), tp.Outputs, err)
		}
	}
	err = check(task("forward", "video", "frames"))
	var me *contract.MismatchError
	if !errors.As(err, &me) || len(me.Problems) != 1 {
		t.Fatalf("required video from forward: %v", err)
	}
	wantP := contract.Problem{Field: `artifact "video"`, Expected: `a key "video" in the dict forward returns (the artifact is required)`,
		Found: `only the keys "frames", "mask" (every key the method's TorchScript code can return)`}
	if me.Problems[0] != wantP {
		t.Errorf("problem %+v\nwant %+v", me.Problems[0], wantP)
	}
}
