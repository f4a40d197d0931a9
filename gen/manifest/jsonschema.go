package manifest

import (
	"fmt"
	"net/url"
	"strings"
)

// JSONSchemaError is what reading a JSON Schema document as a manifest
// gives: the file's top-level "$schema" names a dialect of json-schema.org
// ("https://json-schema.org/draft/2020-12/schema", what "wfgen schema"
// writes), so it describes documents instead of being one. A manifest's
// own optional "$schema" links to the manifest schema, never to
// json-schema.org.
type JSONSchemaError struct {
	// Path is the file's path as given.
	Path string
	// Schema is the value of its "$schema".
	Schema string
	// Line and Column are where its "$schema" key is written.
	Line, Column int
}

// Error says what the file is.
func (e *JSONSchemaError) Error() string { return e.Path + " is " + e.What() }

// What is Error without the path: "a JSON Schema document ("$schema":
// "..."), not a manifest".
func (e *JSONSchemaError) What() string {
	return fmt.Sprintf("a JSON Schema document (\"$schema\": %s), not a manifest", Sprintf("%q", e.Schema))
}

// JSONSchema returns a *JSONSchemaError when f is a JSON Schema document
// (see JSONSchemaError), else nil. This is the one rule by which wfgen
// tells a schema from a manifest.
func (f *File) JSONSchema() *JSONSchemaError {
	m, ok := f.Value.(map[string]any)
	if !ok {
		return nil
	}
	s, ok := m["$schema"].(string)
	if !ok || !IsJSONSchemaDialect(s) {
		return nil
	}
	line, col := f.KeyPosition("/$schema")
	return &JSONSchemaError{Path: f.Path, Schema: s, Line: line, Column: col}
}

// IsJSONSchemaDialect reports whether uri names a JSON Schema dialect: an
// http or https URL on json-schema.org (or www.json-schema.org).
func IsJSONSchemaDialect(uri string) bool {
	u, err := url.Parse(strings.TrimSpace(uri))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "json-schema.org" || h == "www.json-schema.org"
}
