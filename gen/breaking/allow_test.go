package breaking

import (
	"strings"
	"testing"
)

func TestAllowMatch(t *testing.T) {
	c := Change{Class: Breaking, Rule: RuleFieldRemoved, Subject: "wan-t2v/text-to-video/negative_prompt"}
	for _, tc := range []struct {
		rule string
		want bool
	}{
		{"field-removed:wan-t2v/text-to-video/negative_prompt", true},
		{"field-removed:wan-t2v/*/negative_prompt", true},
		{"field-removed:wan-t2v/**", true},
		{"field-removed:**/negative_prompt", true},
		{"field-removed:**", true},
		{"field-removed", true},
		{"*:wan-t2v/**", true},
		{"field-*:wan-t2v/text-to-video/negative_*", true},
		{"field-removed:wan-t2v/**/text-to-video/**/negative_prompt", true},
		{"field-removed:wan-t2v", false},
		{"field-removed:wan-t2v/*", false},
		{"field-removed:*/negative_prompt", false},
		{"field-removed:wan-t2v/text-to-video/negative_prompt/x", false},
		{"task-removed:wan-t2v/**", false},
		{"field-removed:ltx-video/**", false},
	} {
		a, err := ParseAllow(tc.rule)
		if err != nil {
			t.Fatalf("ParseAllow(%q): %v", tc.rule, err)
		}
		if got := a.Match(c); got != tc.want {
			t.Errorf("%q matches %s: %v, want %v", tc.rule, c.Key(), got, tc.want)
		}
	}
	// A change's own key always allows it, escaped ids included.
	odd := Change{Class: Breaking, Rule: RuleChoiceRemoved, Subject: subject("fam", "task", "field", "a/b 50%")}
	a, err := ParseAllow(odd.Key())
	if err != nil || !a.Match(odd) {
		t.Errorf("own key %q: %v %v", odd.Key(), a.Match(odd), err)
	}
	if odd.Subject != "fam/task/field/a%2Fb 50%25" {
		t.Errorf("subject = %q", odd.Subject)
	}
}

func TestParseAllowErrors(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{"", "empty rule"},
		{":fam", "empty rule"},
		{"field-deleted:fam", "matches no rule"},
		{"[:fam", "bad rule pattern"},
		{"field-removed:fam/[", "bad subject pattern"},
	} {
		_, err := ParseAllow(tc.rule)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseAllow(%q) = %v, want %q", tc.rule, err, tc.want)
		}
	}
}

func TestApply(t *testing.T) {
	changes := []Change{
		{Class: Breaking, Rule: RuleFieldRemoved, Subject: "f/t/x"},
		{Class: Breaking, Rule: RuleFieldRemoved, Subject: "f/t/y", Allowed: "field \"y\" is deprecated in the old manifest (gone)"},
		{Class: Additive, Rule: RuleFieldAdded, Subject: "f/t/z"},
	}
	rules := []Allow{}
	for _, s := range []string{"field-removed:f/t/*", "field-added", "field-removed:f/t/*", "task-removed"} {
		a, err := ParseAllow(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, a)
	}
	unused := Apply(changes, rules)
	if changes[0].Allowed != "--allow field-removed:f/t/*" {
		t.Errorf("first: %q", changes[0].Allowed)
	}
	if !strings.Contains(changes[1].Allowed, "deprecated") {
		t.Errorf("a deprecation's reason was replaced: %q", changes[1].Allowed)
	}
	if changes[2].Allowed != "" {
		t.Errorf("an additive change was marked allowed")
	}
	// Rules only apply to breaking changes; a repeated rule is listed once.
	if len(unused) != 2 || unused[0].Text != "field-added" || unused[1].Text != "task-removed" {
		t.Errorf("unused = %v", unused)
	}
	if Summarize(changes).Failing() {
		t.Error("still failing")
	}
}
