package contract

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

func field(id string, kind spec.Kind, required bool) spec.InferenceFieldSpec {
	return spec.InferenceFieldSpec{FieldID: id, Kind: kind, Target: spec.TargetCallKwargs, Required: required}
}

func withDefault(f spec.InferenceFieldSpec, v any) spec.InferenceFieldSpec {
	f.Default = v
	return f
}

func artifact(id string, kind spec.ArtifactKind) spec.InferenceArtifactSpec {
	return spec.InferenceArtifactSpec{ArtifactID: id, Kind: kind, Required: true}
}

// positioned is a required artifact at tuple position pos.
func positioned(id string, kind spec.ArtifactKind, pos int) spec.InferenceArtifactSpec {
	a := artifact(id, kind)
	a.Position = &pos
	return a
}

func arg(name, typ string) engine.Argument { return engine.Argument{Name: name, Type: typ} }

func argDefault(name, typ string) engine.Argument {
	return engine.Argument{Name: name, Type: typ, HasDefault: true}
}

// embedTask is a typical embedding task: a required image, an optional
// normalise flag with a default, one embedding artifact.
func embedTask() *spec.InferenceTaskProfile {
	return &spec.InferenceTaskProfile{
		TaskID: "embed", Method: "encode",
		Inputs: []spec.InferenceFieldSpec{
			field("image", spec.KindImage, true),
			withDefault(field("normalize", spec.KindBool, false), true),
		},
		Outputs: []spec.InferenceArtifactSpec{artifact("embedding", spec.ArtifactEmbedding)},
	}
}

// videoTask is a generation task with many field kinds and two artifacts.
func videoTask() *spec.InferenceTaskProfile {
	return &spec.InferenceTaskProfile{
		TaskID: "text-to-video",
		Inputs: []spec.InferenceFieldSpec{
			field("prompt", spec.KindString, true),
			{FieldID: "sampler", Kind: spec.KindString, Target: spec.TargetCallKwargs, Choices: []string{"euler", "dpm"}, Default: "euler"},
			withDefault(field("num_frames", spec.KindInt, false), 16),
			withDefault(field("guidance", spec.KindFloat, false), 7.5),
			field("seed", spec.KindInt, false),
			field("negative", spec.KindStringList, false),
			field("cond_frames", spec.KindTensorList, false),
			{FieldID: "dtype", Kind: spec.KindString, Target: spec.TargetLoadKwargs},
		},
		Outputs: []spec.InferenceArtifactSpec{artifact("video", spec.ArtifactVideo), artifact("caption", spec.ArtifactText)},
	}
}

