package params

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

func num(s string) *spec.Number { n := spec.Number(s); return &n }
func i64(n int64) *int64        { return &n }
func intp(n int) *int           { return &n }

func compile(t *testing.T, f spec.InferenceFieldSpec) *Field {
	t.Helper()
	c, err := CompileField(&f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func messages(vs []*Violation) []string {
	var out []string
	for _, v := range vs {
		m := v.Error()
		if v.Hint != "" {
			m += " (" + v.Hint + ")"
		}
		out = append(out, m)
	}
	return out
}

// Integer rules are exact at the ends of int64 and beyond 2^53.
func TestIntRulesAreExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    spec.InferenceFieldSpec
		v    int64
		want []string
	}{
		{"min 2^53+1 holds 2^53+1", spec.InferenceFieldSpec{Minimum: num("9007199254740993")}, 9007199254740993, nil},
		{"min 2^53+1 rejects 2^53", spec.InferenceFieldSpec{Minimum: num("9007199254740993")}, 9007199254740992,
			[]string{"n: must be at least 9007199254740993, got 9007199254740992"}},
		{"max 2^53 rejects 2^53+1", spec.InferenceFieldSpec{Maximum: num("9007199254740992")}, 9007199254740993,
			[]string{"n: must be at most 9007199254740992, got 9007199254740993"}},
		{"MinInt64 is 3k+1", spec.InferenceFieldSpec{MultipleOf: i64(3), Remainder: 1}, math.MinInt64, nil},
		{"MaxInt64 is 3k+1", spec.InferenceFieldSpec{MultipleOf: i64(3), Remainder: 1}, math.MaxInt64, nil},
		{"MinInt64+1 nearest", spec.InferenceFieldSpec{MultipleOf: i64(3), Remainder: 1}, math.MinInt64 + 1,
			[]string{"n: must be 3k+1 (a multiple of 3 plus 1), got -9223372036854775807 (nearest valid: -9223372036854775808 or -9223372036854775805)"}},
		{"MaxInt64-1 nearest", spec.InferenceFieldSpec{MultipleOf: i64(3), Remainder: 1}, math.MaxInt64 - 1,
			[]string{"n: must be 3k+1 (a multiple of 3 plus 1), got 9223372036854775806 (nearest valid: 9223372036854775804 or 9223372036854775807)"}},
		{"MaxInt64 nearest has no value above", spec.InferenceFieldSpec{MultipleOf: i64(4)}, math.MaxInt64,
			[]string{"n: must be a multiple of 4, got 9223372036854775807 (nearest valid: 9223372036854775804)"}},
		{"MinInt64 nearest has no value below", spec.InferenceFieldSpec{MultipleOf: i64(4), Remainder: 3}, math.MinInt64,
			[]string{"n: must be 4k+3 (a multiple of 4 plus 3), got -9223372036854775808 (nearest valid: -9223372036854775805)"}},
		{"MinInt64 multiple of 2", spec.InferenceFieldSpec{MultipleOf: i64(2)}, math.MinInt64, nil},
		{"bound beyond int64 holds everything", spec.InferenceFieldSpec{Maximum: num("1e30"), Minimum: num("-1e30")}, math.MinInt64, nil},
		{"bound beyond int64 holds nothing", spec.InferenceFieldSpec{Minimum: num("1e30")}, math.MaxInt64,
			[]string{"n: must be at least 1e30, got 9223372036854775807"}},
		{"fractional minimum rounds up", spec.InferenceFieldSpec{Minimum: num("1.5")}, 1,
			[]string{"n: must be at least 1.5, got 1"}},
		{"fractional minimum holds 2", spec.InferenceFieldSpec{Minimum: num("1.5")}, 2, nil},
		{"nearest keeps within bounds", spec.InferenceFieldSpec{MultipleOf: i64(16), Minimum: num("16")}, 8,
			[]string{"n: must be at least 16, got 8", "n: must be a multiple of 16, got 8 (nearest valid: 16)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.FieldID, tc.f.Kind = "n", spec.KindInt
			_, vs := compile(t, tc.f).CheckValue(tc.v)
			if d := cmp.Diff(tc.want, messages(vs)); d != "" {
				t.Errorf("violations (-want +got):\n%s", d)
			}
		})
	}
}

