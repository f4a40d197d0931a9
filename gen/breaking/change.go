// Package breaking compares two sets of model family manifests — an old one
// (a git revision, a folder or a file) and a new one — and classifies every
// difference of the contract they describe as breaking, behavioural or
// additive, each located in the new manifest.
//
// Families are matched by model_family_id; variants, tasks, fields and
// artifacts by their ids; checkpoints by role. Lists that are sets (aliases,
// choices) are compared as sets, so a pure reordering of keys, of items that
// carry ids or of set members is not a change. Documentation (display_name,
// label, description, notes, workload_type, status) is not compared.
//
// A breaking change fails the check unless the old manifest marked the
// changed item (or one of its parents) deprecated, or an Allow rule covers
// it; docs/ci.md lists every rule.
package breaking

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Class is how a change affects callers, generated code and checkpoints.
type Class string

// The classes of change, from the most to the least severe.
const (
	// Breaking changes can fail existing callers, generated code or
	// checkpoints.
	Breaking Class = "breaking"
	// Behavioural changes keep every call valid but change what it does.
	Behavioural Class = "behavioural"
	// Additive changes only add what callers may use.
	Additive Class = "additive"
)

// Rules of breaking changes. The rule name is the first part of an Allow
// rule.
const (
	RuleFamilyRemoved      = "family-removed"
	RuleVariantRemoved     = "variant-removed"
	RuleTaskRemoved        = "task-removed"
	RuleFieldRemoved       = "field-removed"
	RuleArtifactRemoved    = "artifact-removed"
	RuleChoiceRemoved      = "choice-removed"
	RuleAliasRemoved       = "alias-removed"
	RuleControlRemoved     = "control-removed"
	RuleRequiredFieldAdded = "required-field-added"
	RuleFieldRequired      = "field-required"
	RuleConstraintNarrowed = "constraint-narrowed"
	RuleKindChanged        = "kind-changed"
	RuleTargetChanged      = "target-changed"
	RuleMethodChanged      = "method-changed"
	RuleGoNameChanged      = "go-name-changed"
	RuleGoPackageChanged   = "go-package-changed"
	RuleGoTypeChanged      = "go-type-changed"
	RuleStreamChanged      = "stream-changed"
	RuleBatchingRemoved    = "batching-removed"
	RuleArtifactRequired   = "artifact-required"
	RuleArtifactOptional   = "artifact-optional"
	RulePositionChanged    = "position-changed"
)

// Rules of behavioural changes.
const (
	RuleDefaultChanged        = "default-changed"
	RuleDefaultVariantChanged = "default-variant-changed"
	RuleDefaultTaskChanged    = "default-task-changed"
	RuleKwargsChanged         = "kwargs-changed"
	RuleCheckpointChanged     = "checkpoint-changed"
	RuleRealtimeChanged       = "realtime-changed"
	RuleBatchingChanged       = "batching-changed"
	RulePreviewChanged        = "preview-changed"
	RuleFPSChanged            = "fps-changed"
	RuleImageChanged          = "image-changed"
)

// Rules of additive changes.
const (
	RuleFamilyAdded       = "family-added"
	RuleVariantAdded      = "variant-added"
	RuleTaskAdded         = "task-added"
	RuleFieldAdded        = "field-added"
	RuleArtifactAdded     = "artifact-added"
	RuleChoiceAdded       = "choice-added"
	RuleAliasAdded        = "alias-added"
	RuleControlAdded      = "control-added"
	RuleConstraintWidened = "constraint-widened"
	RuleFieldOptional     = "field-optional"
	RuleBatchingAdded     = "batching-added"
)

// Rules maps every rule to its class.
var Rules = map[string]Class{
	RuleFamilyRemoved: Breaking, RuleVariantRemoved: Breaking, RuleTaskRemoved: Breaking,
	RuleFieldRemoved: Breaking, RuleArtifactRemoved: Breaking, RuleChoiceRemoved: Breaking,
	RuleAliasRemoved: Breaking, RuleControlRemoved: Breaking, RuleRequiredFieldAdded: Breaking,
	RuleFieldRequired: Breaking, RuleConstraintNarrowed: Breaking, RuleKindChanged: Breaking,
	RuleTargetChanged: Breaking, RuleMethodChanged: Breaking, RuleGoNameChanged: Breaking,
	RuleGoPackageChanged: Breaking, RuleGoTypeChanged: Breaking, RuleStreamChanged: Breaking,
	RuleBatchingRemoved: Breaking, RuleArtifactRequired: Breaking, RuleArtifactOptional: Breaking,
	RulePositionChanged: Breaking,

	RuleDefaultChanged: Behavioural, RuleDefaultVariantChanged: Behavioural,
	RuleDefaultTaskChanged: Behavioural, RuleKwargsChanged: Behavioural,
	RuleCheckpointChanged: Behavioural, RuleRealtimeChanged: Behavioural,
	RuleBatchingChanged: Behavioural, RulePreviewChanged: Behavioural, RuleFPSChanged: Behavioural, RuleImageChanged: Behavioural,

	RuleFamilyAdded: Additive, RuleVariantAdded: Additive, RuleTaskAdded: Additive,
	RuleFieldAdded: Additive, RuleArtifactAdded: Additive, RuleChoiceAdded: Additive,
	RuleAliasAdded: Additive, RuleControlAdded: Additive, RuleConstraintWidened: Additive,
	RuleFieldOptional: Additive, RuleBatchingAdded: Additive,
}

