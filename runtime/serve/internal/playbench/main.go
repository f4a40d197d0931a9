// Command playbench is issue 45's many-players benchmark: it starts
// wfserve (built from ./cmd/wfserve) on loopback serving the learned world
// model (manifests/worldmodel.yaml, the checkpoint examples/worldmodel
// trains into out/worldmodel) with a session key, and opens -players
// paced sessions of its play task over WebSockets (runtime/remote), each a
// scripted player that changes its controls now and then, for -duration;
// one more player is the playground page in headless Chromium (-probe),
// whose key-to-frame latencies it reads from the page. For every chunk a
// Go player receives it records its hash and whether it came later than
// one frame period after its playback time — the session's schedule as
// the player sees it, chunk 0's arrival plus k frame periods. At the end
// each player asks the server for a snapshot (sealed with the session
// key, opened here with it) and, once the server is stopped, its controls
// log is replayed in this process ALONE (one session at a time on its own
// client: -verify-workers clients side by side) and every frame is checked
// bit for bit against what the player received.
//
// -modes runs the configurations in turn: "batched" is the manifest as it
// is (session_batching, method steps), "unbatched" a copy without
// session_batching and with method step (one forward call per session
// and chunk, as before issue 45). With -rounds above 1 the modes
// interleave (batched, unbatched, batched, ...).
//
//	go run ./runtime/serve/internal/playbench [-players 256] [-duration 2m] [-modes batched,unbatched]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/worldfoundry/wfgen/examples/worldmodel"
	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/remote"
	"github.com/worldfoundry/wfgen/runtime/serve/internal/benchproc"
	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/stream"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the engine of the in-process replays
)

type config struct {
	players       int
	duration      time.Duration
	modes         []string
	rounds        int
	threads       int
	maxConcurrent int
	changeEvery   float64
	probe         bool
	verify        bool
	workers       int
	ramp          time.Duration
	serverArgs    []string
	maxBatch      int
	perf          time.Duration
}

