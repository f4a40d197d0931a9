// Package convert turns a spec dict the Python runtime wrote — the JSON of
// worldfoundry.core's ModelInferenceSpec.to_dict() — into a wfgen
// manifest ("wfgen convert").
//
// Such a dict is a manifest but for three things, which "wfgen validate"
// reports: it has no schema_version, and each variant's dict carries the
// values the seed derives from its checkpoints, model_ref (the primary
// checkpoint's URI) and checkpoint_map (role → URI). The conversion adds
// schema_version, checks each derived value against the checkpoints and
// drops it — a value the checkpoints do not give is an error, since
// dropping it would lose what it says — and writes YAML in the dict's key
// order. Everything else is kept as written; the result is validated like
// any manifest, each problem reported at its place in the input.
package convert

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Result is a converted manifest.
type Result struct {
	// YAML is the manifest, valid.
	YAML []byte
	// Warnings are what the conversion kept but a reader should know,
	// one sentence each.
	Warnings []string
}

// Diagnostic is one problem of the input, at its line and column.
type Diagnostic = manifest.Diagnostic

// PythonDict converts the dict data read from path (JSON for a ".json"
// path, else YAML). It returns the manifest, or nil and every problem of
// the input.
func PythonDict(path string, data []byte) (*Result, []Diagnostic) {
	diagnose := func(errs []manifest.Error) []Diagnostic {
		var ds []Diagnostic
		for _, e := range errs {
			ds = append(ds, Diagnostic{File: path, Line: e.Line, Column: e.Column, Path: e.Path, Message: e.Message})
		}
		return manifest.SortDiagnostics(ds)
	}
	in, errs := manifest.Parse(path, data)
	if len(errs) > 0 || in == nil {
		return nil, diagnose(errs)
	}
	if js := in.JSONSchema(); js != nil {
		return nil, []Diagnostic{{File: path, Line: js.Line, Column: js.Column, Path: "/$schema", Message: "this file is " + js.What()}}
	}
	root, errs := manifest.ParseNode(path, data)
	if len(errs) > 0 || root == nil {
		return nil, diagnose(errs)
	}
	if root.Kind != yaml.MappingNode {
		d := in.Diagnose("", false, "a spec dict is a mapping (ModelInferenceSpec.to_dict()), not %s", kindName(root))
		d.File = path
		return nil, []Diagnostic{d}
	}
	c := &converter{in: in, path: path}
	if v := value(root, "variants"); v != nil && v.Kind == yaml.SequenceNode {
		for i, variant := range v.Content {
			if variant.Kind == yaml.MappingNode {
				c.derived(variant, "/variants/"+strconv.Itoa(i))
			}
		}
	}
	if len(c.diags) > 0 {
		return nil, manifest.SortDiagnostics(c.diags)
	}
	if value(root, "schema_version") == nil {
		root.Content = append([]*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "schema_version"},
			{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(manifest.SchemaVersion)},
		}, root.Content...)
	}
	restyle(root)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Converted by \"wfgen convert\" from %s, a spec dict of the Python runtime.\n", oneLine(filepath.Base(path)))
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, []Diagnostic{{File: path, Line: 1, Column: 1, Message: "cannot write the manifest: " + err.Error()}}
	}
	if err := enc.Close(); err != nil {
		return nil, []Diagnostic{{File: path, Line: 1, Column: 1, Message: "cannot write the manifest: " + err.Error()}}
	}
	out := buf.Bytes()
	if _, diags := validate.Bytes("converted.yaml", out); len(diags) > 0 {
		return nil, c.relocate(out, diags)
	}
	return &Result{YAML: out, Warnings: c.warnings}, nil
}

// converter collects the problems and warnings of one conversion.
type converter struct {
	in       *manifest.File
	path     string
	diags    []Diagnostic
	warnings []string
}

func (c *converter) errorf(ptr string, format string, args ...any) {
	d := c.in.Diagnose(ptr, true, format, args...)
	d.File = c.path
	c.diags = append(c.diags, d)
}