func videoSchema() engine.MethodSchema {
	return engine.MethodSchema{
		Name: "forward",
		Arguments: []engine.Argument{
			arg("prompt", "str"),
			argDefault("sampler", "str"),
			argDefault("num_frames", "int"),
			argDefault("guidance", "float"),
			argDefault("seed", "Optional[int]"),
			argDefault("negative", "List[str]"),
			argDefault("cond_frames", "Tensor[]?"),
		},
		Returns: []string{"Dict[str, Union[Tensor, str]]"},
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	type tc struct {
		name    string
		task    *spec.InferenceTaskProfile
		methods []string
		schema  engine.MethodSchema
		want    []Problem // nil: no mismatch
	}
	cases := []tc{
		{
			name: "embed matches", task: embedTask(), methods: []string{"encode", "forward"},
			schema: engine.MethodSchema{Name: "encode", Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"Tensor"}},
		},
		{
			name: "video matches (annotation form)", task: videoTask(), methods: []string{"forward"}, schema: videoSchema(),
		},
		{
			name: "video matches (schema form)", task: videoTask(), methods: []string{"forward"},
			schema: func() engine.MethodSchema {
				s := videoSchema()
				s.Arguments[4].Type = "int?"
				s.Arguments[5].Type = "str[]"
				s.Returns = []string{"Dict(str, Union(Tensor, str))"}
				return s
			}(),
		},
		{
			name: "missing method", task: embedTask(), methods: []string{"forward", "decode"},
			schema: engine.MethodSchema{},
			want:   []Problem{{"method", `a method named "encode"`, "methods forward, decode"}},
		},
		{
			name: "module without methods", task: embedTask(), methods: nil,
			want: []Problem{{"method", `a method named "encode"`, "no methods"}},
		},
		{
			name: "schema of another method", task: embedTask(), methods: []string{"encode", "forward"},
			schema: engine.MethodSchema{Name: "forward", Returns: []string{"Tensor"}},
			want:   []Problem{{"method", "the schema of encode", "the schema of forward"}},
		},
		{
			name: "every problem listed", task: videoTask(), methods: []string{"forward"},
			schema: engine.MethodSchema{
				Name: "forward",
				Arguments: []engine.Argument{
					arg("prompt", "Tensor"),           // wrong type
					argDefault("sampler", "int"),      // choices are str
					argDefault("num_frames", "float"), // int field, float argument: converted
					argDefault("guidance", "int"),     // float field, int argument
					arg("seed", "int"),                // optional field, argument without default
					argDefault("negative", "List[int]"),
					// cond_frames missing
					arg("strength", "float"), // no field
					arg("dtype", "str"),      // a load_kwargs field
				},
				Returns: []string{"Dict[str, Tensor]"},
			},
			want: []Problem{
				{`field "prompt"`, "argument prompt of type str (field kind string)", "prompt: Tensor"},
				{`field "sampler"`, "argument sampler of type str (field kind string)", "sampler: int"},
				{`field "guidance"`, "argument guidance of type float (field kind float)", "guidance: int"},
				{`field "seed"`, "a default for argument seed (the field is optional without a default, so a call may omit it)", "seed: int without a default"},
				{`field "negative"`, "argument negative of type List[str] (field kind string_list)", "negative: List[int]"},
				{`field "cond_frames"`, "an argument cond_frames: List[Tensor] of forward", "no such argument (arguments: prompt: Tensor, sampler: int, num_frames: float, guidance: int, seed: int, negative: List[int], strength: float, dtype: str)"},
				{`argument "strength"`, `a call_kwargs field "strength" (the argument has no default)`, "no field"},
				{`argument "dtype"`, `a call_kwargs field "dtype" (the argument has no default)`, `field "dtype" with target load_kwargs`},
				{`artifact "caption"`, "dict values for artifact kind text (str)", "values of type Tensor (return Dict[str, Tensor])"},
			},
		},
		{
			name: "Optional and Any arguments accept fields", task: videoTask(), methods: []string{"forward"},
			schema: engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{
				arg("prompt", "Any"), argDefault("sampler", "Optional[str]"), argDefault("num_frames", "Scalar"),
				argDefault("guidance", "number"), argDefault("seed", "Union[int, NoneType]"),
				argDefault("negative", "Optional[List[Optional[str]]]"), argDefault("cond_frames", "List[Tensor]"),
			}, Returns: []string{"Dict[str, Any]"}},
		},
		{
			name: "engine conversions: int to float, str to Device", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{
				field("steps", spec.KindInt, true), field("where", spec.KindString, true), field("scales", spec.KindIntList, true),
			}, Outputs: []spec.InferenceArtifactSpec{artifact("y", spec.ArtifactTensor)}},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("steps", "float"), arg("where", "Device"), arg("scales", "float[]")}, Returns: []string{"Tensor"}},
		},
		{
			name: "kinds to list types", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "lists", Inputs: []spec.InferenceFieldSpec{
				field("a", spec.KindIntList, true), field("b", spec.KindFloatList, true), field("c", spec.KindBoolList, true),
				field("d", spec.KindVideo, true), field("e", spec.KindTensor, true),
			}, Outputs: []spec.InferenceArtifactSpec{artifact("out", spec.ArtifactTensor)}},
			schema: engine.MethodSchema{Arguments: []engine.Argument{
				arg("a", "int[]"), arg("b", "List[int]"), arg("c", "bool[]"), arg("d", "Tensor"), arg("e", "List[Tensor]"),
			}, Returns: []string{"Tensor"}},
			want: []Problem{
				{`field "b"`, "argument b of type List[float] (field kind float_list)", "b: List[int]"},
				{`field "e"`, "argument e of type Tensor (field kind tensor)", "e: List[Tensor]"},
			},
		},
		{
			name: "default_call_kwargs supply arguments and are checked", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t",
				Inputs: []spec.InferenceFieldSpec{field("x", spec.KindTensor, true), field("steps", spec.KindInt, false)},
				DefaultCallKwargs: map[string]any{"steps": int64(4), "mode": "fast", "scale": 2.0, "ids": []any{int64(1), 2.0}, "eta": int64(1),
					"bogus": true, "opt": nil, "dev": "cpu", "num": true},
				Outputs: []spec.InferenceArtifactSpec{artifact("y", spec.ArtifactTensor)}},
			schema: engine.MethodSchema{Arguments: []engine.Argument{
				arg("x", "Tensor"), arg("steps", "int"), arg("mode", "str"), arg("scale", "int"), arg("ids", "List[int]"),
				arg("eta", "float"), argDefault("opt", "str"), arg("dev", "Device"), arg("num", "Scalar"),
			}, Returns: []string{"Tensor"}},
			want: []Problem{
				{`default_call_kwargs "bogus"`, "an argument of forward", "no such argument (arguments: x: Tensor, steps: int, mode: str, scale: int, ids: List[int], eta: float, opt: str, dev: Device, num: Scalar)"},
				{`default_call_kwargs "ids"`, "a value for argument ids: List[int]", "a list [1 2]"},
				{`default_call_kwargs "opt"`, "a value for argument opt: str", "None"},
				{`default_call_kwargs "scale"`, "a value for argument scale: int", "float 2 (write an integer literal for an int argument)"},
			},
		},
		{
			name: "non-integral float for an int argument", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", DefaultCallKwargs: map[string]any{"n": 2.5, "m": []any{"a", 3.0}},
				Outputs: []spec.InferenceArtifactSpec{artifact("y", spec.ArtifactJSON)}},
			schema: engine.MethodSchema{Arguments: []engine.Argument{argDefault("n", "int"), argDefault("m", "List[str]")}, Returns: []string{"Dict[str, List[int]]"}},
			want: []Problem{
				{`default_call_kwargs "m"`, "a value for argument m: List[str]", "a list [a 3]"},
				{`default_call_kwargs "n"`, "a value for argument n: int", "float 2.5"},
			},
		},
		{
			name: "single value with several artifacts", task: videoTask(), methods: []string{"forward"},
			schema: func() engine.MethodSchema { s := videoSchema(); s.Returns = []string{"Tensor"}; return s }(),
			want:   []Problem{{"return", `Dict[str, ...] keyed by artifact_id for 2 artifacts ("video", "caption")`, "Tensor (one value)"}},
		},
		{
			name: "single value of the wrong kind", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"str"}},
			want:   []Problem{{`artifact "embedding"`, "a return type for artifact kind embedding (Tensor, floating [D] or [N,D])", "str"}},
		},
		{
			name: "tuple return for one artifact", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"(Tensor, Tensor)"}},
			want:   []Problem{{"return", `a Tuple of 1, one element per artifact in order, for 1 artifact ("embedding") (or positions on the artifacts)`, "Tuple[Tensor, Tensor], a Tuple of 2"}},
		},
		{
			name: "several returns are a tuple", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"Tensor", "Tensor"}},
			want:   []Problem{{"return", `a Tuple of 1, one element per artifact in order, for 1 artifact ("embedding") (or positions on the artifacts)`, "Tuple[Tensor, Tensor], a Tuple of 2"}},
		},
		{
			name: "tuple elements are artifacts in order", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("hidden", spec.ArtifactTensor), artifact("flows", spec.ArtifactTensorList), artifact("label", spec.ArtifactText)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, List[Tensor], Optional[str]]"}},
		},
		{
			name: "tuple positions", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				positioned("pooled", spec.ArtifactEmbedding, 1), positioned("hidden", spec.ArtifactTensor, 0)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, Tensor, int]"}},
		},
		{
			name: "tuple positions that do not fit", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				positioned("count", spec.ArtifactTensor, 2), positioned("boxes", spec.ArtifactTensorList, 0), positioned("extra", spec.ArtifactTensor, 3)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[List[Tensor], Tensor, int]"}},
			want: []Problem{
				{`artifact "count"`, "tuple element 2 of a type for artifact kind tensor (Tensor)", "int (return Tuple[List[Tensor], Tensor, int])"},
				{`artifact "extra"`, "element 3 of the tuple forward returns", "Tuple[List[Tensor], Tensor, int], a Tuple of 3"},
			},
		},
		{
			name: "a nested tuple's elements are artifacts", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("hidden", spec.ArtifactTensor), artifact("pooled", spec.ArtifactTensor), artifact("attention", spec.ArtifactTensor), artifact("size", spec.ArtifactJSON)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, Tuple[Tensor, Optional[Tensor]], Tuple[int, int]]"}},
		},
		{
			name: "positions are the outer tuple's elements", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				positioned("logits", spec.ArtifactTensor, 2), positioned("hidden", spec.ArtifactTensor, 0), positioned("cache", spec.ArtifactTensor, 1)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, Optional[Tuple[Tensor, Tensor]], Tensor]"}},
			want: []Problem{
				{`artifact "cache"`, "tuple element 1 of a type for artifact kind tensor (Tensor)", "Optional[Tuple[Tensor, Tensor]] (return Tuple[Tensor, Optional[Tuple[Tensor, Tensor]], Tensor])"},
			},
		},
		{
			name: "a nested tuple's elements in order, one too few", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("hidden", spec.ArtifactTensor), artifact("key", spec.ArtifactTensor)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, Optional[Tuple[Tensor, Tensor]]]"}},
			want: []Problem{
				{"return", `a Tuple of 2, one element per artifact in order, for 2 artifacts ("hidden", "key") (or positions on the artifacts)`, "Tuple[Tensor, Optional[Tuple[Tensor, Tensor]]], 3 elements with its nested tuples'"},
			},
		},
		{
			name: "positions without a tuple", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{positioned("y", spec.ArtifactTensor, 0)}},
			schema: engine.MethodSchema{Returns: []string{"Tensor"}},
			want:   []Problem{{"return", `a Tuple whose elements are 1 artifact ("y") (the artifacts give tuple positions)`, "Tensor"}},
		},
		{
			name: "a list of tensors", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("flows", spec.ArtifactTensorList)}},
			schema: engine.MethodSchema{Returns: []string{"List[Tensor]"}},
		},
		{
			name: "a list of tensors is no tensor, and a tensor no list", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("flows", spec.ArtifactTensor), artifact("masks", spec.ArtifactTensorList)}},
			schema: engine.MethodSchema{Returns: []string{"Dict[str, List[Tensor]]"}},
			want:   []Problem{{`artifact "flows"`, "dict values for artifact kind tensor (Tensor)", "values of type List[Tensor] (return Dict[str, List[Tensor]])"}},
		},
		{
			name: "a detector's tuple: a record, then a record_list", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("losses", spec.ArtifactRecord), artifact("detections", spec.ArtifactRecordList)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]"}},
		},
		{
			name: "a record is one dict, a record_list a list of them", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				positioned("detections", spec.ArtifactRecord, 1), positioned("losses", spec.ArtifactRecordList, 0)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]"}},
			want: []Problem{
				{`artifact "detections"`, "tuple element 1 of a type for artifact kind record (Dict[str, Tensor] with the fields' keys)", "List[Dict[str, Tensor]] (return Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]])"},
				{`artifact "losses"`, "tuple element 0 of a type for artifact kind record_list (List[Dict[str, Tensor]], each dict with the fields' keys)", "Dict[str, Tensor] (return Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]])"},
			},
		},
		{
			name: "a record's dict holds tensors only", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("a", spec.ArtifactTensor), artifact("b", spec.ArtifactRecordList)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[Tensor, List[Dict[str, List[Tensor]]]]"}},
			want: []Problem{{`artifact "b"`, "tuple element 1 of a type for artifact kind record_list (List[Dict[str, Tensor]], each dict with the fields' keys)",
				"List[Dict[str, List[Tensor]]] (return Tuple[Tensor, List[Dict[str, List[Tensor]]]])"}},
		},
		{
			name: "records keyed by artifact id", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{
				artifact("heads", spec.ArtifactRecord), artifact("aux", spec.ArtifactRecord)}},
			schema: engine.MethodSchema{Returns: []string{"Dict[str, Dict[str, Tensor]]"}},
		},
		{
			name: "a task's only record is the dict the method returns", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("heads", spec.ArtifactRecord)}},
			schema: engine.MethodSchema{Returns: []string{"Dict[str, Tensor]"}},
		},
		{
			name: "a record is no tensor", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("heads", spec.ArtifactRecord)}},
			schema: engine.MethodSchema{Returns: []string{"Tensor"}},
			want:   []Problem{{`artifact "heads"`, "a return type for artifact kind record (Dict[str, Tensor] with the fields' keys)", "Tensor"}},
		},
		{
			name: "a tuple of plain data is one json artifact", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("meta", spec.ArtifactJSON)}},
			schema: engine.MethodSchema{Returns: []string{"Tuple[int, str]"}},
		},
		{
			name: "json artifacts from dict, list and str", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("meta", spec.ArtifactJSON)}},
			schema: engine.MethodSchema{Returns: []string{"Dict(str, Tuple[int, float, str?, bool])"}},
		},
		{
			name: "json artifact cannot hold a tensor", methods: []string{"forward"},
			task:   &spec.InferenceTaskProfile{TaskID: "t", Outputs: []spec.InferenceArtifactSpec{artifact("meta", spec.ArtifactJSON)}},
			schema: engine.MethodSchema{Returns: []string{"Dict[str, List[Tensor]]"}},
			want: []Problem{{`artifact "meta"`, "dict values for artifact kind json (str holding JSON, or a dict, list or scalar without tensors)",
				"values of type List[Tensor] (return Dict[str, List[Tensor]])"}},
		},
		{
			name: "dict with non-str keys", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"Dict[int, Tensor]"}},
			want:   []Problem{{"return", "Dict[str, ...] keyed by artifact_id", "Dict[int, Tensor]"}},
		},
		{
			name: "optional dict return", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"Dict(str, Tensor)?"}},
		},
		{
			name: "None return with artifacts", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"NoneType"}},
			want:   []Problem{{"return", `a value for 1 artifact ("embedding")`, "NoneType (the method returns nothing)"}},
		},
		{
			name: "no returns listed, no artifacts", methods: []string{"reset"},
			task:   &spec.InferenceTaskProfile{TaskID: "reset", Method: "reset"},
			schema: engine.MethodSchema{Name: "reset"},
		},
		{
			name: "unparseable types", task: embedTask(), methods: []string{"encode"},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("image", "Tensor["), argDefault("normalize", "bool")}, Returns: []string{"Dict[str"}},
			want: []Problem{
				{`argument "image"`, "a TorchScript type", `type "Tensor[": missing type at offset 7`},
				{"return", "a TorchScript type", `type "Dict[str": expected ',' or ']' at offset 8`},
			},
		},
		{
			name: "unknown field kind", methods: []string{"forward"},
			task: &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{field("x", "matrix", true)},
				Outputs: []spec.InferenceArtifactSpec{artifact("y", spec.ArtifactTensor)}},
			schema: engine.MethodSchema{Arguments: []engine.Argument{arg("x", "Tensor")}, Returns: []string{"Tensor"}},
			want:   []Problem{{`field "x"`, "a field kind (" + spec.FieldKindList() + ")", `kind "matrix"`}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.task, c.methods, c.schema)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected mismatch: %v", err)
				}
				return
			}
			var me *MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *MismatchError", err)
			}
			if !errors.Is(err, ErrMismatch) {
				t.Error("errors.Is(err, ErrMismatch) is false")
			}
			if !slices.Equal(me.Problems, c.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", list(me.Problems), list(c.want))
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprintf("task %q", c.task.TaskID)) {
				t.Errorf("message does not name the task: %s", msg)
			}
			for _, p := range c.want {
				if !strings.Contains(msg, p.String()) {
					t.Errorf("message does not list %q:\n%s", p, msg)
				}
			}
		})
	}
}

