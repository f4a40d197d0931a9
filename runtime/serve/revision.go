package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"
)

// Revisions: what a variant serves at a time (docs/operating.md, Versions).
//
// A variant (the protocol's model version: the address requests name,
// /v2/models/NAME/versions/VARIANT) serves one revision at a time: a
// client of its checkpoint, loaded and warmed up. A reload (poll mode, or
// an explicit load of a loaded model) makes a new revision beside the one
// serving, swaps it in at once, then retires the old one: the engine calls
// and sessions that pinned it finish on it, and it is freed when the last
// of them leaves. Every answer names the revision that computed it in its
// model_version, VARIANT@N: N counts the revisions of the variant made by
// this process, from 1 (the checkpoint's sha256 is logged and listed in
// the repository index with it). A request pins the revision when it gets
// its engine slot, so a request still queued at a swap runs on the new
// revision, and one batch never mixes two.

// revision is one loaded generation of a variant's checkpoint.
type revision struct {
	n       int64          // 1, 2, ... per variant
	version string         // VARIANT@N: what answers carry as model_version
	client  *client.Client // the revision's module
	digest  string         // sha256 of the checkpoint file it loaded ("" when unknown)
	fresh   bool           // New's, before Load: loaded on first use if ever
	// onFree, when set (under the model's control lock, before the
	// revision is retired), runs once it is freed: a reload under the
	// memory budget gives the revision's bytes back (reload.go).
	onFree func()

	mu      sync.Mutex
	refs    int           // calls and sessions that pinned it
	retired bool          // swapped out or unloaded: no new pin
	drained chan struct{} // closed once retired with no pin left
}

// newRevision returns revision n of variant vid over c.
func newRevision(vid string, n int64, c *client.Client, digest string) *revision {
	return &revision{n: n, version: revisionName(vid, n), client: c, digest: digest, drained: make(chan struct{})}
}

// revisionName is the model_version of revision n of variant vid.
func revisionName(vid string, n int64) string { return vid + "@" + strconv.FormatInt(n, 10) }

// enter pins r for one call or session; false once r is retired.
func (r *revision) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired {
		return false
	}
	r.refs++
	return true
}

// leave unpins r.
func (r *revision) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs--
	if r.refs == 0 && r.retired {
		close(r.drained)
	}
}

// retire refuses new pins; the channel it returns is closed once the last
// pin has left.
func (r *revision) retire() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.retired {
		r.retired = true
		if r.refs == 0 {
			close(r.drained)
		}
	}
	return r.drained
}

// errNotServing refuses a call that got its engine slot when its variant
// served no revision (unloaded meanwhile): 503.
func errNotServing(v *variant) error {
	return withStatus(http.StatusServiceUnavailable, "version %q was unloaded while the request waited", v.id)
}

// pin returns the revision v serves now, pinned (leave it when the call is
// done), or a 503 when v serves none.
func (v *variant) pin() (*revision, error) {
	for {
		r := v.rev.Load()
		if r == nil {
			return nil, errNotServing(v)
		}
		if r.enter() {
			return r, nil
		}
		// Swapped out between the load and the pin: the next is in place.
	}
}

// Versions kept side by side (version_policy latest: N). A variant whose
// family's policy keeps N > 1 revisions keeps the N-1 it served before the
// newest in kept, newest first: each still answers the requests that name
// it (VARIANT@N: the REST path's version, gRPC's model_version), while a
// request naming the variant, or no version, gets the newest. A reload
// beyond N retires the oldest kept (drained, then freed).

// revisionKey is the context key of the revision a request names.
type revisionKey struct{}

// withRevision returns ctx carrying revision n (0: the newest) as the one
// its request names.
func withRevision(ctx context.Context, n int64) context.Context {
	if n == 0 {
		return ctx
	}
	return context.WithValue(ctx, revisionKey{}, n)
}

// revisionOf returns the revision ctx's request names, 0 for the newest.
func revisionOf(ctx context.Context) int64 {
	n, _ := ctx.Value(revisionKey{}).(int64)
	return n
}

