package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/proc"
	"github.com/worldfoundry/wfgen/runtime/proc/torchrun"
)

// roleEnv makes the test binary the example program (its arguments are the
// program's flags).
const roleEnv = "WFGEN_SHARDED_TEST_ROLE"

// markEnv tags every process a test starts, to find stragglers.
const markEnv = "WFGEN_SHARDED_TEST_MARK"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "program" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// debianPython is the interpreter with Debian's python3-torch (torchrun).
const debianPython = "/usr/bin/python3"

func requireTorchrun(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, debianPython, "-c", "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()").CombinedOutput()
	if err != nil {
		t.Skipf("skipping: %s cannot import torch.distributed with gloo (install Debian's python3-torch; scripts/setup.sh does): %v\n%s", debianPython, err, out)
	}
}

// programEnv is the environment of the program's processes: loopback only,
// one intra-op thread each, tagged with mark.
func programEnv(mark string) []string {
	env := proc.SetEnv(os.Environ(), "GLOO_SOCKET_IFNAME", "lo")
	env = proc.SetEnv(env, "OMP_NUM_THREADS", "1")
	env = proc.SetEnv(env, roleEnv, "program")
	for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"} {
		env = proc.UnsetEnv(env, k)
	}
	return proc.SetEnv(env, markEnv, mark)
}

// reports parses the program's JSON lines.
func reports(t testing.TB, out []byte) []report {
	t.Helper()
	var rs []report
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, `{"rank"`) {
			continue
		}
		var r report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("report %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// single runs the program alone: the reference result.
func single(t testing.TB, args []string, mark string) report {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, exe, args...)
	c.Env = programEnv(mark)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("single process: %v\n%s", err, stderr.String())
	}
	rs := reports(t, out)
	if len(rs) != 1 || rs[0].WorldSize != 1 {
		t.Fatalf("single process reported %+v", rs)
	}
	return rs[0]
}

// nodes runs the program as count torchrun nodes of nproc workers each on
// this machine — count torchrun agents meeting at one c10d rendezvous on
// loopback — and returns each agent's result.
func nodes(t testing.TB, count, nproc int, args []string, mark string) []*proc.Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(enginetest.Port(t)))
	results := make([]*proc.Result, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for r := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logDir := t.TempDir()
			l := torchrun.Launch{
				Python: debianPython, NProcPerNode: nproc, Program: exe, Args: args,
				Nodes:           &torchrun.Nodes{Count: count, Rank: r, Endpoint: endpoint, ID: "wfgen-sharded-" + mark},
				MonitorInterval: 200 * time.Millisecond, Redirects: "2", Tee: "2",
				LogDir: filepath.Join(logDir, "workers"),
			}
			results[r], errs[r] = torchrun.Run(context.Background(), l, proc.Command{
				LogDir: logDir, Timeout: 4 * time.Minute, Grace: 5 * time.Second, Env: programEnv(mark),
			})
		}()
	}
	wg.Wait()
	for r, res := range results {
		if errs[r] != nil || res.ExitCode != 0 {
			t.Fatalf("node %d: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", r, errs[r], res.ExitCode, res.StdoutTail, res.StderrTail)
		}
	}
	return results
}

// stragglers lists the processes still tagged with mark.
func stragglers(mark string) []string {
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == markEnv+"="+mark {
				cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
			}
		}
	}
	return left
}

