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