func main() {
	var c config
	modes := flag.String("modes", "batched,unbatched", "configurations to run, in order, comma-separated: batched (the manifest's session_batching), unbatched (one forward per session and chunk)")
	flag.IntVar(&c.players, "players", 256, "scripted Go players (WebSocket sessions) per configuration")
	flag.DurationVar(&c.duration, "duration", 2*time.Minute, "how long every player plays, once all have started")
	flag.IntVar(&c.rounds, "rounds", 1, "rounds of the configurations, interleaved")
	flag.IntVar(&c.threads, "threads", 1, "libtorch intra-op threads of the server and of the replays")
	flag.IntVar(&c.maxConcurrent, "max-concurrent", 1, "wfserve -max-concurrent: engine calls at once")
	flag.Float64Var(&c.changeEvery, "change-every", 10, "a scripted player changes its controls every this many chunks on average")
	flag.BoolVar(&c.probe, "probe", true, "play one more player in headless Chromium (the playground page) and report its key-to-frame latency")
	flag.BoolVar(&c.verify, "verify", true, "replay every player's controls log alone in process and compare every frame")
	flag.IntVar(&c.workers, "verify-workers", 2, "in-process clients replaying side by side (each replays one session at a time)")
	flag.DurationVar(&c.ramp, "ramp", 2*time.Second, "players start spread over this time")
	flag.IntVar(&c.maxBatch, "max-batch-size", 0, "the batched configuration's session_batching max_batch_size (0: the manifest's)")
	flag.DurationVar(&c.perf, "perf", 0, "when > 0, record `perf record -g` of wfserve for this long in the middle of each run (perf-<mode>-<round>.data in the working directory)")
	server := flag.String("server-args", "", "more wfserve flags, space-separated")
	flag.Parse()
	c.modes = strings.Split(*modes, ",")
	if *server != "" {
		c.serverArgs = strings.Fields(*server)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "playbench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.players < 1 || c.duration <= 0 || c.rounds < 1 || c.workers < 1 {
		return fmt.Errorf("-players %d, -duration %v, -rounds %d, -verify-workers %d: want at least 1 of each", c.players, c.duration, c.rounds, c.workers)
	}
	for _, m := range c.modes {
		if m != "batched" && m != "unbatched" {
			return fmt.Errorf("-modes: %q is neither batched nor unbatched", m)
		}
	}
	root, err := benchproc.ModuleRoot()
	if err != nil {
		return err
	}
	ckpt := filepath.Join(root, "out", "worldmodel")
	if rep, err := worldmodel.Ensure(context.Background(), ckpt); err != nil {
		return err
	} else if rep != nil {
		fmt.Fprintln(os.Stderr, "playbench: trained the world model into", ckpt)
	}
	dir, err := os.MkdirTemp("", "playbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "wfserve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wfserve")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building wfserve: %w", err)
	}
	keyFile := filepath.Join(dir, "session.key")
	raw := make([]byte, 32)
	rand.Read(raw)
	key := []byte(hex.EncodeToString(raw)) // wfserve's key is the file's bytes
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return err
	}
	manifests := map[string]string{"batched": filepath.Join(root, "manifests", "worldmodel.yaml")}
	if manifests["unbatched"], err = unbatchedManifest(manifests["batched"], dir); err != nil {
		return err
	}
	if c.maxBatch > 0 {
		if manifests["batched"], err = resizedManifest(manifests["batched"], dir, c.maxBatch); err != nil {
			return err
		}
	}
	// This process's engine (the replays) gets the server's threads.
	os.Setenv("WORLDFOUNDRY_TORCH_THREADS", strconv.Itoa(c.threads))
	os.Setenv("WORLDFOUNDRY_TORCH_INTEROP_THREADS", "1")

	fmt.Printf("playbench: %d scripted players%s, %v each, world model at 10 fps over WebSockets; wfserve -max-concurrent %d, intra-op threads %d; GOMAXPROCS %d, %d CPUs\n",
		c.players, map[bool]string{true: " + 1 Chromium probe", false: ""}[c.probe], c.duration, c.maxConcurrent, c.threads, runtime.GOMAXPROCS(0), runtime.NumCPU())
	if c.maxBatch > 0 {
		fmt.Printf("playbench: batched with session_batching max_batch_size %d\n", c.maxBatch)
	}
	var results []*result
	for r := range c.rounds {
		for _, mode := range c.modes {
			res, err := runOne(c, mode, r+1, bin, manifests[mode], ckpt, keyFile, key)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", mode, r+1, err)
			}
			res.print()
			results = append(results, res)
		}
	}
	fmt.Println()
	fmt.Println("| mode | round | players | chunks | late > 1 period | lag p50 / p99 / max | probe key-to-frame p50 / p99 (n) | sessions per call | CPU wfserve + players | machine busy | load before → after | frames equal alone |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		fmt.Println(r.row())
	}
	for _, r := range results {
		if r.mismatched > 0 || r.verifyErrs > 0 {
			return fmt.Errorf("%s, round %d: %d players' frames differ from playing alone, %d could not be checked", r.mode, r.round, r.mismatched, r.verifyErrs)
		}
	}
	return nil
}

// unbatchedManifest writes a copy of the world model's manifest without
// session_batching and with the unbatched step method into dir.
func unbatchedManifest(path, dir string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var out []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch strings.TrimSpace(l) {
		case "method: steps":
			l = strings.Replace(l, "steps", "step", 1)
		case "session_batching:":
			i++ // and its max_batch_size line
			continue
		}
		out = append(out, l)
	}
	s := strings.Join(out, "\n")
	var yaml []string // the lines that are not comments
	for _, l := range out {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			yaml = append(yaml, l)
		}
	}
	if y := strings.Join(yaml, "\n"); strings.Contains(y, "session_batching") || !strings.Contains(y, "method: step\n") {
		return "", fmt.Errorf("%s: could not make the unbatched copy (its play task's layout changed?)", path)
	}
	// The checkpoint's relative URI resolves against -checkpoint-root.
	p := filepath.Join(dir, "worldmodel-unbatched.yaml")
	return p, os.WriteFile(p, []byte(s), 0o644)
}

