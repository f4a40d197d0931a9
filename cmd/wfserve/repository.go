package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// readManifest rereads one manifest for a reload (serve.Config.ReadManifest):
// its spec, or the validator's diagnostics as one error.
func readManifest(path string) (*spec.ModelInferenceSpec, error) {
	fams, diags, err := validate.Paths([]string{path})
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		var b strings.Builder
		validate.WriteDiagnostics(&b, "text", diags)
		return nil, fmt.Errorf("%d problem(s): %s", len(diags), strings.TrimSpace(b.String()))
	}
	if len(fams) != 1 {
		return nil, errors.New("no manifest found")
	}
	return fams[0].Spec, nil
}

// repositoryOf is the repository a manifest found at path belongs to:
// repo when path was found in it, else "" (a manifest given as an
// argument).
func repositoryOf(repo, path string) string {
	if repo == "" {
		return ""
	}
	rel, err := filepath.Rel(repo, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return repo
}
