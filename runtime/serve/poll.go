package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Poll mode (Config.ModelControl ControlPoll, wfserve -model-control
// poll): every Config.PollInterval the server stats each model's manifest
// and its variants' checkpoint files; when what it sees differs from the
// last look (a path, size, modification time or mode), it reloads the
// model (reload.go), which compares the checkpoints' sha256 with the
// serving revisions' and swaps in those that changed. A change that fails
// to load is not retried until the files change again. Polling needs no
// file-system notification, so it works the same on network and overlay
// file systems.
//
// With Config.Discover, each poll also lists the repository's manifests
// first: a manifest added is read (Config.OpenFamily: validated), its
// model added to the served ones and loaded (ready once loaded; it does
// not count for the server's readiness); a manifest removed unloads its
// model as an explicit unload does (new requests 503, the calls in flight
// finish, then its modules are freed), and the repository index lists it
// as unloaded. A manifest added that is invalid, or names a family
// already served, serves nothing: it is logged, counted
// (wfserve_repository_invalid_manifests) and listed in the index with its
// reason, and read again when its file changes. A removed model's names
// are free again: a manifest that comes back is added anew.

// DefaultPollInterval is Config.PollInterval's default (Triton's
// --repository-poll-secs default is 15 s).
const DefaultPollInterval = 15 * time.Second

// startPolling starts the poller in poll mode; Close stops it.
func (s *Server) startPolling() {
	if s.cfg.ModelControl != ControlPoll || s.pollStop != nil {
		return
	}
	for _, m := range s.cat().order {
		m.control.Lock()
		m.seen = s.filesSeen(m)
		m.control.Unlock()
	}
	s.pollStop, s.pollDone = make(chan struct{}), make(chan struct{})
	go s.poll(s.pollStop, s.pollDone)
}

// stopPolling stops the poller and waits for it.
func (s *Server) stopPolling() {
	if s.pollStop != nil {
		close(s.pollStop)
		<-s.pollDone
	}
}

func (s *Server) poll(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.pollOnce(stop)
		}
	}
}

// pollOnce adds and removes the models whose manifests were added to or
// removed from the repository, then reloads the models whose files
// changed since the last look.
func (s *Server) pollOnce(stop chan struct{}) {
	s.pollRepository(stop)
	for _, m := range s.cat().order {
		select {
		case <-stop:
			return
		default:
		}
		if m.removed.Load() {
			continue
		}
		m.control.Lock()
		if seen := s.filesSeen(m); seen != m.seen {
			m.seen = seen
			// A model added while serving loads what failed to load.
			if err := s.reload(m, m.added.Load()); err != nil {
				s.cfg.Logger.Error("poll: reload failed", slog.String("model", m.oip.Spec.ModelFamilyID), slog.String("error", err.Error()))
			}
		}
		m.control.Unlock()
	}
}

// filesSeen describes what a stat of m's manifest and checkpoint files
// shows (their path, size, modification time and mode; or the error);
// m.control is held.
func (s *Server) filesSeen(m *model) string {
	var b strings.Builder
	stat := func(path string) { b.WriteString(statLine(path)) }
	if m.source.manifest != "" {
		stat(m.source.manifest)
	}
	for _, v := range m.sortedVariants() {
		path, err := s.checkpointFile(m.source, v.id)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "%s: %v\n", v.id, err)
		case path != "":
			stat(path)
		}
	}
	return b.String()
}

// statLine describes what a stat of path shows: its size, modification
// time and mode, or the error.
func statLine(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("%s: %v\n", path, err)
	}
	return fmt.Sprintf("%s %d %d %v\n", path, st.Size(), st.ModTime().UnixNano(), st.Mode())
}

// invalidManifest is a manifest added to the repository while serving
// that serves nothing.
type invalidManifest struct {
	seen string // its statLine when it was read
	err  error
}

// reason is the repository index's reason for it.
func (i *invalidManifest) reason() string {
	return "a manifest added to the repository, serving nothing: " + i.err.Error()
}

// pollRepository adds the models of manifests added to the repository
// since the last look and unloads those whose manifest was removed
// (Config.Discover).
func (s *Server) pollRepository(stop chan struct{}) {
	if s.cfg.Discover == nil || s.cfg.OpenFamily == nil {
		return
	}
	paths, err := s.cfg.Discover()
	if err != nil {
		s.cfg.Logger.Error("poll: listing the repository failed", slog.String("error", err.Error()))
		return
	}
	found := map[string]bool{}
	for _, p := range paths {
		found[filepath.Clean(p)] = true
	}
	known := map[string]bool{}
	for _, m := range s.cat().order {
		if m.source.repository == "" || m.source.manifest == "" || m.removed.Load() {
			continue
		}
		path := filepath.Clean(m.source.manifest)
		if found[path] {
			known[path] = true
			continue
		}
		s.removeModel(m)
	}
	s.catMu.Lock()
	for path := range s.invalid {
		if !found[path] {
			delete(s.invalid, path)
		}
	}
	s.catMu.Unlock()
	for _, p := range paths {
		select {
		case <-stop:
			return
		default:
		}
		if !known[filepath.Clean(p)] {
			s.addManifest(p)
		}
	}
}

