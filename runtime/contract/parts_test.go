package contract

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// A tensor_dict field passes Dict[str, Tensor], a tensor_tuple field a
// Tuple of one Tensor per part: another arity or type is a mismatch that
// names both sides.
func TestCheckStructuredFields(t *testing.T) {
	parts := func(n int) []spec.ArtifactFieldSpec {
		out := make([]spec.ArtifactFieldSpec, n)
		for i := range out {
			out[i] = spec.ArtifactFieldSpec{Name: string(rune('a' + i)), Required: true}
		}
		return out
	}
	task := func(kind spec.Kind, n int) *spec.InferenceTaskProfile {
		return &spec.InferenceTaskProfile{TaskID: "forward", Inputs: []spec.InferenceFieldSpec{
			{FieldID: "x", Kind: kind, Target: spec.TargetCallKwargs, Required: true, Fields: parts(n)}},
			Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "y", Kind: spec.ArtifactTensor, Required: true}}}
	}
	schema := func(typ string) engine.MethodSchema {
		return engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{{Name: "x", Type: typ}}, Returns: []string{"Tensor"}}
	}
	for _, c := range []struct {
		kind spec.Kind
		n    int
		typ  string
		want string
	}{
		{spec.KindTensorDict, 2, "Dict[str, Tensor]", ""},
		{spec.KindTensorDict, 1, "Optional[Dict[str, Tensor]]", ""},
		{spec.KindTensorTuple, 2, "Tuple[Tensor, Tensor]", ""},
		{spec.KindTensorTuple, 3, "Tuple[Tensor, Tensor]", "Tuple[Tensor, Tensor, Tensor]"},
		{spec.KindTensorTuple, 2, "Dict[str, Tensor]", "Tuple[Tensor, Tensor]"},
		{spec.KindTensorDict, 2, "Tuple[Tensor, Tensor]", "Dict[str, Tensor]"},
		{spec.KindTensorList, 0, "Tuple[Tensor, Tensor]", "List[Tensor]"},
	} {
		tk := task(c.kind, c.n)
		if c.kind == spec.KindTensorList {
			tk.Inputs[0].Fields = nil
		}
		err := Check(tk, []string{"forward"}, schema(c.typ))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s/%d vs %s: %v", c.kind, c.n, c.typ, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.typ)):
			t.Errorf("%s/%d vs %s: %v, want a mismatch naming %s and %s", c.kind, c.n, c.typ, err, c.want, c.typ)
		}
	}
}

// The keys a method reads from a Dict[str, Tensor] argument, when literal
// reads are its only uses.
func TestArgumentKeys(t *testing.T) {
	for _, c := range []struct {
		method string
		want   string
	}{
		{"def forward(self: __torch__.M,\n    features: Dict[str, Tensor]) -> Tensor:\n    _0 = torch.add(features[\"a\"], features[\"b\"])\n    return features[\"a\"]\n", "features=a,b"},
		{"def forward(self: __torch__.M,\n    features: Dict[str, Tensor]) -> Tensor:\n    return self.head(features)\n", ""},
		{"def forward(self: __torch__.M,\n    features: Dict[str, Tensor], k: str) -> Tensor:\n    return features[k]\n", ""},
		{"def forward(self: __torch__.M,\n    x: Tensor) -> Tensor:\n    return x\n", ""},
	} {
		var got []string
		for name, keys := range argumentKeys(c.method) {
			got = append(got, name+"="+strings.Join(keys, ","))
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%q: %v, want %q", c.method, got, c.want)
		}
	}
}

// With the code at hand, a tensor_dict field declares every key the
// method reads from its argument.
func TestCheckArgumentKeys(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "forward", Inputs: []spec.InferenceFieldSpec{
		{FieldID: "features", Kind: spec.KindTensorDict, Target: spec.TargetCallKwargs, Required: true, Fields: []spec.ArtifactFieldSpec{{Name: "a", Required: true}, {Name: "b"}}}},
		Outputs: []spec.InferenceArtifactSpec{{ArtifactID: "y", Kind: spec.ArtifactTensor, Required: true}}}
	schema := engine.MethodSchema{Name: "forward", Arguments: []engine.Argument{{Name: "features", Type: "Dict[str, Tensor]"}}, Returns: []string{"Tensor"}}
	ok := map[string]MethodReturns{"forward": {ArgumentKeys: map[string][]string{"features": {"a", "b"}}}}
	if err := CheckLoaded(task, nil, []string{"forward"}, schema, ok); err != nil {
		t.Errorf("declared keys: %v", err)
	}
	bad := map[string]MethodReturns{"forward": {ArgumentKeys: map[string][]string{"features": {"a", "c"}}}}
	err := CheckLoaded(task, nil, []string{"forward"}, schema, bad)
	if err == nil || !strings.Contains(err.Error(), `a part named "c" (forward reads features["c"])`) || !strings.Contains(err.Error(), "parts a, b") {
		t.Errorf("undeclared key: %v", err)
	}
}