// resizedManifest writes a copy of the world model's manifest whose
// session_batching max_batch_size is n into dir.
func resizedManifest(path, dir string, n int) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.Split(string(b), "\n")
	done := false
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i-1]) == "session_batching:" && strings.HasPrefix(strings.TrimSpace(lines[i]), "max_batch_size:") {
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
			lines[i] = indent + "max_batch_size: " + strconv.Itoa(n)
			done = true
		}
	}
	if !done {
		return "", fmt.Errorf("%s: no session_batching max_batch_size to change", path)
	}
	p := filepath.Join(dir, fmt.Sprintf("worldmodel-batch%d.yaml", n))
	return p, os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
}

// player is one scripted player's record.
type player struct {
	id     int
	hashes [][32]byte      // by chunk index
	lag    []time.Duration // arrival − playback time, chunks 1 on
	late   int
	snap   stream.Snapshot
	err    error
}

type result struct {
	mode                  string
	round, players        int
	duration              time.Duration
	chunks, late          int
	lag                   []time.Duration
	probe                 []press
	probeErr              error
	batchMean             float64
	batchCalls            float64
	serverCPU, benchCPU   float64 // seconds over the window
	busy                  float64 // the machine's busy fraction over the window
	wall                  time.Duration
	loadBefore, loadAfter string
	failed                int
	firstErr              error
	verified, mismatched  int
	verifyErrs            int
	firstMismatch         string
	verifyTime            time.Duration
}