// checkNoStragglers fails when a process the test started is still alive.
func checkNoStragglers(t *testing.T, mark string) {
	t.Helper()
	var left []string
	// A killed process can take a moment to be reaped; one still alive
	// after enginetest.Patience was left behind.
	if !enginetest.Await(func() bool { left = stragglers(mark); return len(left) == 0 }) {
		t.Errorf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// TestTwoNodes is a true two-node run on one machine: two torchrun agents
// (node ranks 0 and 1) meet at a c10d rendezvous on loopback and start two
// Go workers each (world size 4). The workers join a process group, run
// the sharded encoder job and all-reduce what each ran; rank 0's gathered
// embeddings equal the single process's exactly (same sha256), and no
// process is left behind.
func TestTwoNodes(t *testing.T) {
	requireTorchrun(t)
	mark := fmt.Sprintf("two-nodes-%d", time.Now().UnixNano())
	args := []string{"-items", "203", "-tokens", "24", "-checkpoints", t.TempDir(), "-timeout", "2m"}
	want := single(t, args, mark)
	results := nodes(t, 2, 2, args, mark)
	var rs []report
	for _, res := range results {
		out, err := os.ReadFile(res.StdoutPath)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, reports(t, out)...)
	}
	if len(rs) != 1 {
		t.Fatalf("want one report, from rank 0; got %+v\nstdout:\n%s\n%s", rs, results[0].StdoutTail, results[1].StdoutTail)
	}
	got := rs[0]
	if got.Rank != 0 || got.WorldSize != 4 || got.Backend != "gloo" || got.Items != 203 || got.ItemsRun != 203 {
		t.Errorf("rank 0 reported %+v", got)
	}
	if got.SHA256 != want.SHA256 {
		t.Errorf("sharded embeddings sha256 %s, single process %s", got.SHA256, want.SHA256)
	}
	checkNoStragglers(t, mark)
	t.Logf("single process: %+v", want)
	t.Logf("two nodes × two workers: %+v", got)
}

// TestEveryRank runs one node of three workers with -every-rank: every
// rank gets all the embeddings.
func TestEveryRank(t *testing.T) {
	requireTorchrun(t)
	mark := fmt.Sprintf("every-rank-%d", time.Now().UnixNano())
	args := []string{"-items", "50", "-tokens", "8", "-checkpoints", t.TempDir(), "-timeout", "2m"}
	want := single(t, args, mark)
	results := nodes(t, 1, 3, append(args, "-every-rank"), mark)
	out, err := os.ReadFile(results[0].StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	rs := reports(t, out)
	if len(rs) != 3 {
		t.Fatalf("want three reports, got %+v", rs)
	}
	seen := map[int]bool{}
	for _, r := range rs {
		seen[r.Rank] = true
		if r.WorldSize != 3 || r.SHA256 != want.SHA256 || r.ItemsRun != 50 {
			t.Errorf("rank %d reported %+v; single process %s", r.Rank, r, want.SHA256)
		}
	}
	if len(seen) != 3 {
		t.Errorf("ranks reporting: %v", seen)
	}
	checkNoStragglers(t, mark)
}

// TestStaticRendezvous runs torchrun's default rendezvous (static, no
// --standalone): the launcher hosts the store at MASTER_PORT itself and
// tells the workers to join it (TORCHELASTIC_USE_AGENT_STORE=True), so rank
// 0 must not try to host one there.
func TestStaticRendezvous(t *testing.T) {
	requireTorchrun(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("static-%d", time.Now().UnixNano())
	args := []string{"-items", "40", "-tokens", "8", "-checkpoints", t.TempDir(), "-timeout", "2m"}
	want := single(t, args, mark)
	logDir := t.TempDir()
	argv := append([]string{debianPython, "-c", torchrun.Bootstrap, "--nnodes", "1", "--master_addr", "127.0.0.1",
		"--master_port", strconv.Itoa(enginetest.Port(t)), "--nproc_per_node", "2", "--monitor_interval", "0.2",
		"--redirects", "2", "--tee", "2", "--log_dir", filepath.Join(logDir, "workers"), "--no_python", exe}, args...)
	res, err := proc.Run(context.Background(), proc.Command{
		Path: argv[0], Args: argv[1:], LogDir: logDir, Name: "torchrun",
		Timeout: 4 * time.Minute, Grace: 5 * time.Second, Env: programEnv(mark),
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("torchrun: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.StdoutTail, res.StderrTail)
	}
	out, err := os.ReadFile(res.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	rs := reports(t, out)
	if len(rs) != 1 || !rs[0].AgentStore || rs[0].WorldSize != 2 || rs[0].SHA256 != want.SHA256 {
		t.Fatalf("reports %+v; want rank 0 of 2 at the launcher's store, sha256 %s", rs, want.SHA256)
	}
	checkNoStragglers(t, mark)
}

// TestStragglersSeesTaggedProcesses checks the check: a tagged process is
// found while it runs and not after it ended.
func TestStragglersSeesTaggedProcesses(t *testing.T) {
	mark := fmt.Sprintf("control-%d", time.Now().UnixNano())
	c := exec.Command("sleep", "30")
	c.Env = append(os.Environ(), markEnv+"="+mark)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Start returns once the exec began; the new program's environment is
	// readable in /proc a moment later (the kernel sets it up after the
	// close-on-exec pipe that Start waits for is closed).
	var left []string
	enginetest.Await(func() bool { left = stragglers(mark); return len(left) > 0 })
	if len(left) != 1 || !strings.Contains(left[0], "sleep 30") {
		t.Errorf("running tagged process: stragglers = %q", left)
	}
	c.Process.Kill()
	c.Wait()
	checkNoStragglers(t, mark)
}

// BenchmarkShardedEmbedding runs the sharded embedding job (16,384 items
// of 256 tokens) alone and under torchrun at world sizes 1, 2 and 4 on this
// machine, one job per iteration, every worker with one intra-op thread.
// Besides the job's wall time (ns/op, launcher start-up included) it
// reports the job's own figures from rank 0: items/s over the sharded run,
// the slowest rank's compute, and the gather's overhead (the rest of the
// run's wall time: encoding, exchanging and decoding the shares, and
// waiting for the slowest rank).
func BenchmarkShardedEmbedding(b *testing.B) {
	requireTorchrun(b)
	dir := b.TempDir()
	args := []string{"-items", "16384", "-tokens", "256", "-checkpoints", dir, "-timeout", "5m"}
	for _, world := range []int{0, 1, 2, 4} {
		name := "alone"
		if world > 0 {
			name = fmt.Sprintf("world=%d", world)
		}
		b.Run(name, func(b *testing.B) {
			var ips, compute, gather, share float64
			for range b.N {
				mark := fmt.Sprintf("bench-%d", time.Now().UnixNano())
				var r report
				if world == 0 {
					r = single(b, args, mark)
				} else {
					results := nodes(b, 1, world, args, mark)
					out, err := os.ReadFile(results[0].StdoutPath)
					if err != nil {
						b.Fatal(err)
					}
					rs := reports(b, out)
					if len(rs) != 1 || rs[0].WorldSize != world {
						b.Fatalf("reports %+v", rs)
					}
					r = rs[0]
				}
				ips += r.ItemsPerSecond
				compute += r.ComputeSeconds
				gather += r.GatherSeconds
				share += r.GatherSeconds / r.Seconds
			}
			n := float64(b.N)
			b.ReportMetric(ips/n, "items/s")
			b.ReportMetric(1000*compute/n, "compute-ms")
			b.ReportMetric(1000*gather/n, "gather-ms")
			b.ReportMetric(100*share/n, "gather-%")
		})
	}
}
