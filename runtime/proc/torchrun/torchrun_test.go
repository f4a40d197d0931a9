package torchrun

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/logctx"
	"github.com/worldfoundry/wfgen/runtime/proc"
)

const roleEnv = "WFGEN_TORCHRUN_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "goworker":
		os.Exit(goWorker())
	case "fakepython":
		// Stands in for the interpreter: print the argv, fail like a job
		// whose worker crashed.
		b, _ := json.Marshal(os.Args[1:])
		fmt.Printf("%s\n", b)
		fmt.Fprintln(os.Stderr, "worker 1 failed: ChildFailedError")
		os.Exit(7)
	default:
		os.Exit(2)
	}
}

// goWorker is a Go worker under torchrun --no_python: it reads its place in
// the job from the environment and reports it as one JSON line.
func goWorker() int {
	w, err := WorkerFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dev, err := w.LocalDevice(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fields, err := logctx.DecodeEnv(os.Getenv(logctx.EnvContext))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(map[string]any{
		"worker": "go", "rank": w.Rank, "world_size": w.WorldSize, "local_rank": w.LocalRank,
		"local_world_size": w.LocalWorldSize, "master_addr": w.MasterAddr, "master_port": w.MasterPort,
		"device": dev, "args": os.Args[1:], "run_id": fields["run_id"],
	})
	os.Stdout.Write(append(b, '\n')) // one write: lines never interleave
	return 0
}

func TestCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		l    Launch
		want string
	}{
		{"standalone module", Launch{Python: "/usr/bin/python3", NProcPerNode: 2, Module: "pkg.worker", Args: []string{"--steps", "3"}},
			"/usr/bin/python3 -c BOOTSTRAP --standalone --nproc_per_node 2 -m pkg.worker --steps 3"},
		{"default python", Launch{NProcPerNode: 1, Module: "w"},
			"python3 -c BOOTSTRAP --standalone --nproc_per_node 1 -m w"},
		{"no python", Launch{NProcPerNode: 4, Program: "/opt/bin/worker", Args: []string{"-x"}},
			"python3 -c BOOTSTRAP --standalone --nproc_per_node 4 --no_python /opt/bin/worker -x"},
		{"multi node", Launch{NProcPerNode: 8, Module: "w", Nodes: &Nodes{Count: 2, Rank: 1, Endpoint: "10.0.0.1:29400", ID: "job7"}},
			"python3 -c BOOTSTRAP --nnodes 2 --node_rank 1 --rdzv_backend c10d --rdzv_endpoint 10.0.0.1:29400 --rdzv_id job7 --nproc_per_node 8 -m w"},
		{"launcher options", Launch{NProcPerNode: 2, Module: "w", MonitorInterval: 250 * time.Millisecond, Redirects: "2", Tee: "0:1,1:2", LogDir: "/tmp/l"},
			"python3 -c BOOTSTRAP --standalone --nproc_per_node 2 --monitor_interval 0.25 --redirects 2 --tee 0:1,1:2 --log_dir /tmp/l -m w"},
		{"multi node go worker, ipv6", Launch{NProcPerNode: 1, Program: "w", Nodes: &Nodes{Count: 3, Rank: 0, Endpoint: "[::1]:5000"}},
			"python3 -c BOOTSTRAP --nnodes 3 --node_rank 0 --rdzv_backend c10d --rdzv_endpoint [::1]:5000 --nproc_per_node 1 --no_python w"},
	}
	for _, c := range cases {
		got, err := c.l.Command()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(got) < 3 || got[1] != "-c" || got[2] != Bootstrap {
			t.Errorf("%s: %q does not start with the interpreter, -c and Bootstrap", c.name, got)
			continue
		}
		got[2] = "BOOTSTRAP"
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, strings.Join(got, " "), c.want)
		}
	}
}