func runOne(c config, mode string, round int, bin, manifest, ckpt, keyFile string, key []byte) (*result, error) {
	res := &result{mode: mode, round: round, players: c.players, duration: c.duration}
	f, diags, err := validate.File(manifest)
	if err != nil || len(diags) > 0 {
		return nil, fmt.Errorf("%s: %v %v", manifest, err, diags)
	}
	env := []string{"WORLDFOUNDRY_TORCH_THREADS=" + strconv.Itoa(c.threads), "WORLDFOUNDRY_TORCH_INTEROP_THREADS=1", "WORLDFOUNDRY_LOG_LEVEL=warn"}
	args := []string{"-checkpoint-root", ckpt, "-device", "cpu", "-session-key-file", keyFile,
		"-max-sessions", strconv.Itoa(c.players + 16), "-max-concurrent", strconv.Itoa(c.maxConcurrent)}
	args = append(append(args, c.serverArgs...), manifest)
	srv, err := benchproc.StartWfserve(bin, env, args...)
	if err != nil {
		return nil, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			benchproc.Stop(srv.Cmd)
			stopped = true
		}
	}
	defer stop()
	rc, err := remote.New(f.Spec, srv.URL)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	period := time.Second / time.Duration(f.Spec.Realtime.FPS)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	begin := t0.Add(c.ramp)
	end := begin.Add(c.duration)
	players := make([]*player, c.players)
	var wg sync.WaitGroup
	var started atomic.Int64
	for i := range players {
		p := &player{id: i}
		players[i] = p
		at := t0.Add(time.Duration(int64(c.ramp) * int64(i) / int64(c.players)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(at))
			started.Add(1)
			p.err = play(ctx, rc, p, end, period, c.changeEvery)
		}()
	}
	var probe sync.WaitGroup
	if c.probe {
		probe.Add(1)
		go func() {
			defer probe.Done()
			res.probe, res.probeErr = probePlayer(ctx, srv.URL, begin, end)
		}()
	}
	// The window: from when every player started to the end.
	time.Sleep(time.Until(begin))
	res.loadBefore = loadavg()
	cpu0, busy0, self0, w0 := procCPU(srv.Cmd.Process.Pid), machineCPU(), selfCPU(), time.Now()
	var perfDone chan error
	if c.perf > 0 {
		perfDone = make(chan error, 1)
		go func() {
			time.Sleep(c.duration/2 - c.perf/2)
			out := fmt.Sprintf("perf-%s-%d.data", mode, round)
			cmd := exec.Command("perf", "record", "-g", "-o", out, "-p", strconv.Itoa(srv.Cmd.Process.Pid), "--", "sleep", strconv.FormatFloat(c.perf.Seconds(), 'f', 0, 64))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			perfDone <- cmd.Run()
		}()
	}
	time.Sleep(time.Until(end))
	cpu1, busy1, self1 := procCPU(srv.Cmd.Process.Pid), machineCPU(), selfCPU()
	res.wall = time.Since(w0)
	res.serverCPU, res.benchCPU = cpu1-cpu0, self1-self0
	res.busy = busy1.since(busy0)
	res.loadAfter = loadavg()
	wg.Wait()
	probe.Wait()
	if perfDone != nil {
		if err := <-perfDone; err != nil {
			fmt.Fprintln(os.Stderr, "playbench: perf:", err)
		}
	}
	res.batchMean, res.batchCalls = sessionBatches(srv.URL)
	stop() // the replays get the machine
	for _, p := range players {
		if p.err != nil {
			res.failed++
			if res.firstErr == nil {
				res.firstErr = fmt.Errorf("player %d: %w", p.id, p.err)
			}
			continue
		}
		res.chunks += len(p.hashes)
		res.late += p.late
		res.lag = append(res.lag, p.lag...)
	}
	slices.Sort(res.lag)
	if c.verify {
		// Tokens open with the server's key: they are its own, untouched.
		for _, p := range players {
			if p.err == nil {
				if _, err := stream.Open(p.snap.Token, key); err != nil {
					p.err = fmt.Errorf("its snapshot token: %w", err)
					res.verifyErrs++
				}
			}
		}
		t := time.Now()
		if err := verify(c, f.Spec, ckpt, players, res); err != nil {
			return nil, err
		}
		res.verifyTime = time.Since(t)
	}
	return res, nil
}

// play is one scripted player: a paced session of the play task from the
// checkpoint's own start, whose controls change every changeEvery chunks
// on average (nothing, or one of the four directions), until end; then
// it takes the session's snapshot.
func play(ctx context.Context, rc *remote.Client, p *player, end time.Time, period time.Duration, changeEvery float64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rng := mrand.New(mrand.NewPCG(uint64(p.id), 45))
	choices := []stream.Controls{{}, {"up": 1}, {"down": 1}, {"left": 1}, {"right": 1}}
	sess, err := rc.Stream(ctx, "play", map[string]any{}, stream.WithControls(choices[rng.IntN(len(choices))]))
	if err != nil {
		return err
	}
	var first time.Time
	for ch, err := range sess.Chunks(ctx) {
		if err != nil {
			return err
		}
		now := time.Now()
		if ch.Index != len(p.hashes) {
			return fmt.Errorf("chunk %d came as the %dth", ch.Index, len(p.hashes))
		}
		p.hashes = append(p.hashes, sha256.Sum256(ch.Video.Frames.Data))
		if ch.Index == 0 {
			first = now
		} else {
			lag := now.Sub(first.Add(time.Duration(ch.Index) * period))
			p.lag = append(p.lag, lag)
			if lag > period {
				p.late++
			}
		}
		if now.After(end) {
			// The snapshot at this chunk boundary: its log covers every
			// chunk received.
			if p.snap, err = sess.Snapshot(); err != nil {
				return err
			}
			if p.snap.Log.End != len(p.hashes) {
				return fmt.Errorf("the snapshot's log ends at chunk %d, %d chunks came", p.snap.Log.End, len(p.hashes))
			}
			return nil
		}
		if rng.Float64()*changeEvery < 1 {
			if err := sess.SetControls(choices[rng.IntN(len(choices))]); err != nil {
				return err
			}
		}
	}
	return errors.New("the session ended before the run")
}

