package infra

import (
	"context"
	"errors"
	"testing"
)

type echo struct{ calls int }

func (e *echo) Generate(_ context.Context, req string) (string, error) {
	e.calls++
	if !CurrentState().Installed && !CurrentState().DisabledByEnv {
		return "", errors.New("generate ran outside the inference policy")
	}
	return "out:" + req, nil
}

func TestWrapRunnerInstallsAndIsIdempotent(t *testing.T) {
	t.Cleanup(func() { _, _ = Uninstall() })
	_, _ = Uninstall()
	inner := &echo{}
	w := WrapRunner[string, string](inner)
	if again := WrapRunner(w); again != w {
		t.Fatal("wrapping a wrapped runner made a new wrapper")
	}
	if Unwrap(w) != Generator[string, string](inner) {
		t.Fatal("Unwrap did not return the inner runner")
	}
	got, err := w.Generate(context.Background(), "x")
	if err != nil || got != "out:x" {
		t.Fatalf("Generate = %q, %v", got, err)
	}
	if !CurrentState().Installed {
		t.Fatal("policy not installed after a wrapped Generate")
	}
	if inner.calls != 1 {
		t.Fatalf("inner ran %d times", inner.calls)
	}
}

func TestRunReturnsInstallErrorWithoutRunning(t *testing.T) {
	t.Cleanup(func() { _, _ = Uninstall() })
	_, _ = Uninstall()
	t.Setenv(EnvMatmulPrecision, "extreme")
	ran := false
	err := Run(context.Background(), func(context.Context) error { ran = true; return nil })
	if err == nil || ran {
		t.Fatalf("Run with a malformed %s: err %v, ran %v", EnvMatmulPrecision, err, ran)
	}
}

// resettable is a runner with a method besides Generate.
type resettable struct {
	echo
	resets int
}

func (r *resettable) Reset() { r.resets++ }

// TestWrapRunnerSeedDifferences checks what WrapRunner shares with the
// seed (it installs the policy at wrap time) and the documented
// differences: the result is a new value, not the runner, and the runner's
// other methods are reached through Unwrap.
func TestWrapRunnerSeedDifferences(t *testing.T) {
	t.Cleanup(func() { _, _ = Uninstall() })
	_, _ = Uninstall()
	inner := &resettable{}
	w := WrapRunner[string, string](inner)
	if !CurrentState().Installed {
		t.Error("WrapRunner did not install the policy (the seed installs before wrapping)")
	}
	if w == Generator[string, string](inner) {
		t.Error("WrapRunner returned the runner itself; docs say it returns a wrapper")
	}
	if _, ok := w.(interface{ Reset() }); ok {
		t.Error("the wrapper has Reset; docs say it has only Generate")
	}
	r, ok := Unwrap(w).(interface{ Reset() })
	if !ok {
		t.Fatal("Unwrap does not give back a runner with Reset")
	}
	r.Reset()
	if inner.resets != 1 {
		t.Errorf("Reset through Unwrap reached the runner %d times", inner.resets)
	}
}

// TestCurrentStateIsASnapshot checks the documented difference from the
// seed's inference_infra_state: the returned State does not follow later
// installs, and changing it changes nothing.
func TestCurrentStateIsASnapshot(t *testing.T) {
	p := NewPolicy(nil, vars(nil))
	before := p.State()
	if _, err := p.Install(Options{AttentionBackend: "math"}); err != nil {
		t.Fatal(err)
	}
	if before.Installed || before.AttentionBackend != AttentionAuto {
		t.Errorf("an earlier State changed with Install: %+v", before)
	}
	now := p.State()
	if !now.Installed || now.AttentionBackend != AttentionMath {
		t.Fatalf("State after Install = %+v", now)
	}
	now.AttentionBackend, now.Installed = AttentionFlash, false
	if st := p.State(); !st.Installed || st.AttentionBackend != AttentionMath {
		t.Errorf("changing a returned State changed the policy: %+v", st)
	}
}
