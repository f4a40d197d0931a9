package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/spec"
)

// Reloads without downtime (docs/operating.md). A reload rereads the
// model's manifest (Config.ReadManifest), checks that only its variants'
// checkpoints changed, and, for each loaded variant whose checkpoint file
// (by path and sha256 of its contents) changed, makes a new revision
// beside the serving one — the file verified (the manifest's sha256, the
// repository's bounds), loaded, its contract checked against the manifest,
// warmed up — and swaps it in; the old revision drains and is freed
// (revision.go). A reload that fails leaves the serving revision as it is
// and says why: the log, wfserve_model_reloads_total{result="failed"}, the
// repository index's reason, and a load call's answer.

// source is where a model's revisions come from: its spec (as last read),
// the client options its variants are made with, and the manifest file.
type source struct {
	spec       *spec.ModelInferenceSpec
	options    []client.Option
	manifest   string
	repository string // Family.Repository
}

// reloadCounts count a variant's reloads.
type reloadCounts struct{ ok, failed atomic.Int64 }

// newClient returns a client of variant vid of src (not loaded), its
// checkpoint at path when path is not "" (else where src's options and
// manifest say); a call of many sessions' steps holds one of sl.
func (s *Server) newClient(src source, vid, path string, sl slots) (*client.Client, error) {
	family := src.spec.ModelFamilyID
	batches := func(b client.SessionBatch) {
		if t := s.tel; t != nil && t.m != nil {
			t.m.sessionBatch.WithLabelValues(family, b.Task).Observe(float64(b.Sessions))
		}
	}
	opts := append(append([]client.Option{}, src.options...), client.WithVariant(vid), client.WithSessionGate(sl.acquire), client.WithSessionBatches(batches))
	if path != "" {
		opts = append(opts, client.WithCheckpointPath(path))
	}
	if s.cfg.Batching && s.cfg.BatchInvariant {
		opts = append(opts, client.WithBatchInvariant())
	}
	return client.New(src.spec, opts...)
}

// checkpointFile resolves variant vid's model checkpoint as its client
// would, and, with a repository, checks that it (symbolic links followed)
// and the manifest lie inside it. "" with no error: the variant has no
// model checkpoint or its client is given a path (its load says).
func (s *Server) checkpointFile(src source, vid string) (string, error) {
	var o client.Options
	for _, f := range src.options {
		f(&o)
	}
	v, err := src.spec.Variant(vid)
	if err != nil {
		return "", err
	}
	path := o.CheckpointPath
	if path == "" {
		for _, ck := range v.Checkpoints {
			if ck.Role == "model" {
				if path, err = client.ResolveCheckpoint(ck, o.ManifestDir, o.CheckpointRoot); err != nil {
					return "", err
				}
				break
			}
		}
	}
	if src.repository == "" {
		return path, nil
	}
	if src.manifest != "" {
		if _, err := inRepository(src.repository, src.manifest); err != nil {
			return "", err
		}
	}
	if path == "" {
		return "", nil
	}
	return inRepository(src.repository, path)
}

// inRepository returns path with its symbolic links resolved, or an
// error when that lies outside the repository folder repo.
func inRepository(repo, path string) (string, error) {
	root, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return "", fmt.Errorf("repository %s: %w", repo, err)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", client.ErrCheckpoint, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", err
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s resolves to %s, outside the repository %s: a repository's manifests and checkpoints stay in its tree", path, real, repo)
	}
	return real, nil
}

// fileDigest is the lower-case hex sha256 of the file at path.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// reloads reports whether revisions may change while serving: the
// digests of checkpoints are worth computing.
func (s *Server) reloads() bool { return s.cfg.ModelControl != ControlNone }

// makeRevision makes revision n of v from src (0: the variant's next
// number, taken once it has loaded), its checkpoint at path (digest its
// sha256): loaded, its contract checked, warmed up. Nothing is left
// behind when it fails, and no number is taken.
func (s *Server) makeRevision(m *model, v *variant, src source, path, digest string, n int64) (*revision, error) {
	c, err := s.newClient(src, v.id, path, v.slots)
	if err != nil {
		return nil, err
	}
	if _, _, err := c.Load(); err != nil {
		c.Close()
		return nil, err
	}
	if !s.cfg.NoWarmup {
		rep, err := c.Warmup(context.Background())
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if len(rep.Calls) > 0 {
			s.cfg.Logger.Info("warmed up", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("variant", v.id),
				slog.Int("calls", len(rep.Calls)), slog.Float64("duration_ms", float64(rep.Total().Microseconds())/1000))
		}
	}
	if n == 0 {
		n = v.revisions.Add(1)
	}
	return newRevision(v.id, n, c, digest), nil
}

