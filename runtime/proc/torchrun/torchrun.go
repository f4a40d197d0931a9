// Package torchrun builds and runs torchrun (torch.distributed.run)
// launches, and gives a Go worker running under torchrun its rank, world
// size and local device.
//
// Commands are built without launching anything (Launch.Command), in three
// forms: single node (--standalone), several nodes (--nnodes, --node_rank,
// --rdzv_backend c10d, --rdzv_endpoint) and --no_python, where every worker
// is a program — such as a Go worker binary — instead of a Python module.
// Run launches a command through proc.Run, so the launcher and all its
// workers share one process group that a timeout or a cancellation
// terminates, with output captured to files.
//
// Flags are spelled with underscores (--nproc_per_node, --no_python): the
// only spelling torch 1.x accepts, and one torch 2.x still accepts.
//
// The launcher is torch.distributed.run started through a short bootstrap
// (Bootstrap) that makes the job use torch's classic TCPStore unless the
// environment sets USE_LIBUV: torch 2.4+ defaults to its libuv store, which
// some builds lack (Debian's 2.6: "use_libuv was requested but PyTorch was
// build without libuv support"), and torchrun's rendezvous ignores USE_LIBUV.
package torchrun

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/worldfoundry/wfgen/runtime/proc"
)

// DefaultPython is the interpreter used when Launch.Python is empty.
const DefaultPython = "python3"

// Bootstrap is the Python program (run with -c) that starts torch.distributed.run
// with the launch's arguments. Unless USE_LIBUV is set, it sets USE_LIBUV=0
// and, when torch's TCPStore has a use_libuv parameter (torch 2.x), makes
// the launcher's stores default to use_libuv=False: torchrun's rendezvous
// creates its stores without passing use_libuv, so on a torch built without
// libuv (Debian's 2.6) every launch failed. It also sets
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (torch 2.x), so that workers do not
// connect to the launcher's store as clients that ignore USE_LIBUV too, but
// rank 0 hosts their store (MASTER_ADDR:MASTER_PORT) as in torch 1.x.
// USE_LIBUV=1 in the environment keeps torch's defaults.
const Bootstrap = `import os, runpy, sys
import torch.distributed as d
if os.environ.setdefault("USE_LIBUV", "0") == "0":
    os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    if "use_libuv" in (d.TCPStore.__init__.__doc__ or ""):
        class TCPStore(d.TCPStore):
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("use_libuv", False)
                super().__init__(*args, **kwargs)
        d.TCPStore = TCPStore
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
`

// Launch describes one torchrun launch on this node.
type Launch struct {
	// Python is the interpreter that runs torch.distributed.run (and, unless
	// Program is set, the workers); "" means DefaultPython.
	Python string
	// NProcPerNode is the number of workers on this node (at least 1).
	NProcPerNode int
	// Module is the Python module each worker runs (python -m MODULE).
	// Exactly one of Module and Program is set.
	Module string
	// Program is an executable each worker runs directly (--no_python),
	// e.g. a Go worker binary that reads its rank with WorkerFromEnv.
	Program string
	// Args are passed to every worker after the module or program.
	Args []string
	// Nodes, when set, makes this one node of a multi-node job; nil means a
	// single-node job with a local standalone rendezvous.
	Nodes *Nodes

	// MonitorInterval is how often the launcher checks its workers
	// (--monitor_interval); 0 leaves torchrun's default of 5 s, which is
	// also how long a finished job can take to notice it is done.
	MonitorInterval time.Duration
	// Redirects and Tee send worker stdout/stderr to per-rank files under
	// LogDir (--redirects, --tee): "0" none, "1" stdout, "2" stderr, "3"
	// both, or per local rank as "0:1,1:2". "" leaves torchrun's default.
	//
	// torch 1.13 on Python 3.11 or newer (Debian bookworm's python3-torch)
	// cannot parse its own default "0" (nor "3"): the launcher dies with
	// "'NoneType' object has no attribute 'get'". Setting both to "1" or
	// "2" avoids it; see docs/processes.md.
	Redirects, Tee string
	// LogDir is the base directory of the per-rank files (--log_dir).
	LogDir string
}

// Nodes describes this node's part in a multi-node job that uses the c10d
// rendezvous backend.
type Nodes struct {
	// Count is the number of nodes (--nnodes), at least 1.
	Count int
	// Rank is this node's rank, 0 <= Rank < Count (--node_rank). With c10d
	// the rendezvous assigns the group ranks; torchrun uses this value with
	// the static backend only, but it is passed for tools that read it.
	Rank int
	// Endpoint is the rendezvous HOST:PORT every node uses
	// (--rdzv_endpoint); the node that owns HOST serves it.
	Endpoint string
	// ID names the job, identical on every node (--rdzv_id); "" leaves
	// torchrun's default.
	ID string
}

