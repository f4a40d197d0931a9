// Package templates holds the text/template files wfgen renders its
// non-Go output from (the Markdown reference page of each model family).
// They are embedded, so the wfgen binary needs no files at run time.
package templates

import "embed"

// FS holds every *.tmpl file of this folder.
//
//go:embed *.tmpl
var FS embed.FS
