package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Diagnostic is one problem in one manifest, at a 1-based line and column.
type Diagnostic struct {
	// File is the manifest's path as given by the user.
	File string `json:"file"`
	// Line is the 1-based line of the offending node.
	Line int `json:"line"`
	// Column is the 1-based column (in characters) of the offending node.
	Column int `json:"column"`
	// Path is the JSON pointer of the offending value ("" for the whole file).
	Path string `json:"path"`
	// Message says what is wrong and, when it can, what would be right.
	Message string `json:"message"`
}

// String returns "FILE:LINE:COL: message".
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Column, d.Message)
}

// SortDiagnostics orders diagnostics by file, position and message, and
// drops exact repeats.
func SortDiagnostics(ds []Diagnostic) []Diagnostic {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(ds)
}

// Diagnose returns a diagnostic for the value at pointer ptr; key selects
// the position of the mapping key that names it instead of the value. The
// message is Sprintf's (strings printed with %q are excerpts), and the
// path stops before a segment too long or odd to quote (safePointer).
func (f *File) Diagnose(ptr string, key bool, format string, args ...any) Diagnostic {
	var line, col int
	if key {
		line, col = f.KeyPosition(ptr)
	} else {
		line, col = f.Position(ptr)
	}
	return Diagnostic{File: f.Path, Line: line, Column: col, Path: safePointer(ptr), Message: Sprintf(format, args...)}
}

// Line returns the line of the value at ptr, for messages such as "first
// defined at line N".
func (f *File) Line(ptr string) int {
	l, _ := f.Position(ptr)
	return l
}

// ValueAt returns the document value at ptr, or nil.
func (f *File) ValueAt(ptr string) any {
	v := f.Value
	for _, seg := range SplitPointer(ptr) {
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

// Prune replaces the value at ptr with null and remembers it, so that
// decoding skips a value the schema check found to have the wrong type and
// later checks do not report it again (see Pruned).
func (f *File) Prune(ptr string) {
	segs := SplitPointer(ptr)
	if len(segs) == 0 {
		return
	}
	parent := f.ValueAt(JoinPointer(segs[:len(segs)-1]...))
	last := segs[len(segs)-1]
	switch x := parent.(type) {
	case map[string]any:
		x[last] = nil
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(x) {
			x[i] = nil
		}
	}
	if f.pruned == nil {
		f.pruned = map[string]bool{}
	}
	f.pruned[ptr] = true
}

// Pruned reports whether the value at ptr, or a value containing it, was
// pruned (see Prune).
func (f *File) Pruned(ptr string) bool {
	if len(f.pruned) == 0 {
		return false
	}
	for p := ptr; ; {
		if f.pruned[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// Release drops the parsed document (Value) and the positions of its
// nodes, keeping the path, the schema version and the decoded Spec: what
// generating code needs once a manifest is validated. Afterwards every
// position is 1:1. Validation of many manifests releases each valid one so
// that memory holds their specs, not their documents.
func (f *File) Release() {
	f.Value = nil
	f.pos = posNode{}
	f.pruned = nil
}
