package contract

import (
	"strings"
	"testing"
)

func TestParseType(t *testing.T) {
	t.Parallel()
	// Both printed forms libtorch 1.13 produces (checked against its
	// FunctionSchema printing and annotation_str) give the same type.
	cases := map[string]string{
		"Tensor":                       "Tensor",
		"int":                          "int",
		"Scalar":                       "number",
		"None":                         "NoneType",
		"__torch__.M":                  "__torch__.M",
		"int[]":                        "List[int]",
		"List[int]":                    "List[int]",
		"str?":                         "Optional[str]",
		"Optional[str]":                "Optional[str]",
		"Tensor[]?":                    "Optional[List[Tensor]]",
		"Optional[List[Tensor]]":       "Optional[List[Tensor]]",
		"Dict(str, Tensor)":            "Dict[str, Tensor]",
		"Dict[str, Tensor]":            "Dict[str, Tensor]",
		"Dict(str, float)?":            "Optional[Dict[str, float]]",
		"Union(int, str)":              "Union[int, str]",
		"Union[int, str]":              "Union[int, str]",
		"(Tensor, str[])":              "Tuple[Tensor, List[str]]",
		"Tuple[Tensor, List[str]]":     "Tuple[Tensor, List[str]]",
		"Tuple[()]":                    "Tuple[()]",
		"(())":                         "Tuple[Tuple[()]]",
		"Tuple[Tuple[()]]":             "Tuple[Tuple[()]]",
		"()":                           "Tuple[()]",
		"Tensor(a)":                    "Tensor",
		"Tensor(a!)[]":                 "List[Tensor]",
		" List[ Dict[str , int[]] ] ":  "List[Dict[str, List[int]]]",
		"int[][]":                      "List[List[int]]",
		"Dict[str, Tuple[int, float]]": "Dict[str, Tuple[int, float]]",
	}
	for in, want := range cases {
		got, err := ParseType(in)
		if err != nil {
			t.Errorf("ParseType(%q): %v", in, err)
			continue
		}
		if got.String() != want {
			t.Errorf("ParseType(%q) = %s, want %s", in, got, want)
		}
	}
	bad := map[string]string{
		"":               "missing type",
		"List":           "List takes 1 type argument(s), got 0",
		"List[]":         "List takes 1 type argument(s), got 0",
		"List[int, str]": "List takes 1 type argument(s), got 2",
		"Dict[str]":      "Dict takes 2",
		"Union[]":        "Union needs at least one",
		"int[str]":       "int takes no type arguments",
		"List[int":       "expected ',' or ']'",
		"int]":           `unexpected "]"`,
		"Tensor(a":       "unclosed alias annotation",
		"[int]":          `unexpected '['`,
		"int, str":       `unexpected ", str"`,
		"Dict(str, int]": "expected ',' or ')'",
		"List[3]":        `unexpected '3'`,
		strings.Repeat("List[", 100) + "int" + strings.Repeat("]", 100): "nested deeper than 64",
	}
	for in, want := range bad {
		if _, err := ParseType(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseType(%.40q) err = %v, want %q", in, err, want)
		}
	}
}

// FuzzParseType checks that ParseType never panics and that what it accepts
// prints to a form that parses back to the same type.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"Tensor", "int[]?", "Dict(str, Tensor)", "Tuple[()]", "(Tensor, str[])", "Union[int, str]", "Tensor(a!)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ty, err := ParseType(s)
		if err != nil {
			return
		}
		again, err := ParseType(ty.String())
		if err != nil {
			t.Fatalf("ParseType(%q) = %s, which does not parse: %v", s, ty, err)
		}
		if again.String() != ty.String() {
			t.Fatalf("ParseType(%q) = %s, round trip %s", s, ty, again)
		}
	})
}
