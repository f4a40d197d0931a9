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
	// One problem is reported once: where the semantic rules and the
	// schema (its patterns and lengths, which the semantic rules repeat in
	// more words) both report a value, the semantic message stays.
	fam, diags := ir.Build(c.file)
	semantic := make(map[string]bool, len(diags))
	for _, d := range diags {
		semantic[d.Path] = true
	}
	kept := c.diags[:0]
	for _, d := range c.diags {
		if !semantic[d.Path] {
			kept = append(kept, d)
		}
	}
	c.diags = append(kept, diags...)
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
