//go:build linux

package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTree starts the tree helper directly (not through Run), in its own
// process group or not.
func startTree(t *testing.T, ownGroup bool, escape bool) (*exec.Cmd, []reported) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reportPath := filepath.Join(t.TempDir(), "report")
	cleanup(t, &reportPath)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=tree", reportEnv+"="+reportPath)
	want := 5
	if !escape {
		cmd.Env = append(cmd.Env, escapeEnv+"=0")
		want = 3
	}
	if ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	return cmd, waitReports(t, reportPath, want)
}

func TestTerminateGroup(t *testing.T) {
	t.Parallel()
	cmd, reps := startTree(t, true, false)
	pgid := cmd.Process.Pid
	term, err := TerminateGroup(pgid, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if isAlive(r) {
			t.Errorf("%s (pid %d) survived TerminateGroup", r.role, r.pid)
		}
		if !slices.Contains(term.Terminated, r.pid) {
			t.Errorf("%s (pid %d) not in Terminated %v", r.role, r.pid, term.Terminated)
		}
		if r.role == "stubborn" && !slices.Contains(term.Killed, r.pid) {
			t.Errorf("SIGTERM-ignoring %d not in Killed %v", r.pid, term.Killed)
		}
	}
	// Already gone: a no-op.
	if again, err := TerminateGroup(pgid, time.Second); err != nil || len(again.Terminated)+len(again.Killed) != 0 {
		t.Errorf("second TerminateGroup = %+v, %v; want a no-op", again, err)
	}
}

func TestTerminateGroupSparesProcessesThatLeftIt(t *testing.T) {
	t.Parallel()
	cmd, reps := startTree(t, true, true)
	if _, err := TerminateGroup(cmd.Process.Pid, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		inSession := r.role == "escaper" || (r.role == "sleeper" && parentIsEscaper(r, reps))
		if isAlive(r) != inSession {
			t.Errorf("%s (pid %d): alive=%v; the group signal should reach exactly the group's members", r.role, r.pid, isAlive(r))
		}
	}
}

// parentIsEscaper reports whether r was started by the escaper.
func parentIsEscaper(r reported, reps []reported) bool {
	p, ok := readProc(r.pid)
	if !ok {
		return false
	}
	for _, q := range reps {
		if q.role == "escaper" && q.pid == p.ppid {
			return true
		}
	}
	return false
}

func TestTerminateTree(t *testing.T) {
	t.Parallel()
	// Not in its own group: the tree shares the test's group, so only
	// tree termination can stop it without touching the test itself.
	cmd, reps := startTree(t, false, true)
	term, err := TerminateTree(cmd.Process.Pid, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if isAlive(r) {
			t.Errorf("%s (pid %d) survived TerminateTree", r.role, r.pid)
		}
	}
	if len(term.Terminated) != 5 || term.Terminated[len(term.Terminated)-1] != cmd.Process.Pid {
		t.Errorf("Terminated = %v; want 5 pids, the parent last", term.Terminated)
	}
	var stubborn int
	for _, r := range reps {
		if r.role == "stubborn" {
			stubborn = r.pid
		}
	}
	if !slices.Equal(term.Killed, []int{stubborn}) {
		t.Errorf("Killed = %v; want only the SIGTERM-ignoring %d", term.Killed, stubborn)
	}
	if again, err := TerminateTree(cmd.Process.Pid, time.Second); err != nil || len(again.Terminated) != 0 {
		t.Errorf("second TerminateTree = %+v, %v; want a no-op", again, err)
	}
}

func TestTerminateRefusesDangerousTargets(t *testing.T) {
	for _, pgid := range []int{-5, 0, 1, syscall.Getpgrp()} {
		if _, err := TerminateGroup(pgid, 0); err == nil {
			t.Errorf("TerminateGroup(%d) accepted", pgid)
		}
	}
	for _, pid := range []int{-1, 0, 1, os.Getpid()} {
		if _, err := TerminateTree(pid, 0); err == nil {
			t.Errorf("TerminateTree(%d) accepted", pid)
		}
	}
	if _, err := TerminateTree(12345, -time.Second); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative grace: %v", err)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	line := "4242 (we ird) (name)) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	p, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if p != (procInfo{pid: 4242, ppid: 17, pgrp: 4242, state: 'S', start: 987654}) {
		t.Errorf("parseStat = %+v", p)
	}
	for _, bad := range []string{"", "1 (x) S 1", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}
