package validate

import (
	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
)

// checker collects the diagnostics of one file.
type checker struct {
	file  *manifest.File
	path  string
	diags []Diagnostic
	fam   *ir.Family
}

// run validates the parsed file: schema, decode, then the semantic rules
// and name resolution of ir.Build.
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
	// A value the schema check already reported is not reported again.
	seen := make(map[string]bool, len(c.diags))
	for _, d := range c.diags {
		seen[d.Path] = true
	}
	fam, diags := ir.Build(c.file)
	for _, d := range diags {
		if !seen[d.Path] {
			c.diags = append(c.diags, d)
		}
	}
	if len(c.diags) == 0 {
		c.fam = fam
	}
}

// report adds a diagnostic for the value at ptr; key selects the position
// of the mapping key instead of the value.
func (c *checker) report(ptr string, key bool, format string, args ...any) {
	d := c.file.Diagnose(ptr, key, format, args...)
	d.File = c.path
	c.diags = append(c.diags, d)
}

// valueAt returns the document value at ptr, or nil.
func (c *checker) valueAt(ptr string) any { return c.file.ValueAt(ptr) }

// prune nulls out the value at ptr (see manifest.File.Prune).
func (c *checker) prune(ptr string) { c.file.Prune(ptr) }