func list(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\t%#v\n", p)
	}
	return b.String()
}

func TestCheckVariantCallKwargs(t *testing.T) {
	t.Parallel()
	task := &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{field("x", spec.KindTensor, true)},
		Outputs: []spec.InferenceArtifactSpec{artifact("y", spec.ArtifactTensor)}}
	schema := engine.MethodSchema{Arguments: []engine.Argument{arg("x", "Tensor"), arg("size", "str")}, Returns: []string{"Tensor"}}
	// Without the variant, "size" is never supplied.
	err := Check(task, []string{"forward"}, schema)
	if err == nil || !strings.Contains(err.Error(), `argument "size": expected a call_kwargs field "size"`) {
		t.Fatalf("Check err = %v", err)
	}
	v := &spec.InferenceVariantSpec{VariantID: "large", CallKwargs: map[string]any{"size": "large"}}
	if err := CheckVariant(task, v, []string{"forward"}, schema); err != nil {
		t.Fatalf("CheckVariant: %v", err)
	}
	v.CallKwargs = map[string]any{"size": 3.0, "extra": 1}
	err = CheckVariant(task, v, []string{"forward"}, schema)
	var me *MismatchError
	if !errors.As(err, &me) || len(me.Problems) != 2 ||
		me.Problems[0].Field != `call_kwargs "extra"` || me.Problems[1] != (Problem{`call_kwargs "size"`, "a value for argument size: str", "float 3"}) {
		t.Fatalf("CheckVariant err = %v", err)
	}
}

