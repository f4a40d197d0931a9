package serve

import (
	"fmt"
	"log/slog"
	"os"
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

// DefaultPollInterval is Config.PollInterval's default (Triton's
// --repository-poll-secs default is 15 s).
const DefaultPollInterval = 15 * time.Second

// startPolling starts the poller in poll mode; Close stops it.
func (s *Server) startPolling() {
	if s.cfg.ModelControl != ControlPoll || s.pollStop != nil {
		return
	}
	for _, m := range s.order {
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

// pollOnce reloads the models whose files changed since the last look.
func (s *Server) pollOnce(stop chan struct{}) {
	for _, m := range s.order {
		select {
		case <-stop:
			return
		default:
		}
		m.control.Lock()
		if seen := s.filesSeen(m); seen != m.seen {
			m.seen = seen
			if err := s.reload(m, false); err != nil {
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
	stat := func(path string) {
		st, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", path, err)
			return
		}
		fmt.Fprintf(&b, "%s %d %d %v\n", path, st.Size(), st.ModTime().UnixNano(), st.Mode())
	}
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