// derived checks the model_ref and checkpoint_map of the variant at ptr
// against its checkpoints, as the seed derives them, and removes them.
func (c *converter) derived(variant *yaml.Node, ptr string) {
	type ref struct{ role, uri string }
	var refs []ref
	if cks := value(variant, "checkpoints"); cks != nil && cks.Kind == yaml.SequenceNode {
		for _, ck := range cks.Content {
			role, uri := scalar(value(ck, "role")), scalar(value(ck, "uri"))
			refs = append(refs, ref{role, uri})
		}
	}
	id := scalar(value(variant, "variant_id"))
	if m := value(variant, "checkpoint_map"); m != nil {
		// The seed: {ref.role: ref.uri for ref in checkpoints}, the last of
		// a role winning.
		want := map[string]string{}
		var roles []string
		for _, r := range refs {
			if _, ok := want[r.role]; !ok {
				roles = append(roles, r.role)
			}
			want[r.role] = r.uri
		}
		got := map[string]string{}
		ok := m.Kind == yaml.MappingNode
		if ok {
			for i := 0; i+1 < len(m.Content); i += 2 {
				v := m.Content[i+1]
				if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
					ok = false
					break
				}
				got[m.Content[i].Value] = v.Value
			}
		}
		switch {
		case !ok:
			c.errorf(ptr+"/checkpoint_map", "variant %q: checkpoint_map is not a mapping of roles to URIs, as the Python runtime writes it", id)
		case len(got) != len(want) || !sameMap(got, want):
			c.errorf(ptr+"/checkpoint_map", "variant %q: checkpoint_map %s is not what its checkpoints give (%s), so this dict was edited after to_dict; a manifest keeps the checkpoints only: make them say what is meant and remove checkpoint_map",
				id, mapText(got, slices.Sorted(maps.Keys(got))), mapText(want, roles))
		}
		remove(variant, "checkpoint_map")
	}
	if m := value(variant, "model_ref"); m != nil {
		uri, isString := m.Value, m.Kind == yaml.ScalarNode && m.Tag == "!!str"
		named := false
		for _, r := range refs {
			named = named || r.uri == uri
		}
		switch {
		case !isString:
			c.errorf(ptr+"/model_ref", "variant %q: model_ref is not a string, as the Python runtime writes it", id)
		case uri != "" && !named:
			c.errorf(ptr+"/model_ref", "variant %q: model_ref %q is the URI of none of its checkpoints, and a manifest keeps the checkpoints only: add the checkpoint (role: model, uri: %q) or remove model_ref", id, uri, uri)
		case uri != "":
			v := spec.InferenceVariantSpec{}
			for _, r := range refs {
				v.Checkpoints = append(v.Checkpoints, spec.InferenceCheckpointRef{Role: r.role, URI: r.uri})
			}
			if p := v.PrimaryCheckpointURI(); p != uri {
				c.warnings = append(c.warnings, fmt.Sprintf("variant %q: model_ref is %q, but wfgen runs the checkpoint with role \"model\" (else the first), %q (docs/differences.md, primary checkpoint)", id, uri, p))
			}
		}
		remove(variant, "model_ref")
	}
}

// relocate moves diagnostics of the written manifest out onto the input:
// the conversion keeps every value's JSON pointer, so each is reported
// where the input holds the same value (or key).
func (c *converter) relocate(out []byte, diags []Diagnostic) []Diagnostic {
	written, _ := manifest.Parse("converted.yaml", out)
	var ds []Diagnostic
	for _, d := range diags {
		key := false
		if written != nil && d.Path != "" {
			kl, kc := written.KeyPosition(d.Path)
			vl, vc := written.Position(d.Path)
			key = kl == d.Line && kc == d.Column && (kl != vl || kc != vc)
		}
		r := c.in.Diagnose(d.Path, key, "%s", "")
		r.File, r.Path, r.Message = c.path, d.Path, d.Message
		ds = append(ds, r)
	}
	return manifest.SortDiagnostics(ds)
}

// value returns the value of key in mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// remove deletes key from mapping m.
func remove(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// scalar is a scalar node's text, "" for anything else.
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// restyle lays the tree out as a hand-written manifest would be: block
// mappings and sequences, flow sequences of scalars ([1, 8, 8], [a, b]),
// plain scalars where YAML reads them back the same (the encoder quotes a
// string that would read as another type).
func restyle(n *yaml.Node) {
	n.Line, n.Column = 0, 0
	switch n.Kind {
	case yaml.ScalarNode:
		n.Style = 0
		if n.Tag == "!!str" && n.Value == "" {
			n.Style = yaml.SingleQuotedStyle
		}
	case yaml.MappingNode:
		n.Style = 0
		if len(n.Content) == 0 {
			n.Style = yaml.FlowStyle
		}
	case yaml.SequenceNode:
		n.Style = yaml.FlowStyle
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				n.Style = 0
			}
		}
	}
	for _, e := range n.Content {
		restyle(e)
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "this"
}

func sameMap(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// mapText writes m in the order of keys, as {role: uri, ...}.
func mapText(m map[string]string, keys []string) string {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", manifest.Quote(k), manifest.Quote(m[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// oneLine keeps a file name to one comment line.
func oneLine(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