// CheckValue takes the manifest's value forms and returns the kind's Go form.
func TestCheckValueNormalises(t *testing.T) {
	ints := compile(t, spec.InferenceFieldSpec{FieldID: "s", Kind: spec.KindIntList, MaxLength: intp(2)})
	v, vs := ints.CheckValue([]any{int64(1), float64(2)})
	if len(vs) != 0 || !cmp.Equal(v, []int64{1, 2}) {
		t.Errorf("CheckValue = %#v, %v", v, messages(vs))
	}
	_, vs = ints.CheckValue([]any{int64(1), "x", int64(3)})
	want := []string{"s: must have at most 2 items, has 3", `s[1]: is the string "x", but the field's kind is a list of ints`}
	if d := cmp.Diff(want, messages(vs)); d != "" {
		t.Errorf("violations (-want +got):\n%s", d)
	}
	f := compile(t, spec.InferenceFieldSpec{FieldID: "f", Kind: spec.KindFloat})
	if v, vs := f.CheckValue(int64(3)); len(vs) != 0 || v != 3.0 {
		t.Errorf("an integer default of a float field = %#v, %v", v, vs)
	}
	img := compile(t, spec.InferenceFieldSpec{FieldID: "i", Kind: spec.KindImage})
	if _, vs := img.CheckValue("x.png"); len(vs) != 1 {
		t.Errorf("a tensor-like field took a value: %v", vs)
	}
}

// Check applies presence: required strings, tensors and lists must be
// set; optional ones may be nil; defaulted lists are checked when nil.
func TestCheckPresence(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{
		{FieldID: "prompt", Kind: spec.KindString, Required: true},
		{FieldID: "image", Kind: spec.KindImage, Required: true},
		{FieldID: "tags", Kind: spec.KindStringList, MinLength: intp(1), Default: []string{"a"}},
		{FieldID: "sizes", Kind: spec.KindIntList, MinLength: intp(1)},
		{FieldID: "frames", Kind: spec.KindTensorList},
		{FieldID: "style", Kind: spec.KindString, Choices: []string{"a", "b"}},
	}}
	r := MustCompile(task)
	c := r.Check()
	String(&c, 0, "")
	Tensor(&c, 1, nil)
	Strings[string](&c, 2, nil)
	Ints(&c, 3, nil)
	Tensors(&c, 4, []*tensor.Tensor{nil, {DType: tensor.Float32, Shape: []int64{2}, Data: make([]byte, 3)}})
	OptString[string](&c, 5, nil)
	want := []string{
		"prompt: is required",
		"image: is required",
		"tags: must have at least 1 item, has 0",
		"frames[0]: is nil",
		"frames[1]: tensor: float32[2] needs 8 bytes, has 3",
	}
	err := c.Err()
	if err == nil {
		t.Fatal("no violations")
	}
	if d := cmp.Diff(want, strings.Split(err.Error(), "\n")); d != "" {
		t.Errorf("violations (-want +got):\n%s", d)
	}
	c = r.Check()
	String(&c, 0, "x")
	Tensor(&c, 1, tensor.FromFloat32([]float32{1}, 1))
	Strings(&c, 2, []string{"a"})
	style := "c"
	OptString(&c, 5, &style)
	if err := c.Err(); err == nil || err.Error() != `style: must be one of "a", "b", got "c"` {
		t.Errorf("Err() = %v", err)
	}
}

// A long choice list is cut short in messages.
func TestChoiceMessageIsBounded(t *testing.T) {
	choices := make([]string, 20000)
	for i := range choices {
		choices[i] = "c" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26%5)
	}
	f := compile(t, spec.InferenceFieldSpec{FieldID: "c", Kind: spec.KindString, Choices: choices})
	_, vs := f.CheckValue("nope")
	if len(vs) != 1 || len(vs[0].Message) > 400 || !strings.Contains(vs[0].Message, "(20000 in all)") {
		t.Errorf("message %q", messages(vs))
	}
}

// DecodeJSON names fields by id and never a Go type.
func TestDecodeJSONErrors(t *testing.T) {
	task := &spec.InferenceTaskProfile{TaskID: "t", Inputs: []spec.InferenceFieldSpec{
		{FieldID: "count", Kind: spec.KindInt, Required: true},
		{FieldID: "name", Kind: spec.KindString, Default: "x"},
	}}
	r := MustCompile(task)
	type plain struct {
		Count int64  `json:"count"`
		Name  string `json:"name"`
	}
	for in, want := range map[string]string{
		`{"count": "three"}`:          "count: cannot unmarshal string into an integer",
		`[1]`:                         "cannot unmarshal array into params (want a JSON object keyed by field id)",
		`{"name": "y"}`:               "missing required field(s) count",
		`{"count": 1, "colour": 2}`:   `json: unknown field "colour"`,
		`{"count": 1} {"count": 2}`:   "unexpected data after the params object",
		`{"count": 1, "name": false}`: "name: cannot unmarshal bool into a string",
	} {
		q := plain{Name: "x"}
		err := r.DecodeJSON([]byte(in), &q)
		if err == nil || err.Error() != want || strings.Contains(err.Error(), "plain") {
			t.Errorf("DecodeJSON(%s) = %v, want %q", in, err, want)
		}
	}
	q := plain{Name: "x"}
	if err := r.DecodeJSON([]byte(`{"count": 3}`), &q); err != nil || q != (plain{3, "x"}) {
		t.Errorf("DecodeJSON = %v, %+v", err, q)
	}
}
