package proc

import (
	"fmt"
	"os"
	"time"
)

// DefaultGrace is how long termination waits between SIGTERM and SIGKILL
// when a Command does not say.
const DefaultGrace = 5 * time.Second

// killWait bounds the wait for processes to vanish after SIGKILL (a process
// in uninterruptible sleep dies only when its I/O completes).
const killWait = 5 * time.Second

// Termination reports what a terminate call did.
type Termination struct {
	// Terminated lists the processes sent SIGTERM. Where processes cannot be
	// listed (no /proc), a group is represented by its id.
	Terminated []int
	// Killed lists the processes still alive after the grace period, which
	// were sent SIGKILL. Empty when SIGTERM sufficed.
	Killed []int
}

// TerminateGroup terminates every process in process group pgid: SIGTERM to
// the group, up to grace for all members to exit, then SIGKILL to the group
// and to any member still alive. A group with no live member (already
// exited; zombies do not count) is a no-op. The processes must have been
// started in their own group (Run does this), or this also signals whatever
// else shares the group; pgid 0 or 1 and the caller's own group are refused.
//
// On Linux members are listed from /proc and liveness ignores zombies; on
// other Unix systems the group is probed with kill(-pgid, 0). On Windows
// there are no process groups: only process pgid is killed, at once.
func TerminateGroup(pgid int, grace time.Duration) (Termination, error) {
	if pgid <= 1 {
		return Termination{}, fmt.Errorf("proc: TerminateGroup: invalid process group %d", pgid)
	}
	if grace < 0 {
		return Termination{}, fmt.Errorf("proc: TerminateGroup: negative grace %v", grace)
	}
	if pgid == ownGroup() {
		return Termination{}, fmt.Errorf("proc: TerminateGroup: refusing to terminate the caller's own process group %d", pgid)
	}
	return terminate(termPlan{pgid: pgid, grace: grace})
}

// TerminateTree terminates process pid and all its descendants, for a child
// that was not started in its own process group: SIGTERM to the children
// (deepest first), then to pid, up to grace for all to exit, then SIGKILL to
// the survivors and to any descendant they started meanwhile. A process that
// no longer exists is a no-op; pid 0 or 1 and the caller itself are refused
// (and the caller is never signalled even if it descends from pid).
//
// Descendants are discovered from /proc (parent links) on Linux, and every
// process is identified by pid and start time, so a pid reused during the
// grace period is not signalled. Elsewhere descendants cannot be listed
// without extra tools (sysctl KERN_PROC on BSD/macOS, a Toolhelp snapshot on
// Windows): only pid itself is signalled and grandchildren may leak, so
// start children with Run (own group) and use TerminateGroup there.
func TerminateTree(pid int, grace time.Duration) (Termination, error) {
	if pid <= 1 || pid == os.Getpid() {
		return Termination{}, fmt.Errorf("proc: TerminateTree: refusing to terminate process %d", pid)
	}
	if grace < 0 {
		return Termination{}, fmt.Errorf("proc: TerminateTree: negative grace %v", grace)
	}
	return terminate(termPlan{root: pid, grace: grace})
}

// termPlan says what to terminate: a process group, a process tree, or
// both (Run terminates the child's group and its tree, which also catches a
// descendant that left the group while its parent still lived).
type termPlan struct {
	pgid   int // process group to signal; 0: none
	root   int // process whose tree to signal; 0: none
	grace  time.Duration
	onTerm func(pids []int) // called after SIGTERM went out
	onKill func(pids []int) // called after SIGKILL went out
}