func TestCommandRejectsBadLaunches(t *testing.T) {
	t.Parallel()
	bad := map[string]Launch{
		"no procs":         {Module: "w"},
		"neither":          {NProcPerNode: 1},
		"both":             {NProcPerNode: 1, Module: "w", Program: "p"},
		"bad module":       {NProcPerNode: 1, Module: "my-worker.py"},
		"zero nodes":       {NProcPerNode: 1, Module: "w", Nodes: &Nodes{Endpoint: "h:1"}},
		"rank past nodes":  {NProcPerNode: 1, Module: "w", Nodes: &Nodes{Count: 2, Rank: 2, Endpoint: "h:1"}},
		"no port":          {NProcPerNode: 1, Module: "w", Nodes: &Nodes{Count: 2, Endpoint: "h"}},
		"bad port":         {NProcPerNode: 1, Module: "w", Nodes: &Nodes{Count: 2, Endpoint: "h:70000"}},
		"empty host":       {NProcPerNode: 1, Module: "w", Nodes: &Nodes{Count: 2, Endpoint: ":29400"}},
		"negative workers": {NProcPerNode: -2, Module: "w"},
		"bad redirects":    {NProcPerNode: 1, Module: "w", Redirects: "4"},
		"bad tee map":      {NProcPerNode: 1, Module: "w", Tee: "0:1,"},
		"negative monitor": {NProcPerNode: 1, Module: "w", MonitorInterval: -time.Second},
	}
	for name, l := range bad {
		if argv, err := l.Command(); err == nil {
			t.Errorf("%s: accepted: %v", name, argv)
		}
		if res, err := Run(context.Background(), l, proc.Command{LogDir: t.TempDir()}); err == nil || res != nil {
			t.Errorf("%s: Run = %v, %v", name, res, err)
		}
	}
}

// TestRunReturnsResultOnFailure runs the launch with a stand-in interpreter
// that exits 7: the Result comes back, with no error.
func TestRunReturnsResultOnFailure(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := Launch{Python: exe, NProcPerNode: 2, Module: "pkg.worker", Args: []string{"--flag"}}
	res, err := Run(context.Background(), l, proc.Command{
		LogDir: t.TempDir(),
		Env:    append(os.Environ(), roleEnv+"=fakepython"),
	})
	if err != nil {
		t.Fatalf("Run error on a failed job: %v", err)
	}
	if res.ExitCode != 7 || res.Success() || !strings.Contains(res.StderrTail, "ChildFailedError") {
		t.Fatalf("result = %+v", res)
	}
	var argv []string
	if err := json.Unmarshal([]byte(res.StdoutTail), &argv); err != nil {
		t.Fatal(err)
	}
	want, _ := l.Command()
	if !slices.Equal(argv, want[1:]) {
		t.Errorf("interpreter got %v; want %v", argv, want[1:])
	}
	if filepath.Base(res.LifecyclePath) != "torchrun.lifecycle.jsonl" {
		t.Errorf("lifecycle %s", res.LifecyclePath)
	}
}

// debianPython is the interpreter with Debian's python3-torch.
const debianPython = "/usr/bin/python3"

// requireTorch skips the test, saying why, when /usr/bin/python3 cannot
// import torch.distributed; any other failure later is a test failure.
func requireTorch(t *testing.T) {
	t.Helper()
	torchCheck.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, debianPython, "-c", "import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()").CombinedOutput()
		if err != nil {
			torchCheck.skip = fmt.Sprintf("skipping: %s cannot import torch with gloo (install Debian's python3-torch; scripts/setup.sh does): %v\n%s", debianPython, err, lastLines(string(out), 5))
		}
	})
	if torchCheck.skip != "" {
		t.Skip(torchCheck.skip)
	}
}

