package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// TestRegistry registers engines one by one (the registry is the test
// binary's, and engines cannot be unregistered) and checks lookup by name,
// the default engine and the choice of an engine by checkpoint format.
func TestRegistry(t *testing.T) {
	if _, err := engine.DefaultEngine(); !errors.Is(err, engine.ErrNoEngine) {
		t.Fatalf("no engine: DefaultEngine: %v", err)
	}
	if _, err := engine.Lookup("libtorch"); !errors.Is(err, engine.ErrNoEngine) {
		t.Fatalf("no engine: Lookup: %v", err)
	}
	if _, err := engine.ForFormat(spec.FormatTorchScript); !errors.Is(err, engine.ErrNoEngine) {
		t.Fatalf("no engine: ForFormat: %v", err)
	}

	ts := []spec.CheckpointFormat{spec.FormatTorchScript}
	alpha := &enginetest.Engine{Label: "alpha", Reads: ts}
	engine.Register("alpha", alpha)
	if e, err := engine.DefaultEngine(); err != nil || e != alpha {
		t.Fatalf("the only engine is the default: %v, %v", e, err)
	}
	if e, err := engine.Lookup("alpha"); err != nil || e != alpha {
		t.Fatalf("Lookup(alpha): %v, %v", e, err)
	}
	if _, err := engine.Lookup("beta"); err == nil || err.Error() != `no engine "beta" is registered (registered: alpha)` {
		t.Fatalf("Lookup(beta): %v", err)
	}
	_, err := engine.ForFormat(spec.FormatAOTInductor)
	var ferr *engine.FormatError
	if !errors.As(err, &ferr) || ferr.Format != spec.FormatAOTInductor ||
		err.Error() != "no engine reads an AOTInductor package (format aotinductor): alpha 0.1 reads torchscript" {
		t.Fatalf("no engine reads aotinductor: %v", err)
	}
	for name, e := range map[string]engine.Engine{"alpha": &enginetest.Engine{}, "nil": nil} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			engine.Register(name, e)
		}()
	}

	beta := &enginetest.Engine{Label: "beta", Release: "2.0", Reads: []spec.CheckpointFormat{spec.FormatAOTInductor}}
	engine.Register("beta", beta)
	if _, err := engine.DefaultEngine(); err == nil || !strings.Contains(err.Error(), `engines alpha, beta are registered and none is "libtorch"`) {
		t.Fatalf("two engines, none the default: %v", err)
	}
	for f, want := range map[spec.CheckpointFormat]engine.Engine{spec.FormatTorchScript: alpha, spec.FormatAOTInductor: beta} {
		if e, err := engine.ForFormat(f); err != nil || e != want {
			t.Errorf("ForFormat(%s) = %v, %v; want %s", f, e, err, want.Name())
		}
	}

	lt := &enginetest.Engine{Label: "libtorch", Release: "1.13.1", Reads: ts}
	engine.Register(engine.DefaultName, lt)
	if e, err := engine.DefaultEngine(); err != nil || e != lt {
		t.Fatalf("libtorch is the default among several: %v, %v", e, err)
	}
	for f, want := range map[spec.CheckpointFormat]engine.Engine{spec.FormatTorchScript: lt, spec.FormatAOTInductor: beta} {
		if e, err := engine.ForFormat(f); err != nil || e != want {
			t.Errorf("ForFormat(%s) = %v, %v; want %s (the default when it reads the format)", f, e, err, want.Name())
		}
	}
	if got := engine.Engines(); !slices.Equal(got, []string{"alpha", "beta", "libtorch"}) {
		t.Errorf("Engines() = %v", got)
	}
	_, err = engine.ForFormat("onnx")
	if err == nil || err.Error() != `no engine reads format "onnx" (format onnx): alpha 0.1 reads torchscript; beta 2.0 reads aotinductor; libtorch 1.13.1 reads torchscript` {
		t.Errorf("no engine reads onnx: %v", err)
	}
	if err := engine.CheckReads(beta, spec.FormatAOTInductor); err != nil {
		t.Errorf("beta reads aotinductor: %v", err)
	}
	if err := engine.CheckReads(lt, spec.FormatAOTInductor); err == nil || err.Error() != "no engine reads an AOTInductor package (format aotinductor): libtorch 1.13.1 reads torchscript" {
		t.Errorf("libtorch 1.13 and a package: %v", err)
	}
}