// stdSpec is torchrun's syntax for --redirects and --tee.
var stdSpec = regexp.MustCompile(`^([0-3]|(\d:[0-3],)*\d:[0-3])$`)

var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// Command returns the argv of the launch without running it, where
// BOOTSTRAP is Bootstrap, which runs torch.distributed.run:
//
//	PYTHON -c BOOTSTRAP --standalone --nproc_per_node N -m MODULE ARGS...
//	PYTHON -c BOOTSTRAP --nnodes C --node_rank R --rdzv_backend c10d --rdzv_endpoint HOST:PORT [--rdzv_id ID] --nproc_per_node N -m MODULE ARGS...
//	PYTHON -c BOOTSTRAP --standalone --nproc_per_node N --no_python PROGRAM ARGS...
//
// with --monitor_interval, --redirects, --tee and --log_dir after
// --nproc_per_node when set.
// An invalid Launch is an error saying what is wrong.
func (l Launch) Command() ([]string, error) {
	if l.NProcPerNode < 1 {
		return nil, fmt.Errorf("torchrun: NProcPerNode is %d; want at least 1", l.NProcPerNode)
	}
	switch {
	case l.Module == "" && l.Program == "":
		return nil, fmt.Errorf("torchrun: set Module (a Python module) or Program (a worker executable)")
	case l.Module != "" && l.Program != "":
		return nil, fmt.Errorf("torchrun: Module %q and Program %q are both set; want one", l.Module, l.Program)
	case l.Module != "" && !moduleName.MatchString(l.Module):
		return nil, fmt.Errorf("torchrun: Module %q is not a dotted Python module name", l.Module)
	}
	python := l.Python
	if python == "" {
		python = DefaultPython
	}
	argv := []string{python, "-c", Bootstrap}
	if n := l.Nodes; n != nil {
		if n.Count < 1 {
			return nil, fmt.Errorf("torchrun: Nodes.Count is %d; want at least 1", n.Count)
		}
		if n.Rank < 0 || n.Rank >= n.Count {
			return nil, fmt.Errorf("torchrun: Nodes.Rank %d is outside 0..%d", n.Rank, n.Count-1)
		}
		if err := checkEndpoint(n.Endpoint); err != nil {
			return nil, err
		}
		argv = append(argv, "--nnodes", strconv.Itoa(n.Count), "--node_rank", strconv.Itoa(n.Rank),
			"--rdzv_backend", "c10d", "--rdzv_endpoint", n.Endpoint)
		if n.ID != "" {
			argv = append(argv, "--rdzv_id", n.ID)
		}
	} else {
		argv = append(argv, "--standalone")
	}
	argv = append(argv, "--nproc_per_node", strconv.Itoa(l.NProcPerNode))
	if l.MonitorInterval < 0 {
		return nil, fmt.Errorf("torchrun: negative MonitorInterval %v", l.MonitorInterval)
	}
	if l.MonitorInterval > 0 {
		argv = append(argv, "--monitor_interval", strconv.FormatFloat(l.MonitorInterval.Seconds(), 'f', -1, 64))
	}
	for _, f := range []struct{ flag, value string }{{"--redirects", l.Redirects}, {"--tee", l.Tee}} {
		if f.value == "" {
			continue
		}
		if !stdSpec.MatchString(f.value) {
			return nil, fmt.Errorf("torchrun: %s %q: want 0-3 or LOCAL_RANK:0-3 pairs such as 0:1,1:2", f.flag, f.value)
		}
		argv = append(argv, f.flag, f.value)
	}
	if l.LogDir != "" {
		argv = append(argv, "--log_dir", l.LogDir)
	}
	if l.Module != "" {
		argv = append(argv, "-m", l.Module)
	} else {
		argv = append(argv, "--no_python", l.Program)
	}
	return append(argv, l.Args...), nil
}

func checkEndpoint(ep string) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil || host == "" {
		return fmt.Errorf("torchrun: Nodes.Endpoint %q: want HOST:PORT, e.g. 10.0.0.1:29400", ep)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("torchrun: Nodes.Endpoint %q: port must be 1..65535", ep)
	}
	return nil
}

// Run launches l through proc.Run with c describing the process (LogDir,
// Name, Env, Timeout, ...; c.Path and c.Args are replaced by l's command),
// and returns the Result even when the job fails: a non-zero exit is not an
// error — callers check Result.ExitCode and the captured logs, as with the
// seed's check=False. The error is non-nil only for an invalid launch, a
// start failure, a timeout or a cancellation (see proc.Run).
func Run(ctx context.Context, l Launch, c proc.Command) (*proc.Result, error) {
	argv, err := l.Command()
	if err != nil {
		return nil, err
	}
	c.Path, c.Args = argv[0], argv[1:]
	if c.Name == "" {
		c.Name = "torchrun"
	}
	return proc.Run(ctx, c)
}