// installRevision makes a revision of v from src and makes it the one v
// serves (the first, at start or after an unload); a revision the server
// made at New and nobody loaded keeps its number.
func (s *Server) installRevision(m *model, v *variant, src source) error {
	path, digest, err := s.checkpointOf(src, v.id)
	if err != nil {
		return err
	}
	var n int64 // the next number
	if cur := v.rev.Load(); cur != nil && cur.fresh {
		n = cur.n // New's revision, never loaded here: this one replaces it
	}
	rev, err := s.makeRevision(m, v, src, path, digest, n)
	if err != nil {
		return err
	}
	if old := v.swap(rev); old != nil {
		s.retire(m, old)
	}
	attrs := []any{slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", rev.version)}
	if digest != "" {
		attrs = append(attrs, slog.String("checkpoint_sha256", digest))
	}
	s.cfg.Logger.Info("loaded", attrs...)
	return nil
}

// checkpointOf resolves variant vid's checkpoint file in src (checked
// against the repository) and, when reloads may happen, its sha256.
func (s *Server) checkpointOf(src source, vid string) (path, digest string, err error) {
	if path, err = s.checkpointFile(src, vid); err != nil || path == "" || !s.reloads() {
		return path, "", err
	}
	if digest, err = fileDigest(path); err != nil {
		return "", "", fmt.Errorf("%w: %v", client.ErrCheckpoint, err)
	}
	return path, digest, nil
}

// reload rereads m's manifest and swaps in a new revision of each loaded
// variant whose checkpoint changed (load: and loads those not loaded,
// an explicit load's work). m.control is held.
func (s *Server) reload(m *model, load bool) error {
	src := m.source
	name := m.oip.Spec.ModelFamilyID
	if src.manifest != "" && s.cfg.ReadManifest != nil {
		sp, err := s.readManifest(src)
		if err != nil {
			err = fmt.Errorf("%s: manifest %s: %w", name, src.manifest, err)
			s.reloadFailed(m, nil, err)
			return err
		}
		src.spec = sp
	}
	var errs []error
	for _, v := range m.sortedVariants() {
		if !v.loaded.Load() {
			if load && v.unit == nil { // under the memory budget it loads on its next request, from src
				if err := s.loadVariant(m, v); err != nil {
					errs = append(errs, named(name, v.id, err))
				}
			}
			continue
		}
		if err := s.reloadVariant(m, v, src); err != nil {
			err = named(name, v.id, err)
			s.reloadFailed(m, v, err)
			errs = append(errs, err)
		}
	}
	m.source = src
	return errors.Join(errs...)
}

// named prefixes err with the family and variant it is about, unless it
// names them first already (the client's errors do).
func named(family, vid string, err error) error {
	if strings.HasPrefix(err.Error(), family+"/"+vid+":") {
		return err
	}
	return fmt.Errorf("%s/%s: %w", family, vid, err)
}

// readManifest rereads src's manifest: the family must keep its id and
// everything but its variants' checkpoints.
func (s *Server) readManifest(src source) (*spec.ModelInferenceSpec, error) {
	if src.repository != "" {
		if _, err := inRepository(src.repository, src.manifest); err != nil {
			return nil, err
		}
	}
	sp, err := s.cfg.ReadManifest(src.manifest)
	if err != nil {
		return nil, err
	}
	a, err := interfaceOf(src.spec)
	if err != nil {
		return nil, err
	}
	b, err := interfaceOf(sp)
	if err != nil {
		return nil, err
	}
	if sp.ModelFamilyID != src.spec.ModelFamilyID {
		return nil, fmt.Errorf("the manifest now describes family %q, not %q: restart wfserve to serve it", sp.ModelFamilyID, src.spec.ModelFamilyID)
	}
	if !bytes.Equal(a, b) {
		return nil, errors.New("the manifest changed more than its variants' checkpoints (tasks, fields, variants or settings): a reload swaps checkpoints only; restart wfserve to serve the new interface")
	}
	return sp, nil
}

// interfaceOf is sp without its variants' checkpoints, as JSON: what a
// reload may not change.
func interfaceOf(sp *spec.ModelInferenceSpec) ([]byte, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if vs, ok := m["variants"].([]any); ok {
		for _, v := range vs {
			if v, ok := v.(map[string]any); ok {
				delete(v, "checkpoints")
			}
		}
	}
	return json.Marshal(m)
}

// reloadVariant swaps in a new revision of v from src when its checkpoint
// file changed; the serving revision is untouched when it fails.
func (s *Server) reloadVariant(m *model, v *variant, src source) error {
	path, digest, err := s.checkpointOf(src, v.id)
	if err != nil {
		return err
	}
	cur := v.rev.Load()
	if cur != nil && cur.digest != "" && cur.digest == digest {
		v.reloadErr.Store(nil)
		v.held.Store(nil)
		return nil // unchanged
	}
	if cur != nil && s.cfg.ModelControl == ControlPoll && src.spec.VersionPolicy != nil && src.spec.VersionPolicy.Pinned {
		// The version policy pins the serving revision: say so, load nothing.
		held := fmt.Sprintf("pinned by its version policy: checkpoint %s (sha256 %s) is not loaded", path, digest)
		// The index says so before the log does: whoever reads the log
		// line finds the index telling the same.
		if p := v.held.Swap(&held); p == nil || *p != held {
			s.cfg.Logger.Warn("poll: a changed checkpoint is not loaded: the version policy pins the serving version",
				slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", cur.version), slog.String("checkpoint", path), slog.String("checkpoint_sha256", digest))
		}
		return nil
	}
	// Under the memory budget the new revision is charged beside the
	// serving one from now on: room is made for it first.
	var res *reservation
	if s.mem != nil && v.unit != nil && path != "" {
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("%w: %v", client.ErrCheckpoint, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), unloadWait)
		res, err = s.mem.reserve(ctx, v.unit, fi.Size())
		cancel()
		if err != nil {
			return err
		}
	}
	rev, err := s.makeRevision(m, v, src, path, digest, 0)
	if err != nil {
		if res != nil {
			res.release()
		}
		return err
	}
	if res != nil && cur != nil {
		// The unit is charged the new revision; the reservation holds
		// the serving one's bytes until it is freed.
		s.mem.swapCharge(v.unit, res)
		cur.onFree = res.release
	}
	// Under version_policy latest: N the serving revision joins the kept
	// ones before the new one is swapped in (a request naming it finds it
	// in one or the other throughout), and those beyond N are retired.
	var retired []*revision
	if keep := src.spec.VersionPolicy.Keep(); keep > 1 && cur != nil && !cur.fresh {
		kept := append([]*revision{cur}, v.keptRevisions()...)
		if len(kept) > keep-1 {
			kept, retired = kept[:keep-1], kept[keep-1:]
		}
		v.kept.Store(&kept)
	}
	old := v.swap(rev)
	v.reloadErr.Store(nil)
	v.held.Store(nil)
	v.reloads.ok.Add(1)
	from := "none"
	if old != nil {
		from = old.version
		if src.spec.VersionPolicy.Keep() <= 1 || old.fresh {
			s.retire(m, old)
		}
	}
	s.cfg.Logger.Info("reloaded", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", rev.version),
		slog.String("replaces", from), slog.String("checkpoint_sha256", digest))
	for _, r := range retired {
		s.retire(m, r)
		s.cfg.Logger.Info("retired by the version policy", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("version", r.version),
			slog.Int("latest", src.spec.VersionPolicy.Keep()), slog.String("newest", rev.version))
	}
	s.health.notify()
	return nil
}

// retireKept retires the revisions v's version policy kept beside its
// newest (an unload, an eviction) and returns the channels closed once
// each is freed.
func (s *Server) retireKept(m *model, v *variant) []<-chan struct{} {
	p := v.kept.Swap(nil)
	if p == nil {
		return nil
	}
	var freed []<-chan struct{}
	for _, r := range *p {
		freed = append(freed, s.retire(m, r))
	}
	return freed
}

// reloadFailed records a failed reload of v (nil: every loaded variant of
// m), whose serving revision stays.
func (s *Server) reloadFailed(m *model, v *variant, err error) {
	vs := []*variant{v}
	if v == nil {
		vs = nil
		for _, x := range m.sortedVariants() {
			if x.loaded.Load() {
				vs = append(vs, x)
			}
		}
	}
	for _, x := range vs {
		x.reloadErr.Store(&err)
		x.reloads.failed.Add(1)
	}
	s.cfg.Logger.Error("reload failed: the serving version stays", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("error", err.Error()))
}

// serving says what a loaded variant serves, and why its last reload
// failed if it did: the repository index's reason.
func (v *variant) serving() string {
	r := v.rev.Load()
	if r == nil {
		return ""
	}
	msg := "serving " + r.describe()
	if kept := v.keptRevisions(); len(kept) > 0 {
		names := make([]string, len(kept))
		for i, k := range kept {
			names[i] = k.version
		}
		msg += "; also serving " + strings.Join(names, ", ") + " (kept by its version policy)"
	}
	if p := v.held.Load(); p != nil {
		msg += "; " + *p
	}
	if p := v.reloadErr.Load(); p != nil {
		msg += "; the last reload failed: " + (*p).Error()
	}
	return msg
}
