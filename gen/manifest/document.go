// Package manifest loads model family manifests (YAML or JSON, one family per
// file) into the runtime spec types while keeping the line and column of
// every node, so that every later error can name FILE:LINE:COL.
//
// Loading is bounded: a file larger than MaxFileSize, a binary or non-UTF-8
// file, nesting deeper than MaxDepth or more than MaxNodes nodes after YAML
// alias expansion is rejected with an error that names the limit.
//
// Parse only reads the file into a JSON-compatible value and a node tree;
// package validate checks that value against the JSON Schema and the
// semantic rules, and Decode turns it into the typed spec.
package manifest

import (
	"encoding/json"
	"strconv"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// SchemaVersion is the manifest format version this wfgen reads and writes.
const SchemaVersion = 1

// Document is a model family manifest: the runtime spec plus the keys that
// only exist in manifest files. Its JSON Schema is the manifest schema.
type Document struct {
	// Schema is an optional link to the JSON Schema, for editors of JSON
	// manifests (YAML manifests use a "# yaml-language-server: $schema=..."
	// comment instead). wfgen ignores it.
	Schema string `json:"$schema,omitempty"`
	// SchemaVersion is the manifest format version; this wfgen reads version 1.
	SchemaVersion int `json:"schema_version" jsonschema:"required,minimum=1"`

	spec.ModelInferenceSpec
}

// MarshalJSON writes the manifest's own keys, then the spec's. The spec's
// JSON methods would otherwise be promoted from the embedded field and
// write (or read) the spec alone.
func (d Document) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(d.ModelInferenceSpec)
	if err != nil {
		return nil, err
	}
	b := []byte{'{'}
	if d.Schema != "" {
		b = append(b, `"$schema":`...)
		b = strconv.AppendQuote(b, d.Schema)
		b = append(b, ',')
	}
	b = append(b, `"schema_version":`...)
	b = strconv.AppendInt(b, int64(d.SchemaVersion), 10)
	if len(body) > 2 {
		b = append(b, ',')
		return append(b, body[1:]...), nil
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the manifest's own keys and the spec's (with the
// spec's defaults).
func (d *Document) UnmarshalJSON(b []byte) error {
	var head struct {
		Schema        string `json:"$schema"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &d.ModelInferenceSpec); err != nil {
		return err
	}
	d.Schema, d.SchemaVersion = head.Schema, head.SchemaVersion
	return nil
}
