package breaking

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/gen/glob"
)

// Allow is one --allow rule: RULE[:SUBJECT]. RULE is a rule name or a
// glob over rule names; SUBJECT is a slash-separated glob over a change's
// Subject in which each segment is matched with path.Match syntax (*, ?,
// [...]) and a "**" segment matches any number of segments. Without
// SUBJECT the rule covers that rule's changes everywhere. Examples:
//
//	field-removed:wan-t2v/text-to-video/negative_prompt
//	field-removed:wan-t2v/*/negative_prompt
//	choice-removed:open-oasis/step/action/*
//	*:legacy-family/**
//	constraint-narrowed
type Allow struct {
	// Rule is the rule pattern.
	Rule string
	// Subject is the subject pattern; "" covers every subject.
	Subject string
	// Text is the rule as written.
	Text string
}

// ParseAllow parses RULE[:SUBJECT]. A rule pattern that matches no known
// rule, or a malformed glob, is an error.
func ParseAllow(s string) (Allow, error) {
	rule, subj, _ := strings.Cut(s, ":")
	a := Allow{Rule: rule, Subject: subj, Text: s}
	if rule == "" {
		return a, fmt.Errorf("--allow %q: empty rule; write RULE[:SUBJECT], e.g. field-removed:my-family/my-task/my_field", s)
	}
	if _, err := path.Match(rule, ""); err != nil {
		return a, fmt.Errorf("--allow %q: bad rule pattern %q: %v", s, rule, err)
	}
	known := false
	for _, r := range RuleNames() {
		if ok, _ := path.Match(rule, r); ok {
			known = true
			break
		}
	}
	if !known {
		return a, fmt.Errorf("--allow %q: %q matches no rule; rules of breaking changes: %s", s, rule, strings.Join(breakingRules(), ", "))
	}
	if seg, err := glob.Check(subj); err != nil {
		return a, fmt.Errorf("--allow %q: bad subject pattern segment %q: %v", s, seg, err)
	}
	return a, nil
}

func breakingRules() []string {
	var out []string
	for _, r := range RuleNames() {
		if Rules[r] == Breaking {
			out = append(out, r)
		}
	}
	return out
}

// Match reports whether a covers c.
func (a Allow) Match(c Change) bool {
	if ok, _ := path.Match(a.Rule, c.Rule); !ok {
		return false
	}
	if a.Subject == "" {
		return true
	}
	return glob.Match(a.Subject, c.Subject)
}

// Apply marks the breaking changes that an allow rule covers (and no
// deprecation already does) as allowed, and returns the rules that
// covered no change at all, in their given order.
func Apply(changes []Change, allows []Allow) (unused []Allow) {
	used := make([]bool, len(allows))
	for i := range changes {
		c := &changes[i]
		if c.Class != Breaking {
			continue
		}
		for j, a := range allows {
			if a.Match(*c) {
				used[j] = true
				if c.Allowed == "" {
					c.Allowed = "--allow " + a.Text
				}
			}
		}
	}
	for j, a := range allows {
		if !used[j] && !slices.ContainsFunc(unused, func(u Allow) bool { return u.Text == a.Text }) {
			unused = append(unused, a)
		}
	}
	return unused
}
