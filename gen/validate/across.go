package validate

import (
	"fmt"

	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/gen/naming"
)

// identity is what of one valid manifest must be unique among the
// manifests validated or generated together: the family's names (its id
// and aliases: the registry rejects a name taken twice when the generated
// packages are imported) and its Go package (the output folder), each with
// the position to report.
type identity struct {
	path  string
	names []placed
	pkg   placed
}

// placed is a value with the pointer and position of its node.
type placed struct {
	value, ptr string
	line, col  int
}

// identify reads f's identity; f must be a valid, decoded manifest.
func identify(path string, f *manifest.File) identity {
	at := func(value, ptr string) placed {
		line, col := f.Position(ptr)
		return placed{value, ptr, line, col}
	}
	s := f.Spec
	id := identity{path: path, names: []placed{at(s.ModelFamilyID, "/model_family_id")}}
	for i, a := range s.Aliases {
		id.names = append(id.names, at(a, fmt.Sprintf("/aliases/%d", i)))
	}
	ptr := "/model_family_id"
	if s.GoPackage != "" {
		ptr = "/go_package"
	}
	id.pkg = at(PackageOf(f), ptr)
	return id
}

// PackageOf returns the Go package generated for a valid manifest: its
// go_package, or the name naming.Package derives from its family id.
func PackageOf(f *manifest.File) string {
	if f.Spec.GoPackage != "" {
		return f.Spec.GoPackage
	}
	return naming.Package(f.Spec.ModelFamilyID)
}

// Across checks what must be unique across valid manifests used together
// (as Paths returns them): family ids and aliases, and Go packages. The
// first manifest (in the order given) keeps a name or package; every later
// one that reuses it gets a diagnostic naming the first.
func Across(files []*manifest.File) []Diagnostic {
	ids := make([]identity, len(files))
	for i, f := range files {
		ids[i] = identify(f.Path, f)
	}
	var diags []Diagnostic
	for _, d := range across(ids) {
		diags = append(diags, d...)
	}
	return diags
}

// across returns the diagnostics of Across for each identity.
func across(ids []identity) [][]Diagnostic {
	diags := make([][]Diagnostic, len(ids))
	report := func(i int, p placed, format string, args ...any) {
		diags[i] = append(diags[i], Diagnostic{File: ids[i].path, Line: p.line, Column: p.col, Path: p.ptr, Message: fmt.Sprintf(format, args...)})
	}
	names := map[string]int{}
	pkgs := map[string]int{}
	for i, id := range ids {
		for _, n := range id.names {
			if first, ok := names[n.value]; ok && first != i {
				report(i, n, "family name %q is also used by %s; family ids and aliases must be unique across manifests", n.value, ids[first].path)
				continue
			}
			names[n.value] = i
		}
		if first, ok := pkgs[id.pkg.value]; ok {
			report(i, id.pkg, "package %s is also generated from %s; set go_package in one of them", id.pkg.value, ids[first].path)
			continue
		}
		pkgs[id.pkg.value] = i
	}
	return diags
}
