package ir

import (
	"strconv"

	"github.com/worldfoundry/wfgen/gen/manifest"
)

// Identity is what of one family must be unique among the families used
// together: its names (id and aliases: the registry rejects a name taken
// twice when the generated packages are imported together) and its Go
// package (an output folder), each with the diagnostic to report when it
// is taken. It is small, so a validator can keep it for many files without
// keeping the files.
type Identity struct {
	// Names are the family id and aliases, each placed.
	Names []Placed
	// Package is the Go package, placed at go_package or model_family_id.
	Package Placed
}

// Placed is a value with a diagnostic that points at it (Message unset).
type Placed struct {
	// Value is the name or package.
	Value string
	// At locates the value.
	At Diagnostic
}

// Identity returns the family's identity (located when the family was
// built, so it stays located after manifest.File.Release).
func (f *Family) Identity() Identity { return f.identity }

// identify computes the family's identity.
func (f *Family) identify() Identity {
	s := f.Spec
	at := func(v, p string) Placed { return Placed{Value: v, At: f.File.Diagnose(p, false, "")} }
	id := Identity{Names: []Placed{at(s.ModelFamilyID, "/model_family_id")}}
	for i, a := range s.Aliases {
		id.Names = append(id.Names, at(a, manifest.Pointer("aliases", i)))
	}
	p := "/model_family_id"
	if s.GoPackage != "" {
		p = "/go_package"
	}
	id.Package = at(f.Package, p)
	return id
}

// Across checks the identities of families used together (in the order
// given): the first family keeps a name or package; every later one that
// reuses it gets a diagnostic naming the first's file. The result has one
// entry per identity.
func Across(ids []Identity) [][]Diagnostic {
	diags := make([][]Diagnostic, len(ids))
	report := func(i int, p Placed, msg string) {
		d := p.At
		d.Message = msg
		diags[i] = append(diags[i], d)
	}
	names := map[string]int{}
	pkgs := map[string]int{}
	for i, id := range ids {
		for _, n := range id.Names {
			if first, ok := names[n.Value]; ok && first != i {
				report(i, n, "family name "+quote(n.Value)+" is also used by "+ids[first].Package.At.File+"; family ids and aliases must be unique across manifests")
				continue
			}
			names[n.Value] = i
		}
		if first, ok := pkgs[id.Package.Value]; ok {
			report(i, id.Package, "package "+id.Package.Value+" is also generated from "+ids[first].Package.At.File+"; set go_package in one of them")
			continue
		}
		pkgs[id.Package.Value] = i
	}
	return diags
}

func quote(s string) string { return strconv.Quote(s) }
