package dist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/batch"
	"github.com/worldfoundry/wfgen/runtime/dist"
	"github.com/worldfoundry/wfgen/runtime/proc/torchrun"
	_ "github.com/worldfoundry/wfgen/runtime/torch"

	"github.com/worldfoundry/wfgen/runtime/engine"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// requireEngine skips when no engine that joins groups is linked (a build
// without cgo): the error must then say so.
func requireEngine(t *testing.T) {
	t.Helper()
	e, err := engine.DefaultEngine()
	if err != nil {
		if !errors.Is(err, engine.ErrNoEngine) {
			t.Fatal(err)
		}
		t.Skipf("no engine in this build: %v", err)
	}
	if _, ok := e.(dist.Joiner); !ok {
		t.Fatalf("engine %s cannot join process groups", e.Name())
	}
}

// world joins size ranks in this process (one goroutine each) and calls fn
// on each; it returns every rank's error.
func world(t *testing.T, size int, timeout time.Duration, fn func(g *dist.Group) error) []error {
	t.Helper()
	return worldB(t, size, timeout, fn)
}

// worldB is world for tests and benchmarks.
func worldB(t testing.TB, size int, timeout time.Duration, fn func(g *dist.Group) error) []error {
	t.Helper()
	port := enginetest.Port(t)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := 0; r < size; r++ {
		if r == 1 {
			// c10d's store client retries a refused connection only once a
			// second: let rank 0's store listen first.
			waitListening(t, port)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := torchrun.Worker{Rank: r, WorldSize: size, LocalRank: r, LocalWorldSize: size, MasterAddr: "127.0.0.1", MasterPort: port}
			g, err := dist.Join(context.Background(), dist.WithWorker(w), dist.WithTimeout(timeout), dist.WithInterfaces("lo"))
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			errs[r] = fn(g)
		}()
	}
	wg.Wait()
	return errs
}

// waitListening returns once something listens on the loopback port.
func waitListening(t testing.TB, port int) {
	t.Helper()
	enginetest.WaitFor(t, fmt.Sprintf("a listener on port %d", port), func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Setenv("OMP_NUM_THREADS", "1")
		os.Exit(m.Run())
	case "loop":
		os.Exit(loopWorker())
	case "sigpipe":
		os.Exit(sigpipeWorker())
	default:
		os.Exit(2)
	}
}

