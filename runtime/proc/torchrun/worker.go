package torchrun

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Worker is what torchrun tells each worker through its environment.
type Worker struct {
	// Rank is the worker's global rank (RANK), 0 <= Rank < WorldSize.
	Rank int
	// WorldSize is the number of workers in the job (WORLD_SIZE).
	WorldSize int
	// LocalRank is the worker's rank on this node (LOCAL_RANK).
	LocalRank int
	// LocalWorldSize is the number of workers on this node
	// (LOCAL_WORLD_SIZE).
	LocalWorldSize int
	// GroupRank is the node's rank (GROUP_RANK; 0 when unset).
	GroupRank int
	// MasterAddr and MasterPort locate rank 0's store (MASTER_ADDR,
	// MASTER_PORT).
	MasterAddr string
	MasterPort int
	// RestartCount counts worker-group restarts
	// (TORCHELASTIC_RESTART_COUNT; 0 when unset).
	RestartCount int
	// AgentStore says that the store at MASTER_ADDR:MASTER_PORT is the
	// launcher's own, which every worker, rank 0 included, joins as a
	// client (TORCHELASTIC_USE_AGENT_STORE=True: torchrun's static
	// rendezvous, and torch 2.x's c10d rendezvous when it shares its
	// store). Otherwise rank 0 hosts the workers' store there.
	AgentStore bool
}

// WorkerFromEnv reads the Worker from the process environment. Outside a
// torchrun worker it is an error naming the missing variable.
func WorkerFromEnv() (Worker, error) { return WorkerFrom(os.LookupEnv) }

// WorkerFrom reads the Worker through lookup (os.LookupEnv, or a map's
// lookup in tests). RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT are required and checked for consistency;
// GROUP_RANK, TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_USE_AGENT_STORE
// are optional.
func WorkerFrom(lookup func(string) (string, bool)) (Worker, error) {
	var w Worker
	var err error
	intVar := func(name string, dst *int, required bool) {
		if err != nil {
			return
		}
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			if required {
				err = fmt.Errorf("torchrun: %s is not set: not running as a torchrun worker", name)
			}
			return
		}
		n, perr := strconv.Atoi(strings.TrimSpace(v))
		if perr != nil || n < 0 {
			err = fmt.Errorf("torchrun: %s=%q is not a non-negative integer", name, v)
			return
		}
		*dst = n
	}
	intVar("RANK", &w.Rank, true)
	intVar("WORLD_SIZE", &w.WorldSize, true)
	intVar("LOCAL_RANK", &w.LocalRank, true)
	intVar("LOCAL_WORLD_SIZE", &w.LocalWorldSize, true)
	intVar("MASTER_PORT", &w.MasterPort, true)
	intVar("GROUP_RANK", &w.GroupRank, false)
	intVar("TORCHELASTIC_RESTART_COUNT", &w.RestartCount, false)
	if err != nil {
		return Worker{}, err
	}
	addr, ok := lookup("MASTER_ADDR")
	if !ok || addr == "" {
		return Worker{}, fmt.Errorf("torchrun: MASTER_ADDR is not set: not running as a torchrun worker")
	}
	w.MasterAddr = addr
	if v, ok := lookup("TORCHELASTIC_USE_AGENT_STORE"); ok {
		switch strings.TrimSpace(v) {
		case "True":
			w.AgentStore = true
		case "False", "":
		default:
			return Worker{}, fmt.Errorf("torchrun: TORCHELASTIC_USE_AGENT_STORE=%q is neither True nor False", v)
		}
	}
	switch {
	case w.WorldSize < 1 || w.Rank >= w.WorldSize:
		return Worker{}, fmt.Errorf("torchrun: RANK=%d is outside WORLD_SIZE=%d", w.Rank, w.WorldSize)
	case w.LocalWorldSize < 1 || w.LocalRank >= w.LocalWorldSize:
		return Worker{}, fmt.Errorf("torchrun: LOCAL_RANK=%d is outside LOCAL_WORLD_SIZE=%d", w.LocalRank, w.LocalWorldSize)
	case w.LocalWorldSize > w.WorldSize:
		return Worker{}, fmt.Errorf("torchrun: LOCAL_WORLD_SIZE=%d exceeds WORLD_SIZE=%d", w.LocalWorldSize, w.WorldSize)
	case w.MasterPort < 1 || w.MasterPort > 65535:
		return Worker{}, fmt.Errorf("torchrun: MASTER_PORT=%d is not a port", w.MasterPort)
	}
	return w, nil
}

// LocalDevice returns the device this worker should use, given how many
// CUDA devices it can see (engine.Engine.CUDADeviceCount, or 0 on a CPU
// build): "cpu" when there are none, otherwise "cuda:LOCAL_RANK" — one device
// per local worker, as torchrun's set_device convention has it. More local
// workers than visible devices is an error rather than two workers sharing
// (or silently collapsing onto) cuda:0.
func (w Worker) LocalDevice(cudaDevices int) (string, error) {
	if cudaDevices <= 0 {
		return "cpu", nil
	}
	if w.LocalRank >= cudaDevices {
		return "", fmt.Errorf("torchrun: LOCAL_RANK=%d but only %d CUDA device(s) are visible", w.LocalRank, cudaDevices)
	}
	return "cuda:" + strconv.Itoa(w.LocalRank), nil
}
