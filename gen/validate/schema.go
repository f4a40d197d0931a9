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

	jsv "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/schema"
)

// compiled is the embedded manifest schema, compiled once.
var compiled struct {
	once   sync.Once
	schema *jsv.Schema
	defs   map[string]defInfo // $defs by name
	err    error
}

// defInfo is what diagnostics need from one $defs entry.
type defInfo struct {
	properties []string // sorted
	required   []string
}

func compiledSchema() (*jsv.Schema, map[string]defInfo, error) {
	compiled.once.Do(func() {
		c := jsv.NewCompiler()
		c.Draft = jsv.Draft2020
		if err := c.AddResource(schema.ID, bytes.NewReader(schema.JSON)); err != nil {
			compiled.err = fmt.Errorf("load embedded manifest schema: %w", err)
			return
		}
		s, err := c.Compile(schema.ID)
		if err != nil {
			compiled.err = fmt.Errorf("compile embedded manifest schema: %w", err)
			return
		}
		var doc struct {
			Defs map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(schema.JSON, &doc); err != nil {
			compiled.err = fmt.Errorf("read embedded manifest schema: %w", err)
			return
		}
		defs := map[string]defInfo{}
		for name, d := range doc.Defs {
			var props []string
			for p := range d.Properties {
				props = append(props, p)
			}
			sort.Strings(props)
			defs[name] = defInfo{properties: props, required: d.Required}
		}
		compiled.schema, compiled.defs = s, defs
	})
	return compiled.schema, compiled.defs, compiled.err
}

// schemaCheck validates the document value against the manifest schema,
// reports every leaf error and nulls out values of the wrong type so that
// the document can still be decoded for the semantic checks.
func (c *checker) schemaCheck() {
	s, defs, err := compiledSchema()
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
		c.schemaError(e, defs)
	}
}

// schemaError turns one leaf validation error into diagnostics.
func (c *checker) schemaError(e *jsv.ValidationError, defs map[string]defInfo) {
	ptr := e.InstanceLocation
	keyword := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
	def := defName(e.AbsoluteKeywordLocation)
	where := humanPath(ptr)
	switch keyword {
	case "additionalProperties":
		obj, _ := c.valueAt(ptr).(map[string]any)
		info := defs[def]
		var unknown []string
		for k := range obj {
			if !slices.Contains(info.properties, k) {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
		for _, k := range unknown {
			msg := fmt.Sprintf("unknown key %q in %s", k, where)
			if s := suggest(k, info.properties); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; allowed keys: " + strings.Join(info.properties, ", ")
			}
			c.report(manifest.JoinPointer(append(manifest.SplitPointer(ptr), k)...), true, "%s", msg)
		}
		return
	case "required":
		obj, _ := c.valueAt(ptr).(map[string]any)
		for _, k := range defs[def].required {
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

// defName extracts "Name" from ".../manifest.schema.json#/$defs/Name/...".
func defName(abs string) string {
	_, frag, ok := strings.Cut(abs, "#/$defs/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(frag, "/")
	return name
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
		b.WriteString(s)
	}
	return b.String()
}

// show quotes a document value for a message.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
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
