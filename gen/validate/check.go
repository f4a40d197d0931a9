package validate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/worldfoundry/wfgen/gen/manifest"
)

// checker collects the diagnostics of one file.
type checker struct {
	file   *manifest.File
	path   string
	diags  []Diagnostic
	pruned map[string]bool // pointers of values removed after a schema type error
}

// run validates the parsed file: schema, decode, semantic checks.
func (c *checker) run() {
	c.schemaCheck()
	if _, ok := c.file.Value.(map[string]any); !ok {
		return // the schema check reported that the manifest is not a mapping
	}
	schemaOK := len(c.diags) == 0
	if err := c.file.Decode(); err != nil && schemaOK {
		c.report("", false, "cannot decode the manifest: %v", err)
		return
	}
	c.semantic()
}

// report adds a diagnostic for the value at ptr; key selects the position
// of the mapping key instead of the value.
func (c *checker) report(ptr string, key bool, format string, args ...any) {
	var line, col int
	if key {
		line, col = c.file.KeyPosition(ptr)
	} else {
		line, col = c.file.Position(ptr)
	}
	c.diags = append(c.diags, Diagnostic{File: c.path, Line: line, Column: col, Path: ptr, Message: fmt.Sprintf(format, args...)})
}

// line returns the line of the value at ptr, for "first defined at line N".
func (c *checker) line(ptr string) int {
	l, _ := c.file.Position(ptr)
	return l
}

// valueAt returns the document value at ptr, or nil.
func (c *checker) valueAt(ptr string) any {
	v := c.file.Value
	for _, seg := range manifest.SplitPointer(ptr) {
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// prune replaces the value at ptr with null, so that decoding skips it.
func (c *checker) prune(ptr string) {
	segs := manifest.SplitPointer(ptr)
	if len(segs) == 0 {
		return
	}
	parent := c.valueAt(manifest.JoinPointer(segs[:len(segs)-1]...))
	last := segs[len(segs)-1]
	switch x := parent.(type) {
	case map[string]any:
		x[last] = nil
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(x) {
			x[i] = nil
		}
	}
	if c.pruned == nil {
		c.pruned = map[string]bool{}
	}
	c.pruned[ptr] = true
}

// isPruned reports whether the value at ptr, or a value containing it, was
// already reported as having the wrong type.
func (c *checker) isPruned(ptr string) bool {
	if len(c.pruned) == 0 {
		return false
	}
	for p := ptr; ; {
		if c.pruned[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// ptr builds a pointer from segments of strings and ints.
func ptr(segs ...any) string {
	s := make([]string, len(segs))
	for i, x := range segs {
		switch v := x.(type) {
		case string:
			s[i] = v
		case int:
			s[i] = strconv.Itoa(v)
		}
	}
	return manifest.JoinPointer(s...)
}