// removeModel unloads m, whose manifest left the repository.
func (s *Server) removeModel(m *model) {
	name := m.oip.Spec.ModelFamilyID
	m.removed.Store(true)
	if s.mem != nil { // no lease and no load from now on
		for _, v := range m.sortedVariants() {
			s.mem.disable(v.unit, fmt.Errorf("%s/%s is %w", name, v.id, errRemoved))
		}
	}
	if err := s.unloadModel(context.Background(), m, errRemoved); err != nil {
		s.cfg.Logger.Error("poll: unload failed", slog.String("model", name), slog.String("error", err.Error()))
	}
	if s.mem != nil { // its bytes given back once the calls holding it are answered
		ctx, cancel := context.WithTimeout(context.Background(), unloadWait)
		for _, v := range m.sortedVariants() {
			if err := s.mem.drop(ctx, v.unit); err != nil {
				s.cfg.Logger.Error("poll: unload failed", slog.String("model", name), slog.String("error", err.Error()))
			}
		}
		cancel()
	}
	s.cfg.Logger.Info("removed from the repository: unloaded", slog.String("model", name), slog.String("manifest", m.source.manifest))
}

// addManifest reads a manifest found in the repository that no served
// model was read from, adds its model and loads it; or records why it
// serves nothing. A manifest that serves nothing is read again only when
// its file changes.
func (s *Server) addManifest(path string) {
	key := filepath.Clean(path)
	seen := statLine(path)
	s.catMu.Lock()
	inv := s.invalid[key]
	s.catMu.Unlock()
	if inv != nil && inv.seen == seen {
		return
	}
	m, err := s.addFamily(path)
	if err != nil {
		s.catMu.Lock()
		s.invalid[key] = &invalidManifest{seen: seen, err: err}
		s.catMu.Unlock()
		s.cfg.Logger.Error("poll: a manifest added to the repository serves nothing", slog.String("manifest", path), slog.String("error", err.Error()))
		return
	}
	name := m.oip.Spec.ModelFamilyID
	m.control.Lock()
	m.seen = s.filesSeen(m)
	var errs []error
	for _, v := range m.sortedVariants() {
		if v.unit != nil {
			continue // it loads on its first request (the memory budget)
		}
		if err := s.loadVariant(m, v); err != nil {
			errs = append(errs, named(name, v.id, err))
		}
	}
	m.control.Unlock()
	s.health.notify()
	if err := errors.Join(errs...); err != nil {
		s.cfg.Logger.Error("poll: a model added to the repository failed to load", slog.String("model", name), slog.String("manifest", path), slog.String("error", err.Error()))
		return
	}
	s.cfg.Logger.Info("added from the repository", slog.String("model", name), slog.String("manifest", path))
}

// addFamily reads the manifest at path and adds its model, not loaded, to
// the served ones; its names may take over those of removed models only.
func (s *Server) addFamily(path string) (*model, error) {
	f, err := s.cfg.OpenFamily(path)
	if err != nil {
		return nil, err
	}
	if f.Repository != "" {
		if _, err := inRepository(f.Repository, path); err != nil {
			return nil, err
		}
	}
	m, err := s.newModel(f)
	if err != nil {
		return nil, err
	}
	s.catMu.Lock()
	defer s.catMu.Unlock()
	cur := s.cat()
	replace := map[*model]bool{}
	for _, name := range append([]string{f.Spec.ModelFamilyID}, f.Spec.Aliases...) {
		if o := cur.models[name]; o != nil && o.removed.Load() {
			replace[o] = true
		}
	}
	next := cur.clone()
	if err := next.add(m, replace); err != nil {
		m.close()
		for _, name := range append([]string{f.Spec.ModelFamilyID}, f.Spec.Aliases...) {
			if o := cur.models[name]; o != nil && o.source.manifest != "" {
				return nil, fmt.Errorf("%w (family %q, served from %s)", err, o.oip.Spec.ModelFamilyID, o.source.manifest)
			}
		}
		return nil, err
	}
	m.added.Store(true)
	if s.mem != nil {
		// Under the memory budget it loads on its first request, as
		// every unpinned model does.
		for _, u := range s.newUnits(m, false) {
			s.mem.add(u)
		}
	}
	s.tel.observe(m)
	for o := range replace {
		s.dropped = append(s.dropped, o)
		m.continueRevisions(o)
	}
	delete(s.invalid, filepath.Clean(path))
	s.catp.Store(next)
	for o := range replace {
		go o.close() // unloaded already: its batchers stop (Close waits for them too)
	}
	return m, nil
}

// continueRevisions numbers the revisions of m's variants on from those of
// the same variants of old, the removed model m replaces: a family that
// comes back counts on as a load after an unload does.
func (m *model) continueRevisions(old *model) {
	for vid, v := range m.variants {
		ov := old.variants[vid]
		first := v.rev.Load()
		if ov == nil || first == nil || !first.fresh {
			continue
		}
		n := ov.revisions.Load() + 1
		v.revisions.Store(n)
		r := newRevision(vid, n, first.client, "")
		r.fresh = true
		v.rev.Store(r)
	}
}