// verify replays every player's controls log in process, one session at a
// time on each of c.workers clients, and compares every frame.
func verify(c config, sp *spec.ModelInferenceSpec, ckpt string, players []*player, res *result) error {
	next := make(chan *player)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var werr error
	for range c.workers {
		local, err := client.New(sp, client.WithCheckpointRoot(ckpt), client.WithDevice("cpu"))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer local.Close()
			for p := range next {
				bad, err := replay(local, p)
				mu.Lock()
				switch {
				case err != nil:
					res.verifyErrs++
					if werr == nil {
						werr = fmt.Errorf("player %d: replay: %w", p.id, err)
					}
				case bad != "":
					res.mismatched++
					if res.firstMismatch == "" {
						res.firstMismatch = fmt.Sprintf("player %d: %s", p.id, bad)
					}
				default:
					res.verified++
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range players {
		if p.err == nil {
			next <- p
		}
	}
	close(next)
	wg.Wait()
	if werr != nil {
		fmt.Fprintln(os.Stderr, "playbench:", werr)
	}
	return nil
}

// replay plays p's controls log alone in process and returns where its
// frames first differ from p's ("" when none does).
func replay(local *client.Client, p *player) (string, error) {
	ctx := context.Background()
	sess, err := local.Stream(ctx, "play", map[string]any{}, stream.WithReplay(p.snap.Log), stream.WithPacing(false))
	if err != nil {
		return "", err
	}
	n := 0
	for ch, err := range sess.Chunks(ctx) {
		if err != nil {
			return "", err
		}
		if ch.Index >= len(p.hashes) {
			return fmt.Sprintf("the replay has chunk %d, the player got %d", ch.Index, len(p.hashes)), nil
		}
		if sha256.Sum256(ch.Video.Frames.Data) != p.hashes[ch.Index] {
			return fmt.Sprintf("chunk %d differs (of %d)", ch.Index, len(p.hashes)), nil
		}
		n++
	}
	if n != len(p.hashes) {
		return fmt.Sprintf("the replay has %d chunks, the player got %d", n, len(p.hashes)), nil
	}
	return "", nil
}

// sessionBatches reads wfserve_session_batch_size: the mean sessions per
// call and the calls.
func sessionBatches(url string) (mean, calls float64) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		val := func() float64 {
			v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			return v
		}
		switch {
		case strings.HasPrefix(l, "wfserve_session_batch_size_sum{"):
			sum += val()
		case strings.HasPrefix(l, "wfserve_session_batch_size_count{"):
			calls += val()
		}
	}
	if calls == 0 {
		return 0, 0
	}
	return sum / calls, calls
}

// procCPU is a process's user + system CPU time in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}

// selfCPU is this process's CPU time in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// cpuTimes is /proc/stat's first line: busy and total jiffies.
type cpuTimes struct{ busy, total float64 }

func machineCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var t cpuTimes
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

func (t cpuTimes) since(t0 cpuTimes) float64 {
	if t.total == t0.total {
		return 0
	}
	return (t.busy - t0.busy) / (t.total - t0.total)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func (r *result) print() {
	fmt.Printf("\n%s, round %d: %d players for %v (window %v)\n", r.mode, r.round, r.players, r.duration, r.wall.Round(time.Millisecond))
	fmt.Printf("  chunks %d, later than one frame period after their playback time: %d (%.3f %%)\n", r.chunks, r.late, 100*float64(r.late)/math.Max(1, float64(r.chunks)))
	fmt.Printf("  arrival − playback time p50 %s, p99 %s, max %s\n",
		benchproc.Percentile(r.lag, 50, time.Millisecond/10), benchproc.Percentile(r.lag, 99, time.Millisecond/10), last(r.lag))
	if r.failed > 0 {
		fmt.Printf("  %d players failed; the first: %v\n", r.failed, r.firstErr)
	}
	if r.batchCalls > 0 {
		fmt.Printf("  sessions per forward call: mean %.2f over %.0f calls\n", r.batchMean, r.batchCalls)
	} else {
		fmt.Println("  sessions per forward call: — (no session-batched calls: one forward per session and chunk)")
	}
	fmt.Printf("  CPU over the window: wfserve %.2f cores, this process %.2f cores; the machine %.0f %% busy; load %s → %s\n",
		r.serverCPU/r.wall.Seconds(), r.benchCPU/r.wall.Seconds(), 100*r.busy, r.loadBefore, r.loadAfter)
	if r.probeErr != nil {
		fmt.Printf("  probe: %v (%d presses)\n", r.probeErr, len(r.probe))
	} else if len(r.probe) > 0 {
		fmt.Printf("  probe key-to-frame over %d presses: %s\n", len(r.probe), probeSummary(r.probe))
	}
	if r.verified+r.mismatched+r.verifyErrs > 0 {
		fmt.Printf("  replayed alone in process: %d players' frames equal, %d differ, %d not checked (%v)", r.verified, r.mismatched, r.verifyErrs, r.verifyTime.Round(time.Second))
		if r.firstMismatch != "" {
			fmt.Printf("; first: %s", r.firstMismatch)
		}
		fmt.Println()
	}
}

func last(s []time.Duration) string {
	if len(s) == 0 {
		return "-"
	}
	return s[len(s)-1].Round(time.Millisecond / 10).String()
}

func pct(ms []float64, p int) float64 {
	s := slices.Clone(ms)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

func probeSummary(ps []press) string {
	var total, wait, rtt, step []float64
	for _, p := range ps {
		total, wait, rtt, step = append(total, p.Total), append(wait, p.Wait), append(rtt, p.RTT), append(step, p.Step)
	}
	return fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms; of which waiting for the frame's turn p50 %.0f, round trip p50 %.0f / p99 %.0f, the server's step p50 %.1f / p99 %.1f",
		pct(total, 50), pct(total, 99), pct(total, 100), pct(wait, 50), pct(rtt, 50), pct(rtt, 99), pct(step, 50), pct(step, 99))
}

func totals(ps []press) []float64 {
	var t []float64
	for _, p := range ps {
		t = append(t, p.Total)
	}
	return t
}

func (r *result) row() string {
	probe := "—"
	if len(r.probe) > 0 {
		t := totals(r.probe)
		probe = fmt.Sprintf("%.0f / %.0f ms (%d)", pct(t, 50), pct(t, 99), len(t))
	}
	ok := fmt.Sprintf("%d of %d", r.verified, r.players)
	if r.verified+r.mismatched+r.verifyErrs == 0 {
		ok = "not checked"
	}
	perCall := "—"
	if r.batchCalls > 0 {
		perCall = fmt.Sprintf("%.2f", r.batchMean)
	}
	players := strconv.Itoa(r.players)
	if r.failed > 0 {
		players += fmt.Sprintf(" (%d failed)", r.failed)
	}
	return fmt.Sprintf("| %s | %d | %s | %d | %d (%.3f %%) | %s / %s / %s | %s | %s | %.2f + %.2f cores | %.0f %% | %s → %s | %s |",
		r.mode, r.round, players, r.chunks, r.late, 100*float64(r.late)/math.Max(1, float64(r.chunks)),
		benchproc.Percentile(r.lag, 50, time.Millisecond), benchproc.Percentile(r.lag, 99, time.Millisecond), last(r.lag),
		probe, perCall, r.serverCPU/r.wall.Seconds(), r.benchCPU/r.wall.Seconds(), 100*r.busy, r.loadBefore, r.loadAfter, ok)
}
