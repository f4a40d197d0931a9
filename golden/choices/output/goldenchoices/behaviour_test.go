package goldenchoices

// Hand-written tests of the generated package (wfgen leaves files without
// its header alone, so they survive regeneration).

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/worldfoundry/wfgen/runtime/client"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

func TestParseVariantAcceptsIDsAndAliases(t *testing.T) {
	for in, want := range map[string]Variant{
		"small": VariantSmall, "s": VariantSmall, "tiny": VariantSmall,
		"large": VariantLarge, "l": VariantLarge, "": VariantLarge,
		"1.5b": VariantOnePointFiveB,
	} {
		got, err := ParseVariant(in)
		if err != nil || got != want {
			t.Errorf("ParseVariant(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if DefaultVariant != VariantLarge {
		t.Errorf("DefaultVariant = %q", DefaultVariant)
	}
	_, err := ParseVariant("medium")
	if !errors.Is(err, spec.ErrUnknownID) || !strings.Contains(err.Error(), `family "golden-choices" has no variant "medium" (known: small, large, 1.5b)`) {
		t.Errorf("unknown variant: %v", err)
	}
	if d := cmp.Diff([]Variant{VariantSmall, VariantLarge, VariantOnePointFiveB}, Variants()); d != "" {
		t.Errorf("Variants() in manifest order (-want +got):\n%s", d)
	}
}

func TestParseTaskAcceptsIDsAndAliases(t *testing.T) {
	for in, want := range map[string]Task{
		"generate": TaskGenerate, "gen": TaskGenerate, "text-to-image": TaskGenerate,
		"edit": TaskEdit, "inpaint": TaskEdit, "": TaskEdit,
	} {
		got, err := ParseTask(in)
		if err != nil || got != want {
			t.Errorf("ParseTask(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseTask("upscale"); !errors.Is(err, spec.ErrUnknownID) {
		t.Errorf("unknown task: %v", err)
	}
}

func TestTextEncodingRejectsUnknownValues(t *testing.T) {
	type config struct {
		V Variant
		T Task
		S GenerateScheduler
	}
	var c config
	if err := json.Unmarshal([]byte(`{"V": "tiny", "T": "gen", "S": "1.5"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c != (config{VariantSmall, TaskGenerate, GenerateScheduler1_5}) {
		t.Errorf("decoded %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil || string(b) != `{"V":"small","T":"generate","S":"1.5"}` {
		t.Errorf("Marshal = %s, %v (aliases must come out as ids)", b, err)
	}
	for _, in := range []string{`{"V": "medium"}`, `{"T": "upscale"}`, `{"S": "DDIM"}`} {
		if err := json.Unmarshal([]byte(in), &c); err == nil {
			t.Errorf("Unmarshal(%s) accepted an unknown value", in)
		}
	}
	if err := json.Unmarshal([]byte(`{"S": "plms"}`), &c); err == nil || !strings.Contains(err.Error(), `scheduler: "plms" is not one of "ddim", "euler-a", "1.5"`) {
		t.Errorf("unknown choice: %v", err)
	}
	for _, bad := range []any{Variant("tiny"), Task("nope"), GenerateScheduler("plms")} {
		if _, err := json.Marshal(bad); err == nil {
			t.Errorf("Marshal(%q) accepted a value that is not a constant", bad)
		}
	}
}

func TestChoiceValidation(t *testing.T) {
	p := DefaultGenerateParams()
	if p.Scheduler != GenerateSchedulerEulerA || p.Precision != GeneratePrecisionFloat32 || !cmp.Equal(p.Styles, []GenerateStyles{GenerateStylesPhoto}) {
		t.Errorf("defaults = %+v", p)
	}
	p.Sampler = new(GenerateSampler("slow"))
	p.Styles = append(p.Styles, "oil")
	err := p.Validate()
	want := []string{
		"sampler: must be one of \"fast\", \"exact\", got \"slow\"",
		"quality: is required",
		"styles[1]: must be one of \"photo\", \"anime\", \"sketch\", got \"oil\"",
	}
	if err == nil || cmp.Diff(want, strings.Split(err.Error(), "\n")) != "" {
		t.Errorf("Validate() = %v\nwant %q", err, want)
	}
	p = DefaultGenerateParams()
	p.Quality = GenerateQualityHigh
	p.Sampler = new(GenerateSamplerExact)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	// Choices go to the engine as plain strings.
	if d := cmp.Diff(map[string]any{"scheduler": "euler-a", "sampler": "exact", "quality": "high", "styles": []any{"photo"}}, p.CallKwargs()); d != "" {
		t.Errorf("CallKwargs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"precision": "float32"}, p.LoadKwargs()); d != "" {
		t.Errorf("LoadKwargs (-want +got):\n%s", d)
	}
}

func TestClientVariantSelection(t *testing.T) {
	for _, opt := range []client.Option{WithVariant(VariantSmall), client.WithVariant("tiny")} {
		c, err := New(opt)
		if err != nil {
			t.Fatal(err)
		}
		if c.Variant() != VariantSmall {
			t.Errorf("Variant() = %q", c.Variant())
		}
		c.Close()
	}
	if _, err := New(client.WithVariant("medium")); !errors.Is(err, spec.ErrUnknownID) {
		t.Errorf("New with an unknown variant: %v", err)
	}
}
