package dist_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/dist"

	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// roleEnv selects what the re-executed test binary does.
const roleEnv = "WFGEN_DIST_TEST_ROLE"

// loopWorker joins from torchrun's variables and all-reduces until it
// fails, printing one JSON line per step and one for the failure.
func loopWorker() int {
	timeout, _ := time.ParseDuration(os.Getenv("WFGEN_DIST_TEST_TIMEOUT"))
	g, err := dist.Join(context.Background(), dist.WithTimeout(timeout))
	if err != nil {
		fmt.Printf("{\"error\":%q}\n", err.Error())
		return 3
	}
	defer g.Close()
	n, _ := strconv.Atoi(os.Getenv("WFGEN_DIST_TEST_ELEMS"))
	x := tensor.Zeros(tensor.Float32, int64(max(n, 1)))
	for step := 0; ; step++ {
		start := time.Now()
		if err := g.AllReduce(context.Background(), x, dist.Sum); err != nil {
			b, _ := json.Marshal(map[string]any{"error": err.Error(), "wait_ms": time.Since(start).Milliseconds(),
				"timeout": errors.Is(err, dist.ErrTimeout), "failed": errors.Is(err, dist.ErrGroupFailed)})
			fmt.Printf("%s\n", b)
			return 3
		}
		fmt.Printf("{\"step\":%d}\n", step)
		time.Sleep(5 * time.Millisecond)
	}
}

type workerLine struct {
	Step    *int   `json:"step"`
	Error   string `json:"error"`
	WaitMS  int64  `json:"wait_ms"`
	Timeout bool   `json:"timeout"`
	Failed  bool   `json:"failed"`
}

// TestKilledWorkerFailsTheOthers starts four worker processes with
// torchrun's variables, lets them all-reduce, kills one with SIGKILL and
// checks that every other one returns an error (not a hang, not a crash):
// its collective fails on the dead peer or at the group's timeout.
func TestKilledWorkerFailsTheOthers(t *testing.T) {
	requireEngine(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const size = 4
	const timeout = 8 * time.Second
	elems := 1 << 16
	if s := os.Getenv("ELEMS"); s != "" {
		elems, _ = strconv.Atoi(s)
	}
	for _, victim := range []int{2, 0} {
		t.Run("rank"+strconv.Itoa(victim), func(t *testing.T) {
			port := enginetest.Port(t)
			cmds := make([]*exec.Cmd, size)
			lines := make([]chan workerLine, size)
			var wg sync.WaitGroup
			for r := range cmds {
				c := exec.Command(exe, "-test.run=^$")
				c.Env = append(os.Environ(), roleEnv+"=loop", "WFGEN_DIST_TEST_TIMEOUT="+timeout.String(),
					"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(size), "LOCAL_RANK="+strconv.Itoa(r),
					"LOCAL_WORLD_SIZE="+strconv.Itoa(size), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
					"GLOO_SOCKET_IFNAME=lo", "OMP_NUM_THREADS=1", "WFGEN_DIST_TEST_ELEMS="+strconv.Itoa(elems))
				c.Stderr = os.Stderr
				out, err := c.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[r] = c
				lines[r] = make(chan workerLine, 1024)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer close(lines[r])
					sc := bufio.NewScanner(out)
					for sc.Scan() {
						var l workerLine
						if json.Unmarshal(sc.Bytes(), &l) == nil {
							lines[r] <- l
						}
					}
				}()
			}
			t.Cleanup(func() {
				for _, c := range cmds {
					c.Process.Kill()
				}
			})
			// Wait until every rank has done a few steps.
			for r := range size {
				for {
					l, ok := <-lines[r]
					if !ok || l.Error != "" {
						t.Fatalf("rank %d stopped before the kill: %+v", r, l)
					}
					if *l.Step >= 3 {
						break
					}
				}
			}
			killed := time.Now()
			if err := cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for r := range size {
				if r == victim {
					continue
				}
				// The rank's last line and exit; only a hang makes the
				// wait reach enginetest.Patience (the group's timeout is
				// 8 s), and how long it took is logged, not asserted.
				type end struct {
					last workerLine
					err  error
				}
				ended := make(chan end, 1)
				go func() {
					var last workerLine
					for l := range lines[r] {
						last = l
					}
					ended <- end{last, cmds[r].Wait()}
				}()
				e := enginetest.Receive(t, fmt.Sprintf("rank %d to fail after the kill", r), ended)
				last, err := e.last, e.err
				took := time.Since(killed)
				if last.Error == "" {
					t.Errorf("rank %d ended without an error line (%v)", r, err)
					continue
				}
				if code := cmds[r].ProcessState.ExitCode(); code != 3 {
					t.Errorf("rank %d exited %d (%v), want 3 after reporting the error", r, code, cmds[r].ProcessState)
				}
				if !last.Failed {
					t.Errorf("rank %d: error does not match ErrGroupFailed: %s", r, last.Error)
				}
				t.Logf("rank %d failed %v after the kill (waited %d ms, timeout=%v): %s", r, took.Round(time.Millisecond), last.WaitMS, last.Timeout, last.Error)
			}
			cmds[victim].Wait()
			wg.Wait()
		})
	}
}

// sigpipeWorker joins a group of one and sends SIGPIPE to every thread of
// the process, libtorch's and Gloo's included, as a write to a dead peer
// from one of them does; it prints "alive" if the process survived.
func sigpipeWorker() int {
	g, err := dist.Join(context.Background(), dist.WithTimeout(20*time.Second))
	if err != nil {
		fmt.Println(err)
		return 3
	}
	defer g.Close()
	if err := g.AllReduce(context.Background(), tensor.FromFloat32([]float32{1}, 1), dist.Sum); err != nil {
		fmt.Println(err)
		return 3
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		fmt.Println(err)
		return 3
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		syscall.Tgkill(os.Getpid(), tid, syscall.SIGPIPE)
	}
	// Alive once no thread has SIGPIPE pending any more: every one was
	// delivered (a fatal one would have ended the process).
	for deadline := time.Now().Add(enginetest.Patience); sigpipePending(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			fmt.Println("SIGPIPE still pending")
			return 3
		}
	}
	fmt.Printf("alive after SIGPIPE to %d threads\n", len(tasks))
	return 0
}

// sigpipePending reports whether a thread of the process (or the process)
// has SIGPIPE pending, from /proc/self/task/*/status.
func sigpipePending() bool {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread has exited
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok || (k != "SigPnd" && k != "ShdPnd") {
				continue
			}
			if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(syscall.SIGPIPE-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// TestSIGPIPEOnLibtorchThreadsIsSurvived checks that a process in a group
// survives SIGPIPE on threads Go did not start (Gloo writes to its sockets
// with writev from its own threads, and a Go program dies of SIGPIPE there
// by default).
func TestSIGPIPEOnLibtorchThreadsIsSurvived(t *testing.T) {
	requireEngine(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe, "-test.run=^$")
	c.Env = append(os.Environ(), roleEnv+"=sigpipe", "RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(enginetest.Port(t)), "GLOO_SOCKET_IFNAME=lo")
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "alive") {
		t.Fatalf("worker: %v (%v)\n%s", err, c.ProcessState, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
