package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// haveProcfs reports whether processes can be listed from /proc.
const haveProcfs = true

// procInfo is what termination needs from /proc/PID/stat.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte   // R, S, D, Z, T, ...
	start           uint64 // start time in clock ticks since boot: pid + start is an identity
}

// live reports whether the process still runs (zombies do not).
func (p procInfo) live() bool { return p.state != 'Z' && p.state != 'X' && p.state != 'x' }

// readProc reads /proc/PID/stat. ok is false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	p, err := parseStat(b)
	if err != nil {
		return procInfo{}, false
	}
	return p, true
}

// listProcs reads every process in /proc. Processes that exit while it
// reads are skipped.
func listProcs() ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("proc: list processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("proc: list processes: %w", err)
	}
	out := make([]procInfo, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// parseStat parses the fields of /proc/PID/stat that procInfo holds. The
// command name (field 2) is in parentheses and may itself contain spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procInfo, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open <= 0 || end < open {
		return procInfo{}, errors.New("malformed stat")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return procInfo{}, err
	}
	f := bytes.Fields(b[end+1:])
	// f[0]=state(3) f[1]=ppid(4) f[2]=pgrp(5) ... f[19]=starttime(22)
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, errors.New("malformed stat")
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procInfo{}, err
	}
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0], start: start}, nil
}