var torchCheck struct {
	once sync.Once
	skip string
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// debianLaunch sets the launcher options the tests use: a short monitor
// interval (the default 5 s delays the end of every job), and worker stderr
// redirected to per-rank files and teed, which also sidesteps torch 1.13's
// failure to parse its default --redirects 0 on Python >= 3.11.
func debianLaunch(l *Launch, logDir string) {
	l.MonitorInterval = 200 * time.Millisecond
	l.Redirects, l.Tee = "2", "2"
	l.LogDir = filepath.Join(logDir, "workers")
}

// loopbackEnv keeps gloo's traffic on the loopback interface.
func loopbackEnv(extra ...string) []string {
	env := proc.SetEnv(os.Environ(), "GLOO_SOCKET_IFNAME", "lo")
	env = proc.SetEnv(env, "OMP_NUM_THREADS", "1")
	return append(env, extra...)
}

// reports parses the workers' JSON lines from the captured stdout.
func reports(t *testing.T, res *proc.Result) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(res.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, `{"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("worker line %q: %v", line, err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return int(a["rank"].(float64) - b["rank"].(float64)) })
	return out
}

func checkRun(t *testing.T, res *proc.Result, err error) {
	t.Helper()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("torchrun failed: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, res.ExitCode, res.StdoutTail, res.StderrTail)
	}
}

// TestTorchrunPythonWorkers runs real gloo workers on CPU that all-reduce
// rank+1: two in one standalone job, and a true two-node job — two
// launchers (node ranks 0 and 1) meeting at a c10d rendezvous on loopback,
// two workers each. It is the reference for the Go workers' process groups
// (examples/sharded has the Go two-node job).
func TestTorchrunPythonWorkers(t *testing.T) {
	// Not parallel: torchrun --standalone rendezvouses on the fixed port 29400.
	requireTorch(t)
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, nodes := range []int{1, 2} {
		t.Run(map[int]string{1: "standalone", 2: "two-node"}[nodes], func(t *testing.T) {
			endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(enginetest.Port(t)))
			results := make([]*proc.Result, nodes)
			errs := make([]error, nodes)
			var wg sync.WaitGroup
			for n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					logDir := t.TempDir()
					l := Launch{Python: debianPython, NProcPerNode: 2, Module: "allreduce_worker"}
					if nodes > 1 {
						l.Nodes = &Nodes{Count: nodes, Rank: n, Endpoint: endpoint, ID: "wfgen-python-two-node"}
					}
					debianLaunch(&l, logDir)
					results[n], errs[n] = Run(context.Background(), l, proc.Command{
						Dir: dir, LogDir: logDir, Timeout: 3 * time.Minute, Grace: 5 * time.Second,
						Env: loopbackEnv("PYTHONPATH=" + dir),
					})
				}()
			}
			wg.Wait()
			var reps []map[string]any
			for n := range nodes {
				checkRun(t, results[n], errs[n])
				reps = append(reps, reports(t, results[n])...)
			}
			slices.SortFunc(reps, func(a, b map[string]any) int { return int(a["rank"].(float64) - b["rank"].(float64)) })
			world := 2 * nodes
			sum := float64(world * (world + 1) / 2)
			if len(reps) != world {
				t.Fatalf("got %d worker reports, want %d", len(reps), world)
			}
			for i, r := range reps {
				if r["rank"] != float64(i) || r["world_size"] != float64(world) || r["local_rank"] != float64(i%2) || r["sum"] != sum {
					t.Errorf("worker %d reported %v; want rank %d of %d and all_reduce sum %v", i, r, i, world, sum)
				}
			}
			t.Logf("python workers: %v", reps)
		})
	}
}

// TestTorchrunGoWorkers runs this test binary as two Go workers under
// torchrun --no_python, once single-node (standalone) and once through the
// multi-node form on a loopback rendezvous endpoint.
func TestTorchrunGoWorkers(t *testing.T) {
	// Not parallel: torchrun --standalone rendezvouses on the fixed port 29400.
	requireTorch(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]*Nodes{
		"standalone": nil,
		"multi-node": {Count: 1, Rank: 0, Endpoint: net.JoinHostPort("127.0.0.1", strconv.Itoa(enginetest.Port(t))), ID: "wfgen-test"},
	}
	for _, name := range []string{"standalone", "multi-node"} {
		t.Run(name, func(t *testing.T) {
			logDir := t.TempDir()
			l := Launch{Python: debianPython, NProcPerNode: 2, Program: exe, Args: []string{"--greeting", "hi"}, Nodes: forms[name]}
			debianLaunch(&l, logDir)
			ctx := logctx.With(context.Background(), logctx.Fields{"run_id": "go-workers-" + name})
			res, err := Run(ctx, l, proc.Command{
				LogDir: logDir, Timeout: 3 * time.Minute, Grace: 5 * time.Second,
				Env: loopbackEnv(roleEnv + "=goworker"),
			})
			checkRun(t, res, err)
			reps := reports(t, res)
			if len(reps) != 2 {
				t.Fatalf("got %d worker reports:\n%s\n%s", len(reps), res.StdoutTail, res.StderrTail)
			}
			for i, r := range reps {
				ok := r["worker"] == "go" && r["rank"] == float64(i) && r["world_size"] == 2.0 &&
					r["local_rank"] == float64(i) && r["local_world_size"] == 2.0 && r["device"] == "cpu" &&
					r["master_addr"] != "" && r["master_port"].(float64) > 0 &&
					fmt.Sprint(r["args"]) == "[--greeting hi]" && r["run_id"] == "go-workers-"+name
				if !ok {
					t.Errorf("worker %d reported %v", i, r)
				}
			}
			t.Logf("go workers: %v", reps)
		})
	}
}

// TestBootstrapArgvAndLibuv runs the launcher's real argv — python3 -c
// Bootstrap, where the seed runs python -m torch.distributed.run — against a
// stand-in torch package, and checks what the bootstrap does before
// torch.distributed.run starts (docs/differences.md): it passes the
// launch's arguments through, sets USE_LIBUV=0 and
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 and makes TCPStore default to
// use_libuv=False, unless USE_LIBUV is set.
func TestBootstrapArgvAndLibuv(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath(DefaultPython)
	if err != nil {
		t.Skipf("no %s: %v", DefaultPython, err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"torch/__init__.py": "",
		"torch/distributed/__init__.py": `class TCPStore:
    def __init__(self, host, port, use_libuv=True):
        """TCPStore(host_name, port, ..., use_libuv=True)"""
        self.use_libuv = use_libuv
`,
		"torch/distributed/run.py": `import json, os, sys
import torch.distributed as d
print(json.dumps({"args": sys.argv[1:], "name": __name__, "USE_LIBUV": os.environ.get("USE_LIBUV"),
    "share": os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE"), "store_libuv": d.TCPStore("h", 1).use_libuv}))
`,
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := Launch{NProcPerNode: 2, Module: "pkg.worker", Args: []string{"--steps", "3"}}
	argv, err := l.Command()
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != "python3" || argv[1] != "-c" || argv[2] != Bootstrap {
		t.Fatalf("argv starts %q, want python3 -c Bootstrap", argv[:2])
	}
	type report struct {
		Args       []string
		Name       string
		Libuv      *string `json:"USE_LIBUV"`
		Share      *string
		StoreLibuv bool `json:"store_libuv"`
	}
	run := func(libuv string) report {
		t.Helper()
		cmd := exec.Command(py, argv[1:]...)
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != "USE_LIBUV" && k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" && k != "PYTHONPATH" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "PYTHONPATH="+dir)
		if libuv != "" {
			cmd.Env = append(cmd.Env, "USE_LIBUV="+libuv)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("USE_LIBUV=%q: %v\n%s", libuv, err, out)
		}
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("USE_LIBUV=%q: %v: %s", libuv, err, out)
		}
		return r
	}
	str := func(p *string) string {
		if p == nil {
			return "<unset>"
		}
		return *p
	}
	r := run("")
	if !slices.Equal(r.Args, argv[3:]) || r.Name != "__main__" {
		t.Errorf("torch.distributed.run got args %q as %s, want %q as __main__", r.Args, r.Name, argv[3:])
	}
	if str(r.Libuv) != "0" || str(r.Share) != "1" || r.StoreLibuv {
		t.Errorf("USE_LIBUV unset: USE_LIBUV %s, share %s, store use_libuv %v; want 0, 1, false", str(r.Libuv), str(r.Share), r.StoreLibuv)
	}
	r = run("1")
	if str(r.Libuv) != "1" || str(r.Share) != "<unset>" || !r.StoreLibuv {
		t.Errorf("USE_LIBUV=1: USE_LIBUV %s, share %s, store use_libuv %v; want torch's defaults", str(r.Libuv), str(r.Share), r.StoreLibuv)
	}
}
