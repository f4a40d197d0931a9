package enum

import (
	"errors"
	"testing"

	wfspec "github.com/worldfoundry/wfgen/runtime/spec"
)

type variant string

func TestVariantsParseIDsAliasesAndDefault(t *testing.T) {
	spec := &wfspec.ModelInferenceSpec{
		ModelFamilyID:    "fam",
		DefaultVariantID: "small", // an alias
		Variants: []wfspec.InferenceVariantSpec{
			{VariantID: "v1", Aliases: []string{"small"}},
			{VariantID: "v2"},
		},
	}
	s := Variants[variant](spec)
	for in, want := range map[string]variant{"": "v1", "small": "v1", "v1": "v1", "v2": "v2"} {
		if got, err := s.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := s.Parse("v3")
	if !errors.Is(err, wfspec.ErrUnknownID) || err.Error() != `unknown id: family "fam" has no variant "v3" (known: v1, v2)` {
		t.Errorf("Parse(v3) = %v", err)
	}
	if s.Valid("small") || !s.Valid("v2") {
		t.Error("an alias is not a value; an id is")
	}
	if _, err := s.MarshalText("nope"); err == nil {
		t.Error("MarshalText of an unknown value")
	}
	var v variant
	if err := s.UnmarshalText(&v, []byte("small")); err != nil || v != "v1" {
		t.Errorf("UnmarshalText = %q, %v", v, err)
	}
	if got := s.Values(); len(got) != 2 || got[0] != "v1" {
		t.Errorf("Values = %v", got)
	}
}

func TestChoicesAcceptExactlyTheValues(t *testing.T) {
	s := Choices[variant](&wfspec.InferenceFieldSpec{FieldID: "mode", Choices: []string{"a", "b"}})
	var v variant
	if err := s.UnmarshalText(&v, []byte("")); err == nil || err.Error() != `mode: "" is not one of "a", "b"` {
		t.Errorf(`UnmarshalText("") = %v`, err)
	}
	if err := s.UnmarshalText(&v, []byte("b")); err != nil || v != "b" {
		t.Errorf("UnmarshalText(b) = %q, %v", v, err)
	}
}
