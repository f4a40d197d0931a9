// Command servebench is the serving load test of `make bench`: it starts
// wfserve twice (without and with cross-request batching) and the Python
// peer (pyserver.py: FastAPI + uvicorn + torch, the same TorchScript files,
// the same thread settings) on loopback ports, each serving two encoders —
// the demo's tiny encoder (manifests/tiny-encoder.yaml, a lookup and one
// 64×64 projection) and a BERT-tiny-shaped text encoder (text-encoder.yaml,
// textencoder.go) — and drives each model on each server with 1, 8 and 32
// concurrent clients sending infer requests over keep-alive connections;
// the unbatched wfserve also serves gRPC (-grpc-addr) and is driven three
// ways: REST with JSON tensors, REST with binary tensors (the binary tensor
// data extension) and gRPC's ModelInfer with raw contents over one
// connection (requests.go).
// Before measuring, it checks that the three servers answer the same
// embeddings. Windows of the three servers are interleaved round after
// round so that load from elsewhere on the machine falls on all of them
// alike; it prints req/s and p50/p99 latency per model, server and
// concurrency, and the ratios the goals are stated in.
//
// It is bounded: every window lasts -window, and it runs -rounds rounds.
// Every server listens on 127.0.0.1 only, and every process it starts is
// stopped before it exits.
//
//	go run ./runtime/serve/internal/servebench [-models tiny-encoder,text-encoder] [-rounds 3] [-window 2s] [-threads 1] [-tokens 16] [-batch-delay 2ms]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/benchproc"
)

func main() {
	models := flag.String("models", "tiny-encoder,text-encoder", "comma-separated models to measure: tiny-encoder, text-encoder")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	window := flag.Duration("window", 2*time.Second, "length of one measurement window")
	threads := flag.Int("threads", 1, "intra-op threads of libtorch and of Python's torch")
	tokens := flag.Int("tokens", 16, "tokens per request")
	delay := flag.Duration("batch-delay", 2*time.Millisecond, "wfserve -batch-delay of the batching server")
	soakFor := flag.Duration("soak", 0, "after the table, run 32 clients for this long through wfserve -batch on the text encoder and check every answer bit for bit against the in-process client (0: no soak)")
	flag.Parse()
	if err := run(strings.Split(*models, ","), *rounds, *window, *threads, *tokens, *delay, *soakFor); err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(1)
	}
}

// server is one server under test.
type server struct {
	name string
	url  string
	grpc string // the gRPC address, when it serves one
	cmd  *exec.Cmd
}

// target is one way of sending a model's requests to a server: REST with
// JSON tensors, REST with binary tensors, or gRPC.
type target struct {
	name  string
	srv   *server
	proto string // "json", "binary" or "grpc"
}

// model is one model the servers serve.
type model struct {
	name       string
	manifest   string // relative to the module root
	checkpoint string // relative to the checkpoint root
	vocab      int
	about      string
}

var allModels = []model{
	{"tiny-encoder", "manifests/tiny-encoder.yaml", tinymodels.Files["tiny-encoder"], tinymodels.EncoderVocab,
		"tiny encoder (lookup + 64×64 projection, max_batch_size 8)"},
	{"text-encoder", "runtime/serve/internal/servebench/text-encoder.yaml", "checkpoints/text-encoder.pt", textVocab,
		"text encoder (BERT-tiny shape: 2 layers, hidden 128, max_batch_size 16)"},
}

