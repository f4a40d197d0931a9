//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

func ownGroup() int { return syscall.Getpgrp() }

// startInNewGroup makes cmd start in a new session, hence its own process
// group whose id is the child's pid (the seed's start_new_session=True).
func startInNewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
}

// target identifies a process by pid and start time.
type target struct {
	pid, pgrp int
	start     uint64
}

// alive reports whether t still runs and is still the same process.
func (t target) alive() bool {
	if haveProcfs {
		p, ok := readProc(t.pid)
		return ok && p.live() && p.start == t.start
	}
	err := syscall.Kill(t.pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// collect lists the live processes the plan covers, descendants before
// their parents, plus the live descendants of extra (used to find children
// that survivors started after the first pass). groupLive reports whether
// the plan's group has a live member.
func (pl termPlan) collect(extra []target) (targets []target, groupLive bool, err error) {
	self := os.Getpid()
	if !haveProcfs {
		if pl.root > 0 {
			t := target{pid: pl.root}
			if pl.root == pl.pgid {
				t.pgrp = pl.pgid // the group signal reaches it
			}
			if t.alive() {
				targets = append(targets, t)
			}
		}
		if pl.pgid > 0 {
			err := syscall.Kill(-pl.pgid, 0)
			groupLive = err == nil || errors.Is(err, syscall.EPERM)
		}
		return targets, groupLive, nil
	}
	procs, err := listProcs()
	if err != nil {
		return nil, false, err
	}
	children := map[int][]procInfo{}
	byPID := map[int]procInfo{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
		byPID[p.pid] = p
	}
	seen := map[int]bool{self: true}
	add := func(p procInfo) {
		if !seen[p.pid] && p.live() {
			seen[p.pid] = true
			targets = append(targets, target{pid: p.pid, pgrp: p.pgrp, start: p.start})
		}
	}
	// tree walks the descendants of root breadth-first and adds them
	// deepest first, then root itself.
	tree := func(root procInfo) {
		level := []procInfo{root}
		var order []procInfo
		visited := map[int]bool{root.pid: true}
		for len(level) > 0 {
			var next []procInfo
			for _, p := range level {
				for _, c := range children[p.pid] {
					if !visited[c.pid] {
						visited[c.pid] = true
						next = append(next, c)
						order = append(order, c)
					}
				}
			}
			level = next
		}
		slices.Reverse(order)
		for _, p := range order {
			add(p)
		}
		add(root)
	}
	if pl.root > 0 {
		if p, ok := byPID[pl.root]; ok {
			tree(p)
		}
	}
	for _, t := range extra {
		if p, ok := byPID[t.pid]; ok && p.start == t.start {
			tree(p)
		}
	}
	if pl.pgid > 0 {
		for _, p := range procs {
			if p.pgrp == pl.pgid && p.live() && p.pid != self {
				groupLive = true
				add(p)
			}
		}
	}
	return targets, groupLive, nil
}

// terminate carries out a plan: SIGTERM, grace, SIGKILL for survivors.
func terminate(pl termPlan) (Termination, error) {
	var res Termination
	targets, groupLive, err := pl.collect(nil)
	if err != nil {
		return res, err
	}
	if len(targets) == 0 && !groupLive {
		return res, nil
	}
	if groupLive {
		if err := signalGroup(pl.pgid, syscall.SIGTERM); err != nil {
			return res, err
		}
		if !haveProcfs {
			res.Terminated = append(res.Terminated, pl.pgid)
		}
	}
	for _, t := range targets {
		if groupLive && t.pgrp == pl.pgid {
			res.Terminated = append(res.Terminated, t.pid) // the group signal reached it
			continue
		}
		if t.alive() && syscall.Kill(t.pid, syscall.SIGTERM) == nil {
			res.Terminated = append(res.Terminated, t.pid)
		}
	}
	if pl.onTerm != nil {
		pl.onTerm(res.Terminated)
	}
	if pl.waitGone(targets, pl.grace) {
		return res, nil
	}

	// Survivors, and anything they started during the grace period.
	var survivors []target
	for _, t := range targets {
		if t.alive() {
			survivors = append(survivors, t)
		}
	}
	more, groupLive, err := termPlan{pgid: pl.pgid}.collect(survivors)
	if err != nil {
		return res, err
	}
	if groupLive {
		if err := signalGroup(pl.pgid, syscall.SIGKILL); err != nil {
			return res, err
		}
		if !haveProcfs {
			res.Killed = append(res.Killed, pl.pgid)
		}
	}
	for _, t := range more {
		if groupLive && t.pgrp == pl.pgid {
			res.Killed = append(res.Killed, t.pid)
			continue
		}
		if t.alive() && syscall.Kill(t.pid, syscall.SIGKILL) == nil {
			res.Killed = append(res.Killed, t.pid)
		}
	}
	if !haveProcfs && pl.root > 0 && len(more) == 0 {
		more = survivors
	}
	if pl.onKill != nil {
		pl.onKill(res.Killed)
	}
	if !pl.waitGone(more, killWait) {
		return res, fmt.Errorf("proc: processes %v still alive %v after SIGKILL", res.Killed, killWait)
	}
	return res, nil
}

// signalGroup sends sig to process group pgid; a group that is already
// gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("proc: signal process group %d with %v: %w", pgid, sig, err)
}

// waitGone polls until every target is gone and the plan's group has no
// live member, or until d has passed. It reports whether all are gone.
func (pl termPlan) waitGone(targets []target, d time.Duration) bool {
	deadline := time.Now().Add(d)
	interval := 2 * time.Millisecond
	for {
		if pl.allGone(targets) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(interval, left))
		interval = min(interval*2, 50*time.Millisecond)
	}
}

func (pl termPlan) allGone(targets []target) bool {
	for _, t := range targets {
		if t.alive() {
			return false
		}
	}
	if pl.pgid <= 0 {
		return true
	}
	err := syscall.Kill(-pl.pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true // not even a zombie is left in the group
	}
	if haveProcfs {
		procs, err := listProcs()
		if err != nil {
			return false
		}
		for _, p := range procs {
			if p.pgrp == pl.pgid && p.live() {
				return false
			}
		}
		return true
	}
	return false
}

// groupHasLive reports whether process group pgid has a live member. An
// empty group (ESRCH, the common case) is answered without listing /proc.
func groupHasLive(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return false
	}
	_, live, err := termPlan{pgid: pgid}.collect(nil)
	return err == nil && live
}

// exitSignal names the signal that ended the process, or "".
func exitSignal(ps *os.ProcessState) string {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ""
	}
	return SignalName(ws.Signal())
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// SignalName returns the conventional name of sig ("SIGTERM"), or
// "signal N" for one without a name here.
func SignalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}
