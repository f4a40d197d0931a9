package validate

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/worldfoundry/wfgen/gen/ir"
	"github.com/worldfoundry/wfgen/gen/manifest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/contract"
	"github.com/worldfoundry/wfgen/runtime/engine"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Checkpoints checks a valid family against the model checkpoints that are
// at hand, in pure Go, as a load would (DESIGN.md, "The checkpoint
// contract"): for each variant whose "model" checkpoint resolves to a file
// the way runtime/client finds it (client.ResolveCheckpoint: the
// manifest's folder, then $WORLDFOUNDRY_CHECKPOINT_ROOT), every task is
// checked against the method signatures the TorchScript archive's code
// declares (contract.CheckTask, the check a load runs) or against the
// call spec of an AOTInductor package (contract.CheckCallSpec). Each
// problem is a diagnostic at the field, artifact, key or task it concerns.
// A checkpoint that is not at hand (a remote URI, a file not downloaded
// yet) is not checked; one that cannot be read, or whose format is not the
// one declared, is a diagnostic at its uri or format.
func Checkpoints(fam *ir.Family) []Diagnostic {
	if fam == nil || fam.File == nil || fam.Spec == nil {
		return nil
	}
	c := &checker{file: fam.File, path: fam.File.Path}
	for vi := range fam.Spec.Variants {
		c.variantCheckpoint(fam.Spec, vi)
	}
	return manifest.SortDiagnostics(c.diags)
}

// variantCheckpoint checks the tasks of s through variant vi against its
// model checkpoint, when that is at hand.
func (c *checker) variantCheckpoint(s *spec.ModelInferenceSpec, vi int) {
	v := &s.Variants[vi]
	ci := -1
	for i := range v.Checkpoints {
		if v.Checkpoints[i].Role == "model" {
			ci = i
			break
		}
	}
	if ci < 0 {
		return
	}
	ref := v.Checkpoints[ci]
	at := manifest.Pointer("variants", vi, "checkpoints", ci)
	path, err := client.ResolveCheckpoint(ref, c.file.Dir, "")
	if err != nil {
		return // not at hand: nothing to check
	}
	format, err := engine.ResolveFormat(path, ref.Format)
	if err != nil {
		c.report(at+"/format", false, "variant %q checkpoint %s: %v", v.VariantID, path, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		c.report(at+"/uri", false, "variant %q checkpoint %s: %v", v.VariantID, path, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		c.report(at+"/uri", false, "variant %q checkpoint %s: %v", v.VariantID, path, err)
		return
	}
	where := fmt.Sprintf("checkpoint %s", ref.URI)
	if format == spec.FormatAOTInductor {
		cs, err := contract.ReadCallSpec(f, st.Size())
		if err != nil {
			c.report(at+"/uri", false, "variant %q checkpoint %s: %v", v.VariantID, path, err)
			return
		}
		for ti := range s.Tasks {
			c.taskMismatch(ti, vi, where, contract.CheckCallSpec(&s.Tasks[ti], v, cs))
		}
		return
	}
	sigs, err := contract.ReadSignatures(f, st.Size())
	if err != nil {
		c.report(at+"/uri", false, "variant %q checkpoint %s: %v", v.VariantID, path, err)
		return
	}
	returns := contract.ReadReturns(f, st.Size())
	for ti := range s.Tasks {
		c.taskMismatch(ti, vi, where, contract.CheckTask(&s.Tasks[ti], v, sigs, returns))
	}
}

// taskMismatch reports the problems of task ti (run through variant vi)
// with the checkpoint (where), each where it lies in the manifest.
func (c *checker) taskMismatch(ti, vi int, where string, err error) {
	if err == nil {
		return
	}
	task := manifest.Pointer("tasks", ti)
	var me *contract.MismatchError
	if !errors.As(err, &me) {
		c.report(task+"/method", false, "task %q does not match %s: %v", c.file.Spec.Tasks[ti].TaskID, where, err)
		return
	}
	for i, p := range me.Problems {
		rel, inVariant := me.Where(i)
		at := task
		if inVariant {
			at = manifest.Pointer("variants", vi)
		}
		if rel != "" {
			at += "/" + rel
		}
		// A kwargs or dims entry is reported at its key, the name that
		// disagrees.
		key := strings.Count(rel, "/") == 1 && (strings.HasPrefix(rel, "call_kwargs/") || strings.HasPrefix(rel, "default_call_kwargs/") || strings.HasPrefix(rel, "dims/"))
		c.report(at, key, "task %q does not match method %s of %s: %s", me.Task, me.Method, where, p)
	}
}