func run(names []string, rounds int, window time.Duration, threads, ntok int, delay, soakFor time.Duration) error {
	var models []model
	for _, n := range names {
		i := slices.IndexFunc(allModels, func(m model) bool { return m.name == n })
		if i < 0 {
			return fmt.Errorf("-models: no model %q (have tiny-encoder, text-encoder)", n)
		}
		models = append(models, allModels[i])
	}
	w, err := benchproc.NewWorkspace("servebench")
	if err != nil {
		return err
	}
	defer w.Close()
	root, dir, bin := w.Root, w.Dir, w.Wfserve
	if err := buildTextEncoder(filepath.Join(dir, "checkpoints", "text-encoder.pt")); err != nil {
		return err
	}
	var manifests, pyModels []string
	for _, m := range models {
		manifests = append(manifests, filepath.Join(root, m.manifest))
		pyModels = append(pyModels, m.name+"="+filepath.Join(dir, m.checkpoint))
	}
	env := []string{"WORLDFOUNDRY_TORCH_THREADS=" + strconv.Itoa(threads), "WORLDFOUNDRY_TORCH_INTEROP_THREADS=1", "WORLDFOUNDRY_LOG_LEVEL=warn"}

	var servers []*server
	defer func() {
		for _, s := range servers {
			benchproc.Stop(s.cmd)
		}
	}()
	for _, c := range []struct {
		name  string
		extra []string
	}{{"wfserve", []string{"-grpc-addr", "127.0.0.1:0"}}, {"wfserve -batch", []string{"-batch", "-batch-delay", delay.String()}}} {
		args := append([]string{"-checkpoint-root", dir, "-device", "cpu"}, c.extra...)
		w, err := benchproc.StartWfserve(bin, env, append(args, manifests...)...)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		servers = append(servers, &server{name: c.name, url: w.URL, grpc: w.GRPCAddr, cmd: w.Cmd})
	}
	sock, url, err := benchproc.Listener()
	if err != nil {
		return err
	}
	py := exec.Command("/usr/bin/python3", append([]string{filepath.Join(root, "runtime", "serve", "internal", "servebench", "pyserver.py"),
		"3", strconv.Itoa(threads)}, pyModels...)...)
	py.ExtraFiles = []*os.File{sock} // its listening socket, fd 3
	// What wfserve's engine does itself, the peer gets from its
	// environment: torch.set_num_threads does not reach OpenBLAS's own
	// pool, and glibc malloc's thresholds are the engine's
	// (docs/engine.md, "Engine").
	py.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS="+strconv.Itoa(threads),
		"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864")
	py.Stdout, py.Stderr = io.Discard, os.Stderr
	err = py.Start()
	sock.Close()
	if err != nil {
		return fmt.Errorf("python: %w", err)
	}
	servers = append(servers, &server{name: "python (fastapi+uvicorn)", url: url, cmd: py})
	for _, s := range servers {
		if err := benchproc.WaitReady(s.url, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	// OpenBLAS picks its kernels (AVX2, AVX-512) for the CPU unless
	// OPENBLAS_CORETYPE, which every server inherits, names them; on this
	// text encoder that alone moves the figures by a third
	// (docs/benchmarks/README.md, "Serving").
	kernels := "OpenBLAS's own choice"
	if v := os.Getenv("OPENBLAS_CORETYPE"); v != "" {
		kernels = "OPENBLAS_CORETYPE=" + v
	}
	fmt.Printf("serving load test: %d tokens per request, %d rounds × %v windows, intra-op threads %d, GOMAXPROCS %d, %d CPUs, BLAS kernels: %s\n",
		ntok, rounds, window, threads, runtime.GOMAXPROCS(0), runtime.NumCPU(), kernels)
	for _, m := range models {
		if err := measure(m, servers, rounds, window, ntok); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	if soakFor > 0 {
		for _, s := range servers {
			benchproc.Stop(s.cmd)
		}
		servers = nil
		return soak(bin, dir, root, env, 32, soakFor, ntok)
	}
	return nil
}

// measure checks that the servers agree on m's embeddings, then runs the
// interleaved load windows and prints m's table.
func measure(m model, servers []*server, rounds int, window time.Duration, ntok int) error {
	reqs := make([]*request, 64)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range reqs {
		tokens := make([]int64, ntok)
		for j := range tokens {
			tokens[j] = int64(r.IntN(m.vocab))
		}
		reqs[i] = newRequest(m.name, i, tokens)
	}
	if err := agree(servers, reqs[:4]); err != nil {
		return err
	}
	var targets []target
	for _, s := range servers {
		targets = append(targets, target{s.name, s, "json"})
		if s.grpc != "" {
			targets = append(targets, target{s.name + " binary", s, "binary"}, target{s.name + " gRPC", s, "grpc"})
		}
	}
	levels := []int{1, 8, 32}
	type key struct {
		target string
		conc   int
	}
	lat := map[key][]time.Duration{}
	elapsed := map[key]time.Duration{}
	errs := map[key]int{}
	srvCPU, loadCPU := map[key]time.Duration{}, map[key]time.Duration{}
	// Warm-up: a short window per target and level.
	for _, t := range targets {
		for _, c := range levels {
			if _, _, n, err := load(t, reqs, c, window/4); err != nil || n > 0 {
				return fmt.Errorf("%s: %d failed requests while warming up (%v)", t.name, n, err)
			}
		}
	}
	for round := range rounds {
		for _, c := range levels {
			order := slices.Clone(targets)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				srv0, self0 := cpuTime(t.srv.cmd.Process.Pid), selfCPU()
				ls, took, nerr, err := load(t, reqs, c, window)
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				k := key{t.name, c}
				lat[k] = append(lat[k], ls...)
				elapsed[k] += took
				errs[k] += nerr
				srvCPU[k] += cpuTime(t.srv.cmd.Process.Pid) - srv0
				loadCPU[k] += selfCPU() - self0
			}
		}
	}

	fmt.Printf("\n%s\n", m.about)
	fmt.Printf("%-26s %8s %10s %10s %10s %8s %12s %12s\n", "server", "clients", "req/s", "p50", "p99", "errors", "server CPU", "load CPU")
	rps := map[key]float64{}
	for _, c := range levels {
		for _, t := range targets {
			k := key{t.name, c}
			ls := lat[k]
			slices.Sort(ls)
			rps[k] = float64(len(ls)) / elapsed[k].Seconds()
			perReq := func(d time.Duration) string {
				if len(ls) == 0 {
					return "-"
				}
				return (d / time.Duration(len(ls))).Round(time.Microsecond).String()
			}
			fmt.Printf("%-26s %8d %10.0f %10s %10s %8d %12s %12s\n", t.name, c, rps[k], benchproc.Percentile(ls, 50, time.Microsecond), benchproc.Percentile(ls, 99, time.Microsecond), errs[k], perReq(srvCPU[k]), perReq(loadCPU[k]))
		}
	}
	py32 := rps[key{servers[2].name, 32}]
	json32 := rps[key{servers[0].name, 32}]
	fmt.Printf("at 32 clients: wfserve ÷ python %.2f×, wfserve -batch ÷ python %.2f×, -batch ÷ unbatched %.2f×; wfserve binary ÷ JSON %.2f×, gRPC ÷ JSON %.2f×\n",
		json32/py32, rps[key{servers[1].name, 32}]/py32, rps[key{servers[1].name, 32}]/json32,
		rps[key{servers[0].name + " binary", 32}]/json32, rps[key{servers[0].name + " gRPC", 32}]/json32)
	for k, n := range errs {
		if n > 0 {
			return fmt.Errorf("%s at %d clients: %d failed requests", k.target, k.conc, n)
		}
	}
	return nil
}

// agree sends each request to every server, and to the first by binary
// REST and gRPC too, and checks that they answer the same embedding
// (within 1e-5) as the first server's JSON answer.
func agree(servers []*server, reqs []*request) error {
	for i, req := range reqs {
		var first []float64
		check := func(who string, got []float64) error {
			if first == nil {
				first = got
				return nil
			}
			if len(got) != len(first) {
				return fmt.Errorf("%s: request %d: %d floats, %s answered %d", who, i, len(got), servers[0].name, len(first))
			}
			for j := range got {
				if math.Abs(got[j]-first[j]) > 1e-5 {
					return fmt.Errorf("%s: request %d: embedding[%d] = %g, %s answered %g", who, i, j, got[j], servers[0].name, first[j])
				}
			}
			return nil
		}
		for _, s := range servers {
			got, err := req.jsonEmbedding(http.DefaultClient, s.url)
			if err != nil {
				return fmt.Errorf("%s: request %d: %w", s.name, i, err)
			}
			if err := check(s.name, got); err != nil {
				return err
			}
			if s.grpc == "" {
				continue
			}
			hc := &http.Client{}
			send := binarySender(hc, s.url)
			if got, err = send(req); err != nil {
				return fmt.Errorf("%s binary: request %d: %w", s.name, i, err)
			}
			if err := check(s.name+" binary", got); err != nil {
				return err
			}
			gsend, done, err := grpcSender(s.grpc)
			if err != nil {
				return err
			}
			got, err = gsend(req)
			done()
			if err != nil {
				return fmt.Errorf("%s gRPC: request %d: %w", s.name, i, err)
			}
			if err := check(s.name+" gRPC", got); err != nil {
				return err
			}
		}
	}
	return nil
}

// load runs conc clients of target t for d and returns every request's
// latency, the time taken and the number of failed requests.
func load(t target, reqs []*request, conc int, d time.Duration) ([]time.Duration, time.Duration, int, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var send func(*request) ([]float64, error)
	switch t.proto {
	case "json":
		send = func(r *request) ([]float64, error) { return nil, r.postJSON(hc, t.srv.url) }
	case "binary":
		send = binarySender(hc, t.srv.url)
	case "grpc":
		gsend, done, err := grpcSender(t.srv.grpc) // one connection, as a gRPC client holds
		if err != nil {
			return nil, 0, 0, err
		}
		defer done()
		send = gsend
	}
	var mu sync.Mutex
	var all []time.Duration
	failed := 0
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			bad := 0
			for i := w; time.Now().Before(end); i += conc {
				t0 := time.Now()
				if _, err := send(reqs[i%len(reqs)]); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			failed += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start), failed, nil
}

// cpuTime returns the user and system CPU time process pid has used
// (/proc/PID/stat, in clock ticks of 10 ms), or 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// selfCPU returns the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pct returns the nearest-rank percentile of sorted latencies.