// RuleNames returns every rule name, sorted.
func RuleNames() []string {
	names := make([]string, 0, len(Rules))
	for n := range Rules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Change is one difference between an old and a new manifest.
type Change struct {
	// File is the new manifest the change is located in; for a removed
	// family, the old manifest it was in.
	File string `json:"file"`
	// Line is the 1-based line of the changed node, or of the nearest
	// surviving parent of a removed one.
	Line int `json:"line"`
	// Column is the 1-based column of that node.
	Column int `json:"column"`
	// Path is the JSON pointer of that node in File.
	Path string `json:"path"`
	// Message says what changed, with the old and new values.
	Message string `json:"message"`
	// Class is the change's class.
	Class Class `json:"class"`
	// Rule names the kind of change (see Rules).
	Rule string `json:"rule"`
	// Subject names what changed as slash-separated ids: FAMILY,
	// FAMILY/VARIANT, FAMILY/TASK, FAMILY/TASK/FIELD, FAMILY/TASK/ARTIFACT,
	// FAMILY/TASK/FIELD/CHOICE, ... (a "/" or "%" inside an id is written
	// %2F or %25). RULE:SUBJECT is an Allow rule that covers exactly this
	// change.
	Subject string `json:"subject"`
	// Allowed, for a breaking change, says why it does not fail the check
	// (a deprecation in the old manifest or an --allow rule); "" otherwise.
	Allowed string `json:"allowed,omitempty"`
}

// Key returns "RULE:SUBJECT", the Allow rule that covers exactly c.
func (c Change) Key() string { return c.Rule + ":" + c.Subject }

// Fails reports whether c is a breaking change nothing allows.
func (c Change) Fails() bool { return c.Class == Breaking && c.Allowed == "" }

// String returns "FILE:LINE:COL: CLASS: message (RULE:SUBJECT)", with the
// reason when a breaking change is allowed.
func (c Change) String() string {
	s := fmt.Sprintf("%s:%d:%d: %s: %s (%s)", c.File, c.Line, c.Column, c.Class, c.Message, c.Key())
	if c.Allowed != "" {
		s += "; allowed: " + c.Allowed
	}
	return s
}

// Sort orders changes by file, position, rule, subject and message and
// drops exact repeats.
func Sort(changes []Change) []Change {
	slices.SortStableFunc(changes, func(a, b Change) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			strings.Compare(a.Rule, b.Rule), strings.Compare(a.Subject, b.Subject), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(changes)
}

// Summary counts changes by class; allowed counts the breaking changes that
// do not fail.
type Summary struct {
	Breaking, Allowed, Behavioural, Additive int
}

// Summarize counts changes.
func Summarize(changes []Change) Summary {
	var s Summary
	for _, c := range changes {
		switch c.Class {
		case Breaking:
			s.Breaking++
			if c.Allowed != "" {
				s.Allowed++
			}
		case Behavioural:
			s.Behavioural++
		case Additive:
			s.Additive++
		}
	}
	return s
}

// Failing reports whether any change fails the check.
func (s Summary) Failing() bool { return s.Breaking > s.Allowed }

// String is "N breaking (M allowed), N behavioural, N additive".
func (s Summary) String() string {
	b := fmt.Sprintf("%d breaking", s.Breaking)
	if s.Allowed > 0 {
		b += fmt.Sprintf(" (%d allowed)", s.Allowed)
	}
	return fmt.Sprintf("%s, %d behavioural, %d additive", b, s.Behavioural, s.Additive)
}

// segment escapes one id for a Subject.
func segment(id string) string {
	if !strings.ContainsAny(id, "/%") {
		return id
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(id)
}

// subject joins escaped ids.
func subject(ids ...string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = segment(id)
	}
	return strings.Join(parts, "/")
}