// keptRevisions returns the older revisions v serves beside its newest,
// newest first.
func (v *variant) keptRevisions() []*revision {
	if p := v.kept.Load(); p != nil {
		return *p
	}
	return nil
}

// versions returns the versions m answers to, as its metadata and the
// health service list them: each variant's id (its newest revision), then
// the older revisions its version policy keeps beside the newest
// (VARIANT@N, newest first), variant by variant in the manifest's order.
func (m *model) versions() []string {
	var out []string
	for _, v := range m.sortedVariants() {
		out = append(out, v.id)
		for _, r := range v.keptRevisions() {
			out = append(out, r.version)
		}
	}
	return out
}

// metadata returns m's model metadata (oip.Model.Metadata) with the
// versions it serves now (versions).
func (m *model) metadata() oip.ModelMetadata {
	md := m.oip.Metadata()
	md.Versions = m.versions()
	return md
}

// serves reports whether v serves revision n now (the newest or a kept
// one).
func (v *variant) serves(n int64) bool {
	if r := v.rev.Load(); r != nil && r.n == n && !r.fresh {
		return true
	}
	return slices.ContainsFunc(v.keptRevisions(), func(r *revision) bool { return r.n == n })
}

// errNoRevision refuses a request naming revision n of v, which v does
// not serve (never did, or retired by the version policy): 404, naming
// the versions v serves.
func errNoRevision(v *variant, n int64) error {
	var served []string
	if r := v.rev.Load(); r != nil && !r.fresh && v.loaded.Load() {
		served = append(served, fmt.Sprintf("%s (the newest, also as %q)", r.version, v.id))
	}
	for _, r := range v.keptRevisions() {
		served = append(served, r.version)
	}
	what := "none: it is not loaded"
	if len(served) > 0 {
		what = strings.Join(served, ", ")
	}
	return withStatus(http.StatusNotFound, "model %q has no version %q (not served, or retired by its version policy); versions served: %s",
		v.family, revisionName(v.id, n), what)
}

// pinAt pins revision n of v (0: the newest, as pin) for one call or
// session; 404 when v does not serve it (retired meanwhile).
func (v *variant) pinAt(n int64) (*revision, error) {
	if n == 0 {
		return v.pin()
	}
	for {
		r := v.rev.Load()
		if r == nil || r.n != n {
			break
		}
		if r.enter() {
			return r, nil
		}
	}
	// A kept one; the one serving when the lookup was made stays in
	// kept until it is retired (the newest is swapped in after it has
	// joined kept).
	for _, r := range v.keptRevisions() {
		if r.n == n && r.enter() {
			return r, nil
		}
	}
	return nil, errNoRevision(v, n)
}

// swap makes r the revision v serves and returns the one it replaces (nil
// for none).
func (v *variant) swap(r *revision) *revision { return v.rev.Swap(r) }

// retire takes r, swapped out of m's variant, out of service: it is
// freed (its client closed, the engine's caches released) once the calls
// and sessions that pinned it have left. The channel it returns is
// closed then.
func (s *Server) retire(m *model, r *revision) <-chan struct{} {
	drained := r.retire()
	s.drainingRevs.Add(1)
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		<-drained
		r.client.Close()
		if _, err := client.ReleaseCaches(); err != nil {
			s.cfg.Logger.Warn("releasing caches", slog.String("error", err.Error()))
		}
		if r.onFree != nil {
			r.onFree()
		}
		s.drainingRevs.Add(-1)
		if !r.fresh { // New's revision, replaced at the first load, held nothing worth a record
			s.cfg.Logger.Info("revision freed", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", r.version))
		}
	}()
	return freed
}

// describe names a revision for logs and the repository index.
func (r *revision) describe() string {
	if r.digest == "" {
		return r.version
	}
	return fmt.Sprintf("%s (checkpoint sha256 %s)", r.version, r.digest)
}
