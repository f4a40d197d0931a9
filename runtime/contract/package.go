package contract

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/worldfoundry/wfgen/runtime/engine"
)

// ReadCallSpec reads the call spec an AOTInductor package (.pt2) was
// exported for, as examples/aoti/export.py records it in the package's
// metadata (key engine.CallSpecKey), without libtorch: the metadata file
// data/aotinductor/MODEL/*_metadata.json (at the zip's top or under one
// folder; MODEL "model" when the package holds several) read up to
// MaxCodeBytes, decoded (engine.DecodeCallSpec) and checked
// (engine.CallSpec.Check). The engine checks the same spec against the
// compiled model's own inputs and outputs when it loads the package.
func ReadCallSpec(r io.ReaderAt, size int64) (engine.CallSpec, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return engine.CallSpec{}, fmt.Errorf("not an AOTInductor package (a zip file): %w", err)
	}
	found := map[string][]*zip.File{} // by model folder
	var models []string
	for _, f := range zr.File {
		parts := strings.Split(f.Name, "/")
		if len(parts) == 5 && parts[1] == "data" && parts[2] == "aotinductor" {
			parts = parts[1:]
		}
		if len(parts) != 4 || parts[0] != "data" || parts[1] != "aotinductor" || !strings.HasSuffix(parts[3], "_metadata.json") {
			continue
		}
		if _, ok := found[parts[2]]; !ok {
			models = append(models, parts[2])
		}
		found[parts[2]] = append(found[parts[2]], f)
	}
	model := "model"
	if len(models) == 1 {
		model = models[0]
	}
	files := found[model]
	switch {
	case len(models) == 0:
		return engine.CallSpec{}, errors.New("not an AOTInductor package: no data/aotinductor/<model>/<name>_metadata.json entry")
	case len(files) == 0:
		slices.Sort(models) // the same message whatever the order of the zip's entries
		return engine.CallSpec{}, fmt.Errorf("the package holds the models %s, none of them %q", strings.Join(models, ", "), model)
	case len(files) > 1:
		return engine.CallSpec{}, fmt.Errorf("model %s of the package has %d metadata files (%s, %s)", model, len(files), files[0].Name, files[1].Name)
	}
	f := files[0]
	data, err := readEntry(f)
	if err != nil {
		return engine.CallSpec{}, err
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(data, &meta); err != nil {
		return engine.CallSpec{}, fmt.Errorf("%s: %w", path.Base(f.Name), err)
	}
	var recorded string
	if raw, ok := meta[engine.CallSpecKey]; ok {
		if err := json.Unmarshal(raw, &recorded); err != nil {
			return engine.CallSpec{}, fmt.Errorf("%s: %s is not a string: %w", path.Base(f.Name), engine.CallSpecKey, err)
		}
	}
	spec, err := engine.DecodeCallSpec(recorded)
	if err != nil {
		return engine.CallSpec{}, err
	}
	return spec, spec.Check()
}
