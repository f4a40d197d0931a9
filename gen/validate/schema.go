package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"

	jsv "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/schema"
)

// compiled is the embedded manifest schema, compiled once.
var compiled struct {
	once   sync.Once
	schema *jsv.Schema
	doc    map[string]any // the schema that was compiled, as JSON values
	err    error
}

// compiledSchema compiles the embedded schema with every "$ref" to a
// "$defs" entry replaced by the definition itself. The result accepts
// exactly what the embedded schema accepts, and validates faster because
// the validator no longer hops through references.
func compiledSchema() (*jsv.Schema, map[string]any, error) {
	compiled.once.Do(func() {
		var doc map[string]any
		if err := json.Unmarshal(schema.JSON, &doc); err != nil {
			compiled.err = fmt.Errorf("read embedded manifest schema: %w", err)
			return
		}
		defs, _ := doc["$defs"].(map[string]any)
		inlined, ok := inlineRefs(doc, defs, map[string]bool{}).(map[string]any)
		if !ok {
			compiled.err = fmt.Errorf("embedded manifest schema is not an object")
			return
		}
		// The root is {"$schema", "$id", "$ref": "#/$defs/Document", ...}:
		// put the document's definition in place of the reference.
		if ref, ok := inlined["$ref"].(string); ok {
			if def, ok := inlineRefs(map[string]any{"$ref": ref}, defs, map[string]bool{}).(map[string]any); ok && def["$ref"] == nil {
				delete(inlined, "$ref")
				for k, v := range def {
					if _, taken := inlined[k]; !taken {
						inlined[k] = v
					}
				}
			}
		}
		delete(inlined, "$defs")
		raw, err := json.Marshal(inlined)
		if err != nil {
			compiled.err = err
			return
		}
		c := jsv.NewCompiler()
		c.Draft = jsv.Draft2020
		if err := c.AddResource(schema.ID, bytes.NewReader(raw)); err != nil {
			compiled.err = fmt.Errorf("load embedded manifest schema: %w", err)
			return
		}
		s, err := c.Compile(schema.ID)
		if err != nil {
			compiled.err = fmt.Errorf("compile embedded manifest schema: %w", err)
			return
		}
		compiled.schema, compiled.doc = s, inlined
	})
	return compiled.schema, compiled.doc, compiled.err
}

// inlineRefs returns v with every {"$ref": "#/$defs/Name"} replaced by a
// copy of the (inlined) definition. A recursive definition stays a
// reference, which then fails to compile loudly rather than loop.
func inlineRefs(v any, defs map[string]any, active map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok && onlyAnnotations(x) {
			if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok && defs[name] != nil && !active[name] {
				active[name] = true
				out, isMap := inlineRefs(defs[name], defs, active).(map[string]any)
				delete(active, name)
				if isMap {
					for k, e := range x {
						if k != "$ref" {
							out[k] = e // the referring site's description wins
						}
					}
					return out
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k == "$defs" {
				out[k] = e
				continue
			}
			out[k] = inlineRefs(e, defs, active)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = inlineRefs(e, defs, active)
		}
		return out
	}
	return v
}

// onlyAnnotations reports whether every key of a schema object besides
// "$ref" is an annotation, so that the reference can be inlined by merging.
func onlyAnnotations(x map[string]any) bool {
	for k := range x {
		switch k {
		case "$ref", "description", "title", "default", "examples", "deprecated", "$comment":
		default:
			return false
		}
	}
	return true
}

// objectSchema returns the property names (sorted) and required keys of
// the object schema whose keyword at keywordLocation failed
// ("/properties/tasks/items/additionalProperties" -> the task schema).
func objectSchema(doc map[string]any, keywordLocation string) (props, required []string) {
	segs := manifest.SplitPointer(keywordLocation)
	var node any = doc
	for _, seg := range segs[:max(len(segs)-1, 0)] {
		switch x := node.(type) {
		case map[string]any:
			node = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, nil
			}
			node = x[i]
		default:
			return nil, nil
		}
	}
	obj, _ := node.(map[string]any)
	ps, _ := obj["properties"].(map[string]any)
	for p := range ps {
		props = append(props, p)
	}
	sort.Strings(props)
	rs, _ := obj["required"].([]any)
	for _, r := range rs {
		if s, ok := r.(string); ok {
			required = append(required, s)
		}
	}
	return props, required
}

