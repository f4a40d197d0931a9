//go:build cgo

package torch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/worldfoundry/wfgen/runtime/dist"
	"github.com/worldfoundry/wfgen/runtime/torch/internal/shim"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// The engine joins process groups (package runtime/dist) with libtorch's
// c10d: a TCPStore hosted by rank 0 and ProcessGroupGloo, or
// ProcessGroupNCCL in builds that have it.
var _ dist.Joiner = (*Engine)(nil)

// ProcessGroupBackends lists the process-group backends the shim was built
// with: dist.Gloo always, dist.NCCL when libtorch has it (USE_C10D_NCCL).
func (e *Engine) ProcessGroupBackends() []string {
	b := shim.DistBackends()
	var out []string
	if b&shim.DistGloo != 0 {
		out = append(out, dist.Gloo)
	}
	if b&shim.DistNCCL != 0 {
		out = append(out, dist.NCCL)
	}
	return out
}

// ncclEnv makes NCCL failures errors of the waiting call rather than an
// abort of the process by libtorch's watchdog: blocking wait (the wait
// itself times out and throws) and no asynchronous error handling (which
// tears the process down). Names of libtorch 1.x and 2.x; a value the
// environment already gives is kept.
var ncclEnv = [][2]string{
	{"NCCL_BLOCKING_WAIT", "1"}, {"TORCH_NCCL_BLOCKING_WAIT", "1"},
	{"NCCL_ASYNC_ERROR_HANDLING", "0"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"},
}

var sigpipeOnce sync.Once

// receiveSIGPIPE keeps a write to a dead peer from killing the process.
// libtorch's Gloo transport writes to its sockets from its own threads with
// writev, which raises SIGPIPE when the peer is gone; a Go program's default
// for SIGPIPE on a thread that Go did not start is to die of it (os/signal,
// "Go programs that use cgo"). Once SIGPIPE is delivered to a Notify
// channel, such a write fails with EPIPE instead and Gloo reports the dead
// peer as an error — Python ignores SIGPIPE for the same reason. The
// channel is never read: signals that do not fit are dropped.
func receiveSIGPIPE() {
	sigpipeOnce.Do(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
}

// JoinProcessGroup joins the group cfg describes (see dist.Joiner). Joining
// is bounded by cfg.Timeout and ctx's deadline; ctx's cancellation is seen
// while a rank waits for the store to listen, not during the rendezvous
// that follows.
func (e *Engine) JoinProcessGroup(ctx context.Context, cfg dist.Config) (dist.Comm, error) {
	if err := e.init(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("timeout %v is not positive", cfg.Timeout)
	}
	start := time.Now()
	timeout, byCtx := effectiveTimeout(ctx, cfg.Timeout)
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	var code int
	switch cfg.Backend {
	case dist.Gloo:
		code = shim.DistGloo
	case dist.NCCL:
		code = shim.DistNCCL
		for _, kv := range ncclEnv {
			if _, ok := os.LookupEnv(kv[0]); !ok {
				os.Setenv(kv[0], kv[1])
			}
		}
	default:
		return nil, fmt.Errorf("unknown backend %q", cfg.Backend)
	}
	receiveSIGPIPE()
	host := cfg.Rank == 0 && !cfg.AgentStore
	if !host {
		if err := waitForStore(ctx, net.JoinHostPort(cfg.MasterAddr, strconv.Itoa(cfg.MasterPort)), start, timeout, byCtx); err != nil {
			return nil, err
		}
	}
	left := timeout - time.Since(start)
	if left <= 0 {
		return nil, timedOut(byCtx, timeout, errors.New("no time left after reaching the store"))
	}
	g, res := shim.DistJoin(code, cfg.MasterAddr, cfg.MasterPort, host, cfg.Prefix, cfg.Rank, cfg.Size,
		milliseconds(left), milliseconds(cfg.Timeout), cfg.Device, strings.Join(cfg.Interfaces, ","))
	if res.Status != statusOK {
		err := newError("join", "", "", res.Status, string(res.Payload))
		return nil, classify(ctx, err, start, timeout, byCtx)
	}
	return &comm{g: g, timeout: cfg.Timeout}, nil
}

// waitForStore waits until the store (rank 0's or the launcher's) accepts
// connections. c10d's own
// client gives up on a refused connection only after retrying for up to
// the timeout once per second (1.x), or after the timeout, a back-off and
// another timeout (2.x: about twice as long); dialing here first keeps
// joining within the timeout and lets ctx's cancellation end the wait. The
// store drops the probe connection, which never sends a request.
func waitForStore(ctx context.Context, addr string, start time.Time, timeout time.Duration, byCtx bool) error {
	var d net.Dialer
	for {
		left := timeout - time.Since(start)
		if left <= 0 {
			return timedOut(byCtx, timeout, fmt.Errorf("the store at %s does not accept connections", addr))
		}
		actx, cancel := context.WithTimeout(ctx, min(left, time.Second))
		c, err := d.DialContext(actx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if ctx.Err() == context.Canceled {
			return fmt.Errorf("%w: waiting for the store at %s", context.Canceled, addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(50*time.Millisecond, max(left, 0))):
		}
	}
}

// timedOut is the error of a join or collective that ran out of time:
// ctx's deadline (byCtx) or the group's timeout.
func timedOut(byCtx bool, timeout time.Duration, err error) error {
	if byCtx {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w (%v): %w", dist.ErrTimeout, timeout, err)
}

// comm is a joined group in C++ memory.
type comm struct {
	g       shim.Group
	timeout time.Duration
	ops     atomic.Int64
	once    sync.Once
}

// effectiveTimeout is the group's timeout, or the time left until ctx's
// deadline when that is sooner (byCtx).
func effectiveTimeout(ctx context.Context, timeout time.Duration) (d time.Duration, byCtx bool) {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			return left, true
		}
	}
	return timeout, false
}

func milliseconds(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}

// classify says why a group call failed: ctx's cancellation ended it, or it
// ran out of time — ctx's deadline (context.DeadlineExceeded) or the
// group's timeout (dist.ErrTimeout) —, or something else (a dead peer).
func classify(ctx context.Context, err *Error, start time.Time, timeout time.Duration, byCtx bool) error {
	if ctx.Err() == context.Canceled {
		return fmt.Errorf("%w: %w", context.Canceled, err)
	}
	if time.Since(start) < timeout && !isTimeoutMessage(err.Message) {
		return err
	}
	return timedOut(byCtx, timeout, err)
}

// timeoutMarkers are substrings of the messages of c10d and Gloo waits that
// ran out of time. Their own deadlines can end before ours: c10d's store
// connect retries once a second and gives up when less than a second is
// left.
var timeoutMarkers = []string{"timed out", "timeout"}

func isTimeoutMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, k := range timeoutMarkers {
		if strings.Contains(m, k) {
			return true
		}
	}
	return false
}

// run makes one collective call: bounded by the group's timeout and ctx's
// deadline, and ended early by ctx's cancellation (the shim checks every
// 50 ms).
func (c *comm) run(ctx context.Context, what string, call func(opID, timeoutMS int64) shim.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout, byCtx := effectiveTimeout(ctx, c.timeout)
	if timeout <= 0 {
		return context.DeadlineExceeded
	}
	id := c.ops.Add(1)
	stop := context.AfterFunc(ctx, func() { shim.DistCancel(c.g, id) })
	start := time.Now()
	res := call(id, milliseconds(timeout))
	stop()
	if res.Status == statusOK {
		return nil
	}
	return classify(ctx, newError(what, "", "", res.Status, string(res.Payload)), start, timeout, byCtx)
}

func (c *comm) AllReduce(ctx context.Context, data []byte, dtype tensor.DType, op dist.ReduceOp) error {
	code, err := dtypeCode(dtype)
	if err != nil {
		return err
	}
	size := dtype.Size()
	if len(data)%size != 0 {
		return fmt.Errorf("all_reduce: %d bytes is not a whole number of %s elements", len(data), dtype)
	}
	var sop int
	switch op {
	case dist.Sum:
		sop = shim.DistSum
	case dist.Product:
		sop = shim.DistProduct
	case dist.Min:
		sop = shim.DistMin
	case dist.Max:
		sop = shim.DistMax
	default:
		return fmt.Errorf("all_reduce: unknown reduce op %v", op)
	}
	return c.run(ctx, "all_reduce", func(id, ms int64) shim.Result {
		return shim.DistAllReduce(c.g, id, data, code, int64(len(data)/size), sop, ms)
	})
}

func (c *comm) Broadcast(ctx context.Context, data []byte, root int) error {
	return c.run(ctx, "broadcast", func(id, ms int64) shim.Result {
		return shim.DistBroadcast(c.g, id, data, root, ms)
	})
}

func (c *comm) AllGather(ctx context.Context, in, all []byte) error {
	return c.run(ctx, "all_gather", func(id, ms int64) shim.Result {
		return shim.DistAllGather(c.g, id, in, all, ms)
	})
}

func (c *comm) Gather(ctx context.Context, in, all []byte, root int) error {
	return c.run(ctx, "gather", func(id, ms int64) shim.Result {
		return shim.DistGather(c.g, id, in, all, root, ms)
	})
}

// Close leaves the group; libtorch first waits for collectives its threads
// still run (at most the group's timeout).
func (c *comm) Close() error {
	c.once.Do(func() { shim.DistClose(c.g) })
	return nil
}
