//go:build windows

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Windows has no process groups to signal and no SIGTERM: termination kills
// the one process at once (TerminateProcess); descendants may survive.

func ownGroup() int { return -1 }

func startInNewGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= syscall.CREATE_NEW_PROCESS_GROUP
}

func terminate(pl termPlan) (Termination, error) {
	var res Termination
	pid := pl.root
	if pid == 0 {
		pid = pl.pgid
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return res, nil // already gone
	}
	if err := p.Kill(); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return res, nil
		}
		return res, err
	}
	res.Killed = []int{pid}
	if pl.onKill != nil {
		pl.onKill(res.Killed)
	}
	return res, nil
}

func groupHasLive(int) bool { return false }

func exitSignal(*os.ProcessState) string { return "" }
