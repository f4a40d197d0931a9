//go:build !linux

package proc

import "errors"

// haveProcfs is false: there is no /proc process list on this OS. Group
// termination then probes the group with kill(-pgid, 0), and tree
// termination signals only the given process (see docs/processes.md).
const haveProcfs = false

type procInfo struct {
	pid, ppid, pgrp int
	state           byte
	start           uint64
}

func (p procInfo) live() bool { return p.state != 'Z' }

func readProc(int) (procInfo, bool) { return procInfo{}, false }

func listProcs() ([]procInfo, error) { return nil, errors.New("proc: no /proc on this OS") }