// schemaCheck validates the document value against the manifest schema,
// reports every leaf error and nulls out values of the wrong type so that
// the document can still be decoded for the semantic checks.
func (c *checker) schemaCheck() {
	s, doc, err := compiledSchema()
	if err != nil {
		c.report("", false, "internal error: %v", err)
		return
	}
	err = s.Validate(c.file.Value)
	if err == nil {
		return
	}
	var ve *jsv.ValidationError
	if !errors.As(err, &ve) {
		c.report("", false, "cannot validate: %v", err)
		return
	}
	var leaves []*jsv.ValidationError
	var walk func(e *jsv.ValidationError)
	walk = func(e *jsv.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, x := range e.Causes {
			walk(x)
		}
	}
	walk(ve)
	for _, e := range leaves {
		c.schemaError(e, doc)
	}
}

// schemaError turns one leaf validation error into diagnostics.
func (c *checker) schemaError(e *jsv.ValidationError, doc map[string]any) {
	ptr := e.InstanceLocation
	if c.file.Pruned(ptr) {
		return // already reported: a scalar the loader could not read
	}
	keyword := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
	where := humanPath(ptr)
	switch keyword {
	case "additionalProperties":
		obj, _ := c.valueAt(ptr).(map[string]any)
		props, _ := objectSchema(doc, e.KeywordLocation)
		var unknown []string
		for k := range obj {
			if !slices.Contains(props, k) {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
		for _, k := range unknown {
			msg := manifest.Sprintf("unknown key %q in %s", k, where)
			if s := suggest(k, props); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; allowed keys: " + strings.Join(props, ", ")
			}
			c.report(manifest.JoinPointer(append(manifest.SplitPointer(ptr), k)...), true, "%s", msg)
		}
		return
	case "required":
		obj, _ := c.valueAt(ptr).(map[string]any)
		_, required := objectSchema(doc, e.KeywordLocation)
		for _, k := range required {
			if _, ok := obj[k]; !ok {
				c.report(ptr, false, "%s is missing the required key %q", where, k)
			}
		}
		return
	case "type":
		c.report(ptr, false, "%s: %s", where, typeMessage(e.Message, c.valueAt(ptr)))
		c.prune(ptr)
		return
	case "enum":
		got := c.valueAt(ptr)
		c.report(ptr, false, "%s: %s is not allowed; %s", where, show(got), strings.Replace(e.Message, "value must be", "must be", 1))
		return
	}
	c.report(ptr, false, "%s: %s", where, e.Message)
}

// typeMessage rewrites "expected integer, but got string" as
// "must be an integer, not a string", naming integers as such.
func typeMessage(m string, v any) string {
	want, got, ok := strings.Cut(strings.TrimPrefix(m, "expected "), ", but got ")
	if !ok {
		return m
	}
	if n, isNum := v.(json.Number); isNum && !strings.ContainsAny(string(n), ".eE") {
		got = "integer"
	}
	return fmt.Sprintf("must be %s, not %s", article(want), article(got))
}

func article(t string) string {
	switch t {
	case "null":
		return "null (empty)"
	case "integer", "array", "object":
		return "an " + strings.Replace(t, "object", "object (mapping)", 1)
	}
	return "a " + t
}

// humanPath writes a JSON pointer as "tasks[0].inputs[2].default"; the
// root is "the manifest".
func humanPath(ptr string) string {
	segs := manifest.SplitPointer(ptr)
	if len(segs) == 0 {
		return "the manifest"
	}
	var b strings.Builder
	for _, s := range segs {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if safePointerSegment(s) {
			b.WriteString(s)
		} else {
			b.WriteString(manifest.Quote(s))
		}
	}
	return b.String()
}

// safePointerSegment reports whether a key can be written in a path as it
// is: short, printable, without quotes.
func safePointerSegment(s string) bool {
	return len(s) <= manifest.ExcerptRunes && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == '"' }) < 0
}

// show quotes a document value for a message.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return manifest.Quote(x)
	case nil:
		return "null"
	case json.Number:
		return string(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// suggest returns the candidate closest to s by edit distance when it is
// close enough to be a likely typo, or "".
func suggest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/3)+1
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