func TestCheckModule(t *testing.T) {
	t.Parallel()
	good := engine.MethodSchema{Name: "encode", Arguments: []engine.Argument{arg("image", "Tensor"), argDefault("normalize", "bool")}, Returns: []string{"Tensor"}}
	mod := enginetest.NewModule(good, engine.MethodSchema{Name: "forward"})
	if err := CheckModule(embedTask(), nil, mod); err != nil {
		t.Fatalf("CheckModule: %v", err)
	}
	mod = enginetest.NewModule(engine.MethodSchema{Name: "forward"})
	if err := CheckModule(embedTask(), nil, mod); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), `method: expected a method named "encode", found methods forward`) {
		t.Fatalf("missing method: err = %v", err)
	}
	mod = enginetest.NewModule(good)
	mod.Engine().SchemaErr = engine.ErrClosed
	if err := CheckModule(embedTask(), nil, mod); !errors.Is(err, engine.ErrClosed) || errors.Is(err, ErrMismatch) {
		t.Fatalf("schema error: err = %v", err)
	}
	if err := CheckModule(nil, nil, mod); err == nil {
		t.Fatal("nil task accepted")
	}
	if err := Check(nil, nil, engine.MethodSchema{}); err == nil {
		t.Fatal("nil task accepted")
	}
}
