package breaking

import (
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/validate"
)

// family is a one-task manifest whose task has the given field lines and
// whose variant has the given call_kwargs line.
func family(t *testing.T, name, field, kwargs string) *ir.Family {
	t.Helper()
	src := `schema_version: 1
model_family_id: f
default_variant_id: v
default_task_id: t
variants:
  - variant_id: v
    ` + kwargs + `
tasks:
  - task_id: t
    inputs:
      - field_id: n
        kind: int
` + field + `
    outputs:
      - {artifact_id: out, kind: tensor, required: true}
`
	f, diags := validate.Bytes(name, []byte(src))
	if len(diags) > 0 {
		t.Fatalf("%s: %v\n%s", name, diags, src)
	}
	return f
}

func keys(changes []Change) string {
	var out []string
	for _, c := range changes {
		out = append(out, c.Key())
	}
	return strings.Join(out, " ")
}

func TestMultipleOfSets(t *testing.T) {
	for _, tc := range []struct {
		old, new, want string
	}{
		{"        multiple_of: 4\n        remainder: 1", "        multiple_of: 4\n        remainder: 1", ""},
		{"        multiple_of: 4\n        remainder: 1", "        multiple_of: 2\n        remainder: 1", "constraint-widened:f/t/n/multiple_of"},
		{"        multiple_of: 2\n        remainder: 1", "        multiple_of: 4\n        remainder: 1", "constraint-narrowed:f/t/n/multiple_of"},
		{"        multiple_of: 4\n        remainder: 1", "        multiple_of: 4\n        remainder: 3", "constraint-narrowed:f/t/n/multiple_of"},
		{"        multiple_of: 8", "        multiple_of: 4", "constraint-widened:f/t/n/multiple_of"},
		{"        multiple_of: 6", "        multiple_of: 4", "constraint-narrowed:f/t/n/multiple_of"},
		{"        multiple_of: 4", "", "constraint-widened:f/t/n/multiple_of"},
		{"", "        multiple_of: 1", ""},
		{"        minimum: 1", "        minimum: 1.0", ""},
		{"        maximum: 10", "        maximum: 10.5", "constraint-widened:f/t/n/maximum"},
	} {
		changes := CompareFamily(family(t, "old.yaml", tc.old, ""), family(t, "new.yaml", tc.new, ""))
		if got := keys(changes); got != tc.want {
			t.Errorf("%q → %q: %q, want %q", tc.old, tc.new, got, tc.want)
		}
	}
}

func TestKwargsKeepIntFloat(t *testing.T) {
	old := family(t, "old.yaml", "", "call_kwargs: {flow_shift: 3, mode: a}")
	for kw, want := range map[string]string{
		"call_kwargs: {flow_shift: 3, mode: a}":       "",
		"call_kwargs: {mode: a, flow_shift: 3}":       "",
		"call_kwargs: {flow_shift: 3.0, mode: a}":     "kwargs-changed:f/v/call_kwargs/flow_shift",
		"call_kwargs: {flow_shift: 3}":                "kwargs-changed:f/v/call_kwargs/mode",
		"call_kwargs: {flow_shift: 3, mode: [a]}":     "kwargs-changed:f/v/call_kwargs/mode",
		"call_kwargs: {flow_shift: 3, mode: a, x: 1}": "kwargs-changed:f/v/call_kwargs/x",
	} {
		if got := keys(CompareFamily(old, family(t, "new.yaml", "", kw))); got != want {
			t.Errorf("%s: %q, want %q", kw, got, want)
		}
	}
}

func TestRender(t *testing.T) {
	for v, want := range map[any]string{
		"a\"b": `"a\"b"`, int64(3): "3", 3.0: "3.0", 2.5: "2.5", 1e21: "1e+21", true: "true", nil: "null",
	} {
		if got := render(v); got != want {
			t.Errorf("render(%#v) = %s, want %s", v, got, want)
		}
	}
	if got := render(map[string]any{"b": []any{int64(1), "x"}, "a": 0.5}); got != `{"a": 0.5, "b": [1, "x"]}` {
		t.Errorf("render(map) = %s", got)
	}
}

// A video artifact's fps is its playback rate: changing it is behavioural.
func TestArtifactFPS(t *testing.T) {
	withFPS := func(name, fps string) *ir.Family {
		src := `schema_version: 1
model_family_id: f
default_variant_id: v
default_task_id: t
variants:
  - variant_id: v
tasks:
  - task_id: t
    outputs:
      - {artifact_id: clip, kind: video` + fps + `}
`
		f, diags := validate.Bytes(name, []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", name, diags)
		}
		return f
	}
	changes := CompareFamily(withFPS("old.yaml", ""), withFPS("new.yaml", ", fps: 8"))
	if len(changes) != 1 || changes[0].Rule != RuleFPSChanged || changes[0].Class != Behavioural ||
		changes[0].Message != `family "f" task "t" artifact "clip": fps changes from unset to 8 (the playback rate of written videos)` {
		t.Errorf("changes = %+v", changes)
	}
}

// An artifact's tuple position says which element of the returned tuple
// it is: changing it is breaking.
func TestArtifactPosition(t *testing.T) {
	withPositions := func(name, a, b string) *ir.Family {
		src := `schema_version: 1
model_family_id: f
default_variant_id: v
default_task_id: t
variants:
  - variant_id: v
tasks:
  - task_id: t
    outputs:
      - {artifact_id: hidden, kind: tensor` + a + `}
      - {artifact_id: pooled, kind: tensor` + b + `}
`
		f, diags := validate.Bytes(name, []byte(src))
		if len(diags) > 0 {
			t.Fatalf("%s: %v", name, diags)
		}
		return f
	}
	changes := CompareFamily(withPositions("old.yaml", ", position: 0", ", position: 1"), withPositions("new.yaml", ", position: 1", ", position: 0"))
	if len(changes) != 2 || changes[0].Rule != RulePositionChanged || changes[0].Class != Breaking ||
		changes[0].Message != `family "f" task "t" artifact "hidden": tuple position changes from 0 to 1; a checkpoint returning the same tuple gives it another element` {
		t.Errorf("changes = %+v", changes)
	}
}
