//go:build cgo

package validate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/contract"
	_ "github.com/worldfoundry/wfgen/runtime/torch"
)

// wfgen validate finds, in pure Go, exactly the problems the load finds
// with libtorch: the same check (contract.CheckTask) on the signatures the
// archive's code declares and on the schemas of the module libtorch loaded.
func TestCheckpointContractMatchesLoad(t *testing.T) {
	t.Setenv("WORLDFOUNDRY_CHECKPOINT_ROOT", "")
	dir := t.TempDir()
	if err := tinymodels.BuildEncoder(filepath.Join(dir, "encoder.pt")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "encoder.yaml")
	if err := os.WriteFile(path, []byte(`schema_version: 1
model_family_id: encoder
variants:
  - variant_id: default
    call_kwargs: {scale: 2}
    checkpoints: [{role: model, uri: encoder.pt}]
tasks:
  - task_id: default
    inputs:
      - {field_id: tokens, kind: int_list, required: true}
      - {field_id: normalize, kind: int, default: 1}
    outputs:
      - {artifact_id: text, kind: text}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, diags, err := File(path)
	if err != nil {
		t.Fatal(err)
	}
	var validated []string
	for _, d := range diags {
		_, p, _ := strings.Cut(d.Message, "checkpoint encoder.pt: ")
		validated = append(validated, p)
	}

	// The same manifest, valid but for the checkpoint, loaded.
	fam, bdiags := Bytes(path, mustRead(t, path))
	if len(bdiags) > 0 {
		t.Fatal(bdiags)
	}
	c, err := client.New(fam.Spec, client.WithManifestDir(dir), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Load()
	var me *contract.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("load: want a *contract.MismatchError, got %v", err)
	}
	var loaded []string
	for _, p := range me.Problems {
		loaded = append(loaded, p.String())
	}
	// Diagnostics come in manifest order, problems in the check's.
	slices.Sort(validated)
	slices.Sort(loaded)
	if len(loaded) != 4 || !slices.Equal(validated, loaded) {
		t.Errorf("wfgen validate found:\n%s\nthe load found:\n%s", strings.Join(validated, "\n"), strings.Join(loaded, "\n"))
	}
}