func TestCollectives(t *testing.T) {
	requireEngine(t)
	const size = 3
	errs := world(t, size, 20*time.Second, func(g *dist.Group) error {
		ctx := context.Background()
		r := float32(g.Rank())
		x := tensor.FromFloat32([]float32{r + 1, 10 * (r + 1)}, 2)
		if err := g.AllReduce(ctx, x, dist.Sum); err != nil {
			return err
		}
		if v, _ := x.Float32s(); v[0] != 6 || v[1] != 60 {
			return fmt.Errorf("all_reduce sum = %v", v)
		}
		all, err := g.AllGather(ctx, tensor.FromInt64(make([]int64, g.Rank()+1), int64(g.Rank()+1)))
		if err != nil {
			return err
		}
		for i, a := range all {
			if a.DType != tensor.Int64 || len(a.Shape) != 1 || a.Shape[0] != int64(i+1) {
				return fmt.Errorf("all_gather[%d] = %s%v", i, a.DType, a.Shape)
			}
		}
		var b *tensor.Tensor
		if g.Rank() == 1 {
			b = tensor.FromFloat32([]float32{7, 8, 9}, 3, 1)
		}
		got, err := g.Broadcast(ctx, b, 1)
		if err != nil {
			return err
		}
		if v, _ := got.Float32s(); len(v) != 3 || v[2] != 9 || got.Shape[0] != 3 {
			return fmt.Errorf("broadcast = %v %v", got.Shape, v)
		}
		gs, err := g.Gather(ctx, tensor.FromFloat32([]float32{r}, 1), 0)
		if err != nil {
			return err
		}
		if g.Rank() == 0 {
			for i, x := range gs {
				if v, _ := x.Float32s(); v[0] != float32(i) {
					return fmt.Errorf("gather[%d] = %v", i, v)
				}
			}
		} else if gs != nil {
			return fmt.Errorf("gather on rank %d returned %v", g.Rank(), gs)
		}
		return g.Barrier(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestMismatchIsAnErrorOnEveryRank(t *testing.T) {
	requireEngine(t)
	errs := world(t, 2, 20*time.Second, func(g *dist.Group) error {
		ctx := context.Background()
		x := tensor.FromFloat32(make([]float32, g.Rank()+1), int64(g.Rank()+1))
		err := g.AllReduce(ctx, x, dist.Sum)
		if err == nil {
			return errors.New("mismatched all_reduce succeeded")
		}
		if !strings.Contains(err.Error(), "same dtype and shape") {
			return fmt.Errorf("unexpected error: %w", err)
		}
		// The group is still in step.
		y := tensor.FromFloat32([]float32{1}, 1)
		if err := g.AllReduce(ctx, y, dist.Max); err != nil {
			return err
		}
		if g.Rank() == 0 {
			_, err = g.Broadcast(ctx, y, 0)
		} else {
			err = g.Barrier(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), "same collectives in the same order") {
			return fmt.Errorf("misordered collectives: %v", err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestTimeoutAndCancellation: a rank that never calls the collective makes
// the other's wait end with ErrTimeout, not before the group's timeout; a
// cancelled context or a passed deadline ends the wait although the
// group's timeout is far off; either leaves the group failed. No upper
// bound is measured: the errors say what ended each wait (a cancellation
// not seen would end it with ErrTimeout only after enginetest.Patience).
func TestTimeoutAndCancellation(t *testing.T) {
	requireEngine(t)
	for _, how := range []string{"timeout", "cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			timeout := enginetest.Patience
			if how == "timeout" {
				timeout = 1500 * time.Millisecond
			}
			done := make(chan struct{})
			errs := world(t, 2, timeout, func(g *dist.Group) error {
				if g.Rank() == 1 {
					<-done // alive, but never calls the collective
					return nil
				}
				defer close(done)
				ctx := context.Background()
				var cancel context.CancelFunc
				switch how {
				case "cancel":
					// A delay, not synchronisation: cancelled before
					// the wait or during it, the wait ends with it.
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(300*time.Millisecond, cancel)
				case "deadline":
					ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				}
				if cancel != nil {
					defer cancel()
				}
				start := time.Now()
				err := g.AllReduce(ctx, tensor.FromFloat32([]float32{1}, 1), dist.Sum)
				took := time.Since(start)
				want := dist.ErrTimeout
				switch how {
				case "cancel":
					want = context.Canceled
				case "deadline":
					want = context.DeadlineExceeded
				}
				if !errors.Is(err, want) || !errors.Is(err, dist.ErrGroupFailed) {
					return fmt.Errorf("got %v, want %v and ErrGroupFailed", err, want)
				}
				if how == "timeout" && took < timeout-50*time.Millisecond {
					// A lower bound only: a loaded machine makes the wait
					// longer, never shorter.
					return fmt.Errorf("timed out after %v, before the group's timeout %v", took, timeout)
				}
				if err := g.Barrier(context.Background()); !errors.Is(err, dist.ErrGroupFailed) {
					return fmt.Errorf("failed group: barrier = %v", err)
				}
				t.Logf("%s: %v after %v", how, err, took.Round(time.Millisecond))
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func TestClosedGroup(t *testing.T) {
	requireEngine(t)
	errs := world(t, 1, 10*time.Second, func(g *dist.Group) error {
		if err := g.Close(); err != nil {
			return err
		}
		if err := g.Barrier(context.Background()); !errors.Is(err, dist.ErrClosed) {
			return fmt.Errorf("barrier after close: %v", err)
		}
		return nil
	})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
}

// TestJoinTimesOutWithoutPeers: a rank whose rank 0 never comes fails with
// ErrTimeout, not before the timeout, and by its own wait for the store
// (c10d's store client would retry for up to twice as long on libtorch
// 2.x: the error says the store never accepted a connection, which only
// that wait reports); a cancelled context ends the wait although the
// timeout is far off.
func TestJoinTimesOutWithoutPeers(t *testing.T) {
	requireEngine(t)
	w := torchrun.Worker{Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: enginetest.Port(t)}
	const timeout = 2 * time.Second
	start := time.Now()
	_, err := dist.Join(context.Background(), dist.WithWorker(w), dist.WithTimeout(timeout), dist.WithInterfaces("lo"))
	took := time.Since(start)
	if !errors.Is(err, dist.ErrTimeout) || !strings.Contains(err.Error(), "does not accept connections") {
		t.Fatalf("join without rank 0: %v, want ErrTimeout from the wait for the store", err)
	}
	if took < timeout {
		t.Errorf("join gave up after %v with a %v timeout", took, timeout) // a lower bound only
	}
	t.Log(err)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel) // a delay, not synchronisation
	_, err = dist.Join(ctx, dist.WithWorker(w), dist.WithTimeout(enginetest.Patience), dist.WithInterfaces("lo"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled join: %v, want context.Canceled", err)
	}
}

// TestShardedBatchRun runs one batch job over three ranks of a real group:
// outputs holding tensors come back on rank 0 (or every rank) in input
// order, equal to the unsharded run's.
func TestShardedBatchRun(t *testing.T) {
	requireEngine(t)
	items := make([]int, 29)
	for i := range items {
		items[i] = i
	}
	forward := func(_ context.Context, b []int) ([]map[string]any, error) {
		out := make([]map[string]any, len(b))
		for i, x := range b {
			v := make([]float32, x%5+1)
			for j := range v {
				v[j] = float32(x) + float32(j)/8
			}
			out[i] = map[string]any{"v": tensor.FromFloat32(v, int64(len(v))), "n": int64(x), "tag": fmt.Sprint("item", x)}
		}
		return out, nil
	}
	opts := []batch.Option{batch.WithMaxBatchSize(4), batch.WithPadSizes(1, 2, 4)}
	want, err := batch.Run(context.Background(), items, forward, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, every := range []bool{false, true} {
		errs := world(t, 3, 20*time.Second, func(g *dist.Group) error {
			var so []dist.ShardOption
			if every {
				so = append(so, dist.OnEveryRank())
			}
			got, err := batch.Run(context.Background(), items, forward, append(opts, dist.Sharded(g, so...))...)
			if err != nil {
				return err
			}
			if g.Rank() != 0 && !every {
				if got != nil {
					return fmt.Errorf("rank %d received outputs", g.Rank())
				}
				return nil
			}
			if len(got) != len(want) {
				return fmt.Errorf("%d outputs, want %d", len(got), len(want))
			}
			for i := range want {
				a, b := got[i]["v"].(*tensor.Tensor), want[i]["v"].(*tensor.Tensor)
				if a == nil || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) ||
					got[i]["n"] != want[i]["n"] || got[i]["tag"] != want[i]["tag"] {
					return fmt.Errorf("item %d: %v, want %v", i, got[i], want[i])
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("every rank %v: rank %d: %v", every, r, err)
			}
		}
	}
	// Without a group the option changes nothing.
	got, err := batch.Run(context.Background(), items, forward, append(opts, dist.Sharded(nil))...)
	if err != nil || len(got) != len(items) {
		t.Errorf("Sharded(nil): %d outputs, %v", len(got), err)
	}
}

// TestJoinNeedsAJoiner: an engine without process groups, and no engine at
// all (a build without cgo), are clear errors.
func TestJoinNeedsAJoiner(t *testing.T) {
	w := torchrun.Worker{Rank: 0, WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 1}
	_, err := dist.Join(context.Background(), dist.WithEngine(&enginetest.Engine{Label: "plain"}), dist.WithWorker(w))
	if !errors.Is(err, dist.ErrUnsupported) || !strings.Contains(err.Error(), "engine plain") {
		t.Errorf("plain engine: %v", err)
	}
	if _, derr := engine.DefaultEngine(); derr != nil {
		_, err = dist.Join(context.Background(), dist.WithWorker(w))
		if !errors.Is(err, engine.ErrNoEngine) {
			t.Errorf("no engine: %v", err)
		}
	}
	t.Setenv("RANK", "")
	if _, err := dist.Join(context.Background(), dist.WithEngine(joinerOnly{&enginetest.Engine{}})); err == nil || !strings.Contains(err.Error(), "not running as a torchrun worker") {
		t.Errorf("outside torchrun: %v", err)
	}
}

// joinerOnly is an engine that could join, to reach the check of
// torchrun's environment.
type joinerOnly struct{ *enginetest.Engine }

func (joinerOnly) ProcessGroupBackends() []string { return []string{dist.Gloo} }
func (joinerOnly) JoinProcessGroup(context.Context, dist.Config) (dist.Comm, error) {
	return nil, errors.New("not reached")
}

// TestNCCLOnThisBuild: the engine lists the backends its shim was built
// with; asking for NCCL where it is missing is a clear error, both through
// Join and from the shim itself.
func TestNCCLOnThisBuild(t *testing.T) {
	requireEngine(t)
	e, _ := engine.DefaultEngine()
	j := e.(dist.Joiner)
	backends := j.ProcessGroupBackends()
	if !slices.Contains(backends, dist.Gloo) {
		t.Fatalf("backends %v lack gloo", backends)
	}
	if slices.Contains(backends, dist.NCCL) {
		t.Skip("this build has NCCL")
	}
	w := torchrun.Worker{Rank: 0, WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: enginetest.Port(t)}
	_, err := dist.Join(context.Background(), dist.WithWorker(w), dist.WithBackend(dist.NCCL), dist.WithTimeout(5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "built without NCCL") {
		t.Errorf("join with nccl: %v", err)
	}
	_, err = j.JoinProcessGroup(context.Background(), dist.Config{Rank: 0, Size: 1, MasterAddr: "127.0.0.1",
		MasterPort: enginetest.Port(t), Backend: dist.NCCL, Device: "cuda:0", Timeout: 5 * time.Second, Prefix: "nccl/"})
	if err == nil || !strings.Contains(err.Error(), "no NCCL") {
		t.Errorf("shim join with nccl: %v", err)
	}
	t.Log(err)
}
