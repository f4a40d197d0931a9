package infra

import (
	"context"
)

// Run runs fn under the shared inference policy (the seed's
// worldfoundry_inference_context): it installs the process policy if it is
// not installed yet (a no-op when installed, disabled by
// WORLDFOUNDRY_USE_CORE_INFRA=0 or inside a Disabled scope), then runs fn.
// Engines run every call under inference mode (no autograd) themselves, so
// there is no per-goroutine state to enter. An install error (a malformed
// WORLDFOUNDRY_* value) is returned without running fn; a process without an
// engine still runs fn, so CPU-only control planes do not fail.
func Run(ctx context.Context, fn func(context.Context) error) error {
	if _, err := Install(Options{}); err != nil {
		return err
	}
	return fn(ctx)
}

// Generator is a runner with a generate call, the shape WrapRunner wraps.
type Generator[Req, Res any] interface {
	// Generate runs one request.
	Generate(ctx context.Context, req Req) (Res, error)
}

// WrapRunner returns a runner whose Generate always runs inside Run (the
// seed's wrap_runner_for_worldfoundry_core). Like the seed it installs the
// process policy first (an install error is not lost: the wrapped
// Generate installs again and returns it), and it is idempotent: wrapping a
// wrapped runner returns it unchanged. A nil runner is returned as is.
//
// Unlike the seed, which replaces generate on the runner itself and
// returns the same instance, WrapRunner returns a new value: Go cannot
// replace a method of an existing value. The wrapper has only Generate;
// reach the runner's other methods through Unwrap.
func WrapRunner[Req, Res any](r Generator[Req, Res]) Generator[Req, Res] {
	_, _ = Install(Options{})
	if r == nil {
		return nil
	}
	if w, ok := r.(*wrapped[Req, Res]); ok {
		return w
	}
	return &wrapped[Req, Res]{inner: r}
}

// Unwrap returns the runner a WrapRunner result wraps, or r itself.
func Unwrap[Req, Res any](r Generator[Req, Res]) Generator[Req, Res] {
	if w, ok := r.(*wrapped[Req, Res]); ok {
		return w.inner
	}
	return r
}

type wrapped[Req, Res any] struct {
	inner Generator[Req, Res]
}

func (w *wrapped[Req, Res]) Generate(ctx context.Context, req Req) (Res, error) {
	var res Res
	err := Run(ctx, func(ctx context.Context) error {
		var err error
		res, err = w.inner.Generate(ctx, req)
		return err
	})
	return res, err
}
