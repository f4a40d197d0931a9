// Package dist gives Go workers of a distributed job a process group — the
// collectives all_reduce, all_gather, broadcast, gather and barrier on
// tensor.Tensor values — and splits batch jobs across the job's ranks.
//
// A worker started by torchrun (package runtime/proc/torchrun) joins with
// Join: it reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
// from the environment; rank 0 hosts the group's TCP store at
// MASTER_ADDR:MASTER_PORT and every rank connects to it. The collectives
// themselves run in the engine: an engine that can join process groups
// implements Joiner (runtime/torch's does, with libtorch's c10d: Gloo on the
// CPU, NCCL on CUDA where the build has it), found by type assertion as
// engine.CUDAEngine is. The package is pure Go; without such an engine (a
// build without cgo, or no engine imported) Join returns a clear error.
//
// Failures come back as errors, never as a hang: every collective is
// bounded by the group's timeout (and the context's deadline), a rank that
// died makes the others fail within it, and a group whose collective failed
// refuses further use (ErrGroupFailed) because its ranks no longer agree on
// where they are. Before moving data, every collective exchanges a small
// header, so ranks that call different collectives, or pass tensors that do
// not match, all get the same error instead of corrupting each other.
//
// Sharded: a batch.Option that makes a batch run (batch.Run, the client's
// RunBatch, the generated <Task>Batch methods) run only this rank's share
// of the items and gather every rank's outputs, in the original order, on
// rank 0 or on every rank.
package dist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/proc/torchrun"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// DefaultTimeout bounds joining and every collective unless WithTimeout
// says otherwise: torch's default process-group timeout.
const DefaultTimeout = 30 * time.Minute

// Backends.
const (
	// Gloo runs collectives on the CPU over TCP.
	Gloo = "gloo"
	// NCCL runs collectives on CUDA devices.
	NCCL = "nccl"
)

// EnvSocketInterfaces names the network interfaces Gloo uses, comma
// separated (torch's variable); unset, Gloo binds the address the host name
// resolves to, or loopback.
const EnvSocketInterfaces = "GLOO_SOCKET_IFNAME"

// Sentinel errors; test with errors.Is.
var (
	// ErrUnsupported means the engine cannot join process groups.
	ErrUnsupported = errors.New("the engine cannot join process groups")
	// ErrTimeout means a collective (or joining) did not complete within
	// the group's timeout: a rank died, is stuck, or never called it.
	ErrTimeout = errors.New("timed out waiting for the other ranks")
	// ErrGroupFailed means a collective of the group failed (a dead peer,
	// a timeout, a cancellation): the ranks no longer agree on where they
	// are, so the group refuses further collectives.
	ErrGroupFailed = errors.New("process group failed")
	// ErrClosed means the group was used after Close.
	ErrClosed = errors.New("process group closed")
)

// ReduceOp is the reduction of AllReduce.
type ReduceOp int

// Reductions.
const (
	Sum ReduceOp = iota
	Product
	Min
	Max
)

// String returns the reduction's name.
func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Product:
		return "product"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// Config is what an engine needs to join a group (Join resolves it).
type Config struct {
	// Rank and Size place this worker in the group: 0 <= Rank < Size.
	Rank, Size int
	// MasterAddr and MasterPort locate the group's TCP store, which rank 0
	// hosts, unless AgentStore says it is the launcher's.
	MasterAddr string
	MasterPort int
	// AgentStore says every rank, rank 0 included, connects to the
	// launcher's store (torchrun.Worker.AgentStore).
	AgentStore bool
	// Backend is Gloo or NCCL.
	Backend string
	// Device is where collectives run: "cpu" for Gloo, "cuda:N" for NCCL.
	Device string
	// Timeout bounds joining and every collective.
	Timeout time.Duration
	// Interfaces are the network interfaces Gloo uses; empty means the
	// address the host name resolves to, else loopback.
	Interfaces []string
	// Prefix is the store key prefix of this group, the same on every rank
	// and different for each group joined at one store.
	Prefix string
}

// Comm is a joined group as an engine provides it. Every rank calls the
// same methods in the same order with buffers of the same length (Group
// checks this before calling); data is the caller's memory, read and
// written during the call only. A call that did not complete within the
// group's timeout or the context's deadline returns an error matching
// ErrTimeout; one stopped by the context's cancellation matches ctx.Err().
type Comm interface {
	// AllReduce reduces data, elements of dtype, in place.
	AllReduce(ctx context.Context, data []byte, dtype tensor.DType, op ReduceOp) error
	// Broadcast copies root's data into every rank's data.
	Broadcast(ctx context.Context, data []byte, root int) error
	// AllGather writes every rank's in, in rank order, to all
	// (Size*len(in) bytes).
	AllGather(ctx context.Context, in, all []byte) error
	// Gather is AllGather to root only; all is nil on the other ranks.
	Gather(ctx context.Context, in, all []byte, root int) error
	// Close leaves the group.
	Close() error
}

// Joiner is an engine that can join process groups, found by type
// assertion on the engine.Engine.
type Joiner interface {
	// ProcessGroupBackends lists the backends the engine was built with
	// (Gloo, NCCL).
	ProcessGroupBackends() []string
	// JoinProcessGroup joins the group cfg describes; it returns when every
	// rank has joined, or with an error within cfg.Timeout.
	JoinProcessGroup(ctx context.Context, cfg Config) (Comm, error)
}

type options struct {
	engine     engine.Engine
	worker     *torchrun.Worker
	backend    string
	timeout    time.Duration
	interfaces []string
	ifacesSet  bool
}

// Option configures Join.
type Option func(*options)

// WithEngine joins through e instead of the registered engine.
func WithEngine(e engine.Engine) Option { return func(o *options) { o.engine = e } }

// WithWorker places this process in the job as w says instead of reading
// torchrun's environment (torchrun.WorkerFromEnv).
func WithWorker(w torchrun.Worker) Option { return func(o *options) { o.worker = &w } }

// WithBackend chooses the backend: Gloo, NCCL, or "" (the default) for NCCL
// when the engine has it and CUDA devices are visible, Gloo otherwise.
func WithBackend(name string) Option { return func(o *options) { o.backend = name } }

// WithTimeout bounds joining and every collective (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithInterfaces names the network interfaces Gloo uses (default: the
// GLOO_SOCKET_IFNAME variable).
func WithInterfaces(names ...string) Option {
	return func(o *options) { o.interfaces, o.ifacesSet = names, true }
}

// joins counts the groups this process joined per store and rank, so that
// the n-th group a rank joins at a store gets the same key prefix on every
// rank (and ranks of one job living in one process do not share a count).
var joins = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// nextPrefix is the store key prefix of w's next group: the launcher's
// restart count (a launcher's own store outlives the workers it restarts,
// and with it their keys) and the number of groups joined at that store.
func nextPrefix(w torchrun.Worker) string {
	key := fmt.Sprintf("%s:%d/%d", w.MasterAddr, w.MasterPort, w.Rank)
	joins.Lock()
	defer joins.Unlock()
	joins.n[key]++
	return fmt.Sprintf("wfgen/attempt_%d/%d/", w.RestartCount, joins.n[key])
}

// Join joins the job's process group. Every rank of the job calls it; it
// returns when all have joined, or with an error within the timeout (or the
// context's deadline, if earlier): a rank that never comes, a store that
// cannot be reached. Without an engine that can join groups the error
// matches engine.ErrNoEngine or ErrUnsupported.
func Join(ctx context.Context, opts ...Option) (*Group, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("dist: join: timeout %v is not positive", o.timeout)
	}
	e := o.engine
	if e == nil {
		var err error
		if e, err = engine.DefaultEngine(); err != nil {
			return nil, fmt.Errorf("dist: join: %w", err)
		}
	}
	j, ok := e.(Joiner)
	if !ok {
		return nil, fmt.Errorf("dist: join: engine %s: %w", e.Name(), ErrUnsupported)
	}
	var w torchrun.Worker
	if o.worker != nil {
		w = *o.worker
	} else {
		var err error
		if w, err = torchrun.WorkerFromEnv(); err != nil {
			return nil, fmt.Errorf("dist: join: %w", err)
		}
	}
	if w.WorldSize < 1 || w.Rank < 0 || w.Rank >= w.WorldSize {
		return nil, fmt.Errorf("dist: join: rank %d is outside a world of %d", w.Rank, w.WorldSize)
	}
	backend, device, err := chooseBackend(o.backend, j.ProcessGroupBackends(), w, engine.CUDADevices(e))
	if err != nil {
		return nil, fmt.Errorf("dist: join: %w", err)
	}
	ifaces := o.interfaces
	if !o.ifacesSet {
		ifaces = splitList(os.Getenv(EnvSocketInterfaces))
	}
	cfg := Config{
		Rank: w.Rank, Size: w.WorldSize, MasterAddr: w.MasterAddr, MasterPort: w.MasterPort, AgentStore: w.AgentStore,
		Backend: backend, Device: device, Timeout: o.timeout, Interfaces: ifaces,
		Prefix: nextPrefix(w),
	}
	comm, err := j.JoinProcessGroup(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("dist: join rank %d of %d (%s, store %s:%d): %w", w.Rank, w.WorldSize, backend, w.MasterAddr, w.MasterPort, err)
	}
	return &Group{comm: comm, cfg: cfg}, nil
}

// chooseBackend resolves the backend and the device collectives run on from
// the request, the engine's backends and the visible CUDA devices.
func chooseBackend(requested string, available []string, w torchrun.Worker, cudaDevices int) (backend, device string, err error) {
	has := func(b string) bool {
		for _, a := range available {
			if a == b {
				return true
			}
		}
		return false
	}
	switch requested {
	case "", "auto":
		if has(NCCL) && cudaDevices > 0 {
			return chooseBackend(NCCL, available, w, cudaDevices)
		}
		if !has(Gloo) {
			return "", "", fmt.Errorf("the engine has no gloo backend (it has %v)", available)
		}
		return Gloo, "cpu", nil
	case Gloo:
		if !has(Gloo) {
			return "", "", fmt.Errorf("the engine has no gloo backend (it has %v)", available)
		}
		return Gloo, "cpu", nil
	case NCCL:
		if !has(NCCL) {
			return "", "", fmt.Errorf("backend nccl: the engine was built without NCCL (it has %v)", available)
		}
		if cudaDevices < 1 {
			return "", "", errors.New("backend nccl: no CUDA device is visible")
		}
		dev, err := w.LocalDevice(cudaDevices)
		if err != nil {
			return "", "", fmt.Errorf("backend nccl: %w", err)
		}
		return NCCL, dev, nil
	}
	return "", "", fmt.Errorf("unknown backend %q (want %q, %q or \"\" for the default)", requested, Gloo, NCCL)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
